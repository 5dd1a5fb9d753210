"""Internal configs built from the run config by field name: each knob has one source, its section field.

A component takes its own frozen dataclass (``TrainerConfig``, ``RewardConfig``, ``SamplingParams``, ...),
never a ``TrainConfig``. ``build(TrainerConfig, config.algorithm, config.optim, config.run, ...)`` fills
each parameter of the target from the one section with a field of that name, so a knob is written once,
as a field with a description, and copied by no hand-written mapper::

    build(SamplingParams, config.rollout, defaults=("stop_strings", "stop_token_ids", "ignore_eos", "seed"))

A value that is derived or named differently is passed as a keyword, where the derivation is written
(``logprob_temperature=config.rollout.temperature``). A parameter that is not a knob of the run config
keeps its default only when ``defaults`` names it. Anything else raises ``TypeError`` naming the
parameter: no source, two sources, a keyword or default that is not a parameter, a default for a
parameter that has none. So an internal field can never take its default silently because its knob was
forgotten (``tests/unit/config/test_build.py`` builds every internal config of a run).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

T = TypeVar("T")

__all__ = ["build", "sources"]


def sources(
    target: Callable[..., Any], *sections: BaseModel, defaults: Iterable[str] = (), **values: Any
) -> dict[str, str]:
    """Where each keyword parameter of ``target`` comes from: ``"<Section>.<field>"``, ``"derived"`` or
    ``"default"``; raises ``TypeError`` as ``build`` does."""
    name = getattr(target, "__name__", repr(target))
    params = _keyword_parameters(target)
    defaults = set(defaults)
    for key in [*values, *defaults]:
        if key not in params:
            raise TypeError(f"{name} has no parameter {key!r} (given as a value or a default)")
    out: dict[str, str] = {}
    for param, has_default in params.items():
        found = [f"{type(s).__name__}.{param}" for s in sections if param in type(s).model_fields]
        found += ["derived"] * (param in values) + ["default"] * (param in defaults)
        if len(found) > 1:
            raise TypeError(f"{name}.{param} has {len(found)} sources: {', '.join(found)}")
        if not found:
            raise TypeError(
                f"{name}.{param} has no source: add a config field {param!r}, pass it derived, or name "
                "it in defaults="
            )
        if found == ["default"] and not has_default:
            raise TypeError(f"{name}.{param} has no default to keep")
        out[param] = found[0]
    return out


def build(target: Callable[..., T], *sections: BaseModel, defaults: Iterable[str] = (), **values: Any) -> T:
    """``target(**kwargs)``, each keyword parameter filled by name (see the module docstring). A list from
    a section becomes a tuple where the parameter is annotated ``tuple`` (frozen dataclasses hold tuples)."""
    params = inspect.signature(target).parameters
    kwargs: dict[str, Any] = {}
    for param, source in sources(target, *sections, defaults=defaults, **values).items():
        if source == "default":
            continue
        if source == "derived":
            kwargs[param] = values[param]
            continue
        section = next(s for s in sections if param in type(s).model_fields)
        value = getattr(section, param)
        if isinstance(value, list) and str(params[param].annotation).startswith("tuple"):
            value = tuple(value)
        kwargs[param] = value
    return target(**kwargs)


def _keyword_parameters(target: Callable[..., Any]) -> dict[str, bool]:
    """Parameter name -> whether it has a default, for every parameter that can be passed by keyword."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {
        p.name: p.default is not inspect.Parameter.empty
        for p in inspect.signature(target).parameters.values()
        if p.kind in kinds
    }
