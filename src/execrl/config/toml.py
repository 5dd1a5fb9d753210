"""Writing a run config as TOML (``tomli-w``): the run directory's ``config.toml``, which ``--resume``
reads back, and ``execrl train --print-config``, which puts each field's description above its key.

Why a library writer: the hand-written one had already written an emoji as a JSON surrogate pair, which
TOML rejects, so such a run could not be resumed (issue 14, class 7).
"""

from __future__ import annotations

import re

import tomli_w
from pydantic import BaseModel

from execrl.config.base import ConfigError, Section
from execrl.config.load import surrogate_key

HEADER = (
    "# execrl: the resolved config, each key under its description "
    "(valid TOML: `execrl train --config FILE` or `execrl sft --config FILE` reads it back)"
)
_TABLE = re.compile(r"\[(\w+)(?:\.(\w+))?\]")
_KEY = re.compile(r"([A-Za-z_]\w*) = ")


def to_toml(config: Section, *, descriptions: bool = False) -> str:
    """The resolved config as TOML; unset optional keys (``None``) are left out. With ``descriptions``, a
    ``#`` comment with each field's description goes above its key and each table's above its header."""
    data = config.model_dump(exclude_none=True)
    bad = surrogate_key(data, "")
    if bad is not None:  # validate_config refuses these; a config built in code could still hold one
        raise ConfigError(f"{bad}: holds a lone surrogate, which TOML cannot store")
    text = tomli_w.dumps(data)
    return _described(text, config) if descriptions else text


def _described(text: str, config: Section) -> str:
    """``text`` (as ``tomli_w`` lays it out: ``[section]`` tables, ``key = value`` lines, a dict-valued
    field as its own ``[section.field]`` table) with the descriptions inserted as comments, and each
    unset optional key shown commented out at the end of its table."""
    out = [HEADER, ""]
    section: type[BaseModel] | None = None
    data_table = False  # inside [section.field]: its keys are data (suite names), not fields
    unset: list[str] = []
    for line in text.splitlines():
        table = _TABLE.fullmatch(line)
        if table is not None:
            name, field = table.groups()
            _flush(out, unset, section)
            if field is None:
                values = getattr(config, name)
                unset = [key for key in type(values).model_fields if getattr(values, key) is None]
            info = type(config).model_fields[name]
            section = info.annotation if isinstance(info.annotation, type) else None
            if field is not None and section is not None:
                info = section.model_fields[field]
            data_table = field is not None
            out.append(f"# {info.description}")
        else:
            key = _KEY.match(line)
            if key and not data_table and section is not None and key.group(1) in section.model_fields:
                out.append(f"# {section.model_fields[key.group(1)].description}")
        out.append(line)
    _flush(out, unset, section)
    return "\n".join(out) + "\n"


def _flush(out: list[str], unset: list[str], section: type[BaseModel] | None) -> None:
    """The unset optional keys of the table just written, as comments before the blank line closing it."""
    if section is None or not unset:
        return
    lines = [f"# {section.model_fields[key].description}\n# {key} = (unset)" for key in unset]
    at = len(out) - 1 if out and out[-1] == "" else len(out)
    out[at:at] = "\n".join(lines).split("\n")
    unset.clear()
