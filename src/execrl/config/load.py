"""Reading a run config: a TOML file (optional) plus ``key=value`` overrides, validated into ``TrainConfig``.

Why pydantic here and dataclasses elsewhere: a config file is an edge where users make mistakes, so every
field is checked and an error names the key and what to set (``rollout.samples_per_prompt: must be >= 2
for group-relative advantages; set rollout.samples_per_prompt=4``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from execrl.config.base import ConfigError, Section
from execrl.config.train import TrainConfig
from execrl.inputs import InputFileError, read_text_file

if TYPE_CHECKING:
    from execrl.config.sft import SftConfig

S = TypeVar("S", bound=Section)

_CONFIG_MAX_BYTES = 1 << 20
MAX_KEY_PARTS = 8  # the deepest key of the config has 3 parts (tasks.suites.NAME)
MAX_VALUE_DEPTH = 32  # nested tables and arrays; the config nests 4 deep at most
MAX_LISTED_PROBLEMS = 10  # an invalid config lists this many problems, then "and N more"


def _shown(item: str) -> str:
    return repr(item) if len(item) <= 120 else repr(item[:120]) + f"... ({len(item)} characters)"


def parse_override(item: str) -> tuple[list[str], Any]:
    """``a.b=value`` -> (["a", "b"], value); the value is read as TOML, else kept as a string. A key of
    more than ``MAX_KEY_PARTS`` parts or a value nested past ``MAX_VALUE_DEPTH`` is refused (issue 35,
    class 12: an override nested 3,000 deep raised ``RecursionError``)."""
    if "=" not in item:
        raise ConfigError(f"override {_shown(item)} must look like section.key=value")
    key, raw = item.split("=", 1)
    path = key.strip().split(".")
    if not all(path):
        raise ConfigError(f"override {_shown(item)} has an empty key part")
    if len(path) > MAX_KEY_PARTS:
        raise ConfigError(
            f"override {_shown(key)}: a key of {len(path)} parts; config keys have at most {MAX_KEY_PARTS}"
        )
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    except RecursionError:
        value = _too_deep(f"override {_shown(key)}")
    if value_depth(value) > MAX_VALUE_DEPTH:
        _too_deep(f"override {_shown(key)}")
    return path, value


def _too_deep(where: str) -> Any:
    raise ConfigError(f"{where}: the value nests more than {MAX_VALUE_DEPTH} tables or arrays deep")


def value_depth(value: Any) -> int:
    """How deep tables (dicts) and arrays (lists) nest in ``value``; iterative, so any depth is measured."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth + 1)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _apply(data: dict[str, Any], path: list[str], value: Any) -> None:
    node = data
    for part in path[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {'.'.join(path)}: {part} is not a section")
    node[path[-1]] = value


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """Read a TOML file (optional), apply overrides, validate. Errors name the key and what to set."""
    return load_typed(TrainConfig, path, overrides)


def load_typed(schema: type[S], path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()) -> S:
    """``load_config`` for any top-level config (``TrainConfig``, ``SftConfig``)."""
    data = _read_toml(path) if path is not None else {}
    for item in overrides:
        key_path, value = parse_override(item)
        _apply(data, key_path, value)
    return validate_typed(schema, data, source=str(path) if path else "overrides")


def _read_toml(path: str | Path) -> dict[str, Any]:
    try:
        return tomllib.loads(read_text_file(path, "config file", max_bytes=_CONFIG_MAX_BYTES))
    except InputFileError as exc:
        raise ConfigError(str(exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    except RecursionError:
        raise ConfigError(f"{path}: invalid TOML: nested too deeply") from None


def load_run_config(path: str | Path) -> TrainConfig | SftConfig:
    """A run directory's ``config.toml``, whichever command wrote it: ``execrl sft``'s (it has a
    ``[data]`` table) or ``execrl train``'s. Both have the ``[model]`` the run started from."""
    from execrl.config.sft import SftConfig

    data = _read_toml(path)
    if "data" in data:
        return validate_typed(SftConfig, data, source=str(path))
    return validate_typed(TrainConfig, data, source=str(path))


def validate_config(data: dict[str, Any], *, source: str = "config") -> TrainConfig:
    return validate_typed(TrainConfig, data, source=source)


def validate_typed(schema: type[S], data: dict[str, Any], *, source: str = "config") -> S:
    """``data`` validated into ``schema``; every error names its key and what to set."""
    if value_depth(data) > MAX_VALUE_DEPTH:
        _too_deep(source)
    bad_key = surrogate_key(data, "")
    if bad_key is not None:
        raise ConfigError(f"{source}: {bad_key}: not valid Unicode text (a lone surrogate); use UTF-8")
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            hint = (
                "unknown key; check the spelling with --print-config"
                if err["type"] == "extra_forbidden"
                else err["msg"].removeprefix("Value error, ")
            )
            # A check across sections (no key of its own) names the keys in its message already.
            lines.append(
                f"{key}: {hint} (got {_short(err.get('input'))}); set it as {key}=VALUE" if key else hint
            )
        if len(lines) == 1:
            raise ConfigError(f"{source}: invalid configuration: {lines[0]}") from exc
        shown = lines[:MAX_LISTED_PROBLEMS]
        if len(lines) > len(shown):  # 60,000 unknown keys printed 60,000 lines (issue 35, class 12)
            shown.append(f"and {len(lines) - len(shown)} more problems")
        text = "\n".join(f"  {line}" for line in shown)
        raise ConfigError(f"{source}: invalid configuration ({len(lines)} problems):\n{text}") from exc


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def surrogate_key(value: Any, path: str) -> str | None:
    """The dotted key of the first string holding a lone surrogate (undecodable bytes from argv)."""
    if isinstance(value, str):
        return path if any(0xD800 <= ord(c) <= 0xDFFF for c in value) else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and surrogate_key(key, path) is not None:
            return f"{path}.{key}".lstrip(".")
        found = surrogate_key(item, f"{path}.{key}".lstrip("."))
        if found is not None:
            return found
    return None
