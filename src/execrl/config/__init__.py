"""execrl.config (split in the next commit)."""

from execrl.config.train import *  # noqa: F403
from execrl.config.train import ConfigError, TrainConfig, load_config, to_toml, validate_config  # noqa: F401
