"""The "structured" verifier: extract JSON, validate it against ``json_schema``, check ``expected_values``.

Extraction: the first fenced block tagged ``json`` (or bare) that parses, else the first complete JSON
object or array anywhere in the answer (``json.JSONDecoder.raw_decode`` from each ``{``/``[``). NaN and
Infinity are rejected (not JSON). Validation uses the schema's own ``$schema`` draft (Draft 2020-12 when
absent) and reports the most relevant error with its JSON path. ``expected_values`` are dotted paths
("address.city", "items.0.name": an integer part indexes a list) compared with JSON equality (``true`` is
not ``1``; ``1`` equals ``1.0``).

Reward: ``binary`` gives 1 only if the schema holds and every expected value matches; ``partial`` gives
the share of expected values matched once the schema holds (0 if it does not).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from execrl.rewards.extraction import clean_completion, fenced_blocks
from execrl.rewards.registry import register_verifier
from execrl.rewards.types import RewardConfig, Score
from execrl.sandbox.types import ellipsize
from execrl.tasks.schema import StructuredSpec, Task

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

DETAIL_MAX_CHARS = 160
_MISSING = object()


@dataclass(frozen=True)
class ExtractedJson:
    """``found`` is False when nothing parsed; ``error`` then says why (empty when no JSON was attempted)."""

    found: bool
    value: Any = None
    error: str = ""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def extract_json(text: str) -> ExtractedJson:
    """The JSON value in a completion by the module's rules."""
    cleaned = clean_completion(text)
    first_error = ""
    for block in fenced_blocks(cleaned):
        if block.tag in ("json", "") and block.text.strip():
            try:
                return ExtractedJson(True, _DECODER.decode(block.text.strip()))
            except ValueError as exc:
                first_error = first_error or str(exc)
    for start, char in enumerate(cleaned):
        if char not in "{[":
            continue
        try:
            value, _end = _DECODER.raw_decode(cleaned, start)
        except ValueError as exc:
            first_error = first_error or str(exc)
            continue
        return ExtractedJson(True, value)
    return ExtractedJson(False, error=first_error)


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Validator:
    from jsonschema.validators import validator_for  # imported here: keeps `execrl --help` fast

    schema = json.loads(schema_json)
    cls = validator_for(schema)
    cls.check_schema(schema)  # a broken schema is a task bug: SchemaError -> verifier_error
    return cls(schema)


def schema_error(value: Any, schema: Mapping[str, Any]) -> str | None:
    """``"<json path>: <message>"`` of the most relevant violation, or ``None`` when ``value`` is valid."""
    from jsonschema.exceptions import best_match

    validator = _validator(json.dumps(schema, sort_keys=True))
    error = best_match(validator.iter_errors(value))
    if error is None:
        return None
    return f"{error.json_path}: {_short(error.message)}"


def lookup(value: Any, path: str) -> Any:
    """The value at a dotted path, or the module's ``_MISSING`` sentinel."""
    current = value
    for part in path.split("."):
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif (
            isinstance(current, list)
            and part.lstrip("-").isdigit()
            and -len(current) <= int(part) < len(current)
        ):
            current = current[int(part)]
        else:
            return _MISSING
    return current


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: booleans only equal booleans, numbers compare by value, containers recursively."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _short(text: str) -> str:
    return ellipsize(text, DETAIL_MAX_CHARS)


@register_verifier("structured")
def score_structured(task: Task, completion: str, config: RewardConfig) -> Score:
    """JSON extracted from the answer must satisfy the schema and hold the expected values."""
    spec = task.spec
    if not isinstance(spec, StructuredSpec):
        raise TypeError(
            f"task {task.id!r} has domain 'structured' but a {type(spec).__name__}; expected StructuredSpec"
        )
    extracted = extract_json(completion)
    if not extracted.found:
        if extracted.error:
            return Score.failure(f"invalid_json: {_short(extracted.error)}")
        return Score.failure("no_json_found")
    violation = schema_error(extracted.value, spec.json_schema)
    if violation is not None:
        return Score.failure(f"schema_mismatch: {violation}")
    if not spec.expected_values:
        return Score.success()
    mismatches = []
    for path, want in spec.expected_values.items():
        got = lookup(extracted.value, path)
        if got is _MISSING:
            mismatches.append(f"{path}: expected {json.dumps(want)}, missing")
        elif not json_equal(want, got):
            mismatches.append(f"{path}: expected {json.dumps(want)}, got {_short(json.dumps(got))}")
    total = len(spec.expected_values)
    fraction = (total - len(mismatches)) / total
    if not mismatches:
        return Score.success()
    reward = fraction if config.mode == "partial" else 0.0
    detail = f"{mismatches[0]} ({total - len(mismatches)}/{total} values match)"
    return Score.failure(f"wrong_value: {detail}", reward=reward, pass_fraction=fraction)
