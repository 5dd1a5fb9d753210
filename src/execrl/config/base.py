"""What every config section shares, and the config's error (no torch anywhere in ``execrl.config``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ConfigError(ValueError):
    """A config file or override is wrong; the message names the key and what to set."""


class Section(BaseModel):
    """A ``[section]`` of the run config: unknown keys are refused, values are frozen, every field has a
    description (``execrl train --print-config`` prints it above the key)."""

    # No NaN or infinity anywhere: a NaN penalty or an infinite timeout is a typo, not a setting.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
