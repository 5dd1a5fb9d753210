"""Named task suites: ``load_suite(name, split)``, ``list_suites()``, ``register_suite(name, builder)``.

A suite is a builder ``(split, seed) -> list[Task]`` plus the splits it provides. The built-in generators
(``execrl.tasks.suites.BUILTIN_SUITES``: functions, stdio, repository, math, structured) are imported
lazily on first use, so importing ``execrl.tasks`` stays cheap; ``humaneval`` is eval-only (split
``test``). Every task a suite returns is validated (a generator bug surfaces as a ``TaskValidationError``
naming the task and field, not as a confusing reward of 0 later).
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from execrl.registry import Registry
from execrl.tasks.errors import FieldError, SuiteError, TaskValidationError
from execrl.tasks.schema import Task
from execrl.tasks.serialize import task_problems

SuiteBuilder = Callable[[str, int], list[Task]]
ALL_SPLITS: tuple[str, ...] = ("train", "test")


@dataclass(frozen=True)
class Suite:
    name: str
    builder: SuiteBuilder
    splits: tuple[str, ...] = ALL_SPLITS
    description: str = ""


@dataclass(frozen=True)
class SuiteInfo:
    """What ``list_suites`` reports: the domains and the number of tasks per split."""

    name: str
    splits: tuple[str, ...]
    domains: tuple[str, ...]
    counts: dict[str, int]
    description: str = ""


_SUITES: Registry[Suite] = Registry(
    "task suite",
    plural="suites",
    duplicate_error=SuiteError,
    unknown_error=SuiteError,
    remove_hint="unregister_suite",
)
_builtins_loaded = False


def register_suite(
    name: str,
    builder: SuiteBuilder,
    *,
    splits: Sequence[str] = ALL_SPLITS,
    description: str = "",
) -> None:
    """Add a suite. A name already registered raises ``SuiteError`` (unregister first to replace it)."""
    _ensure_builtins()
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise SuiteError(f"suite name {name!r} must be non-empty letters, digits, '-' or '_'")
    unknown = [s for s in splits if s not in ALL_SPLITS]
    if unknown or not splits:
        raise SuiteError(
            f"suite {name!r}: splits must be a non-empty subset of {ALL_SPLITS}, got {list(splits)}"
        )
    _SUITES.add(name, Suite(name, builder, tuple(splits), description))  # a taken name raises SuiteError


def unregister_suite(name: str) -> None:
    """Remove a suite (tests and users replacing a built-in); unknown names raise."""
    _ensure_builtins()
    _SUITES.remove(name)


def _load_builtin_generators() -> dict[str, SuiteBuilder]:
    try:
        module = importlib.import_module("execrl.tasks.suites")
    except ModuleNotFoundError as exc:
        if exc.name != "execrl.tasks.suites":
            raise
        return {}
    builtins = getattr(module, "BUILTIN_SUITES", None)
    if builtins is None:
        if getattr(module, "__file__", None) is None:  # a bare directory (namespace package): not built yet
            return {}
        raise SuiteError("execrl.tasks.suites does not define BUILTIN_SUITES: dict[str, builder]")
    return dict(builtins)


def _ensure_builtins() -> None:
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True
    from execrl.tasks import humaneval

    _SUITES.add(
        "humaneval",
        Suite("humaneval", humaneval.build, ("test",), "HumanEval (164 problems, OpenAI): evaluation only"),
    )
    for name, builder in _load_builtin_generators().items():
        doc = (getattr(builder, "__doc__", None) or "").strip().splitlines()
        _SUITES.add(name, Suite(name, builder, ALL_SPLITS, doc[0] if doc else "built-in generator"))


def _get(name: str) -> Suite:
    _ensure_builtins()
    return _SUITES.get(name)


def suite_names() -> list[str]:
    _ensure_builtins()
    return _SUITES.names()


def suite_splits(name: str) -> tuple[str, ...]:
    """The splits suite ``name`` provides, without building it; unknown names raise ``SuiteError``."""
    return _get(name).splits


def load_suite(name: str, split: str = "train", *, seed: int = 0) -> list[Task]:
    """Build suite ``name``'s ``split``; every task is validated (all problems reported at once)."""
    suite = _get(name)
    if split not in suite.splits:
        why = " (it is for evaluation only: training on it would contaminate the evaluation)"
        raise SuiteError(
            f"suite {name!r} has no split {split!r}{why if suite.splits == ('test',) else ''}; "
            f"use split={suite.splits[0]!r}"
        )
    tasks = list(suite.builder(split, seed))
    errors = [FieldError(f"{name}/{split}:{t.id}", f, m) for t in tasks for f, m in task_problems(t)]
    counts = Counter(t.id for t in tasks)
    errors += [FieldError(f"{name}/{split}", "id", f"duplicate id {i!r}") for i, n in counts.items() if n > 1]
    if errors:
        raise TaskValidationError(errors, source=f"suite {name!r} split {split!r}")
    return tasks


def default_split(name: str) -> str:
    """``train`` when the suite has it, else its first split (``test`` for eval-only suites)."""
    splits = _get(name).splits
    return "train" if "train" in splits else splits[0]


def suite_info(name: str, *, seed: int = 0) -> SuiteInfo:
    """Domains and per-split counts of one suite (builds it, so it costs what a load costs)."""
    suite = _get(name)
    counts: dict[str, int] = {}
    domains: set[str] = set()
    for split in suite.splits:
        tasks = load_suite(name, split, seed=seed)
        counts[split] = len(tasks)
        domains.update(t.domain for t in tasks)
    return SuiteInfo(name, suite.splits, tuple(sorted(domains)), counts, suite.description)


def list_suites(*, seed: int = 0) -> list[SuiteInfo]:
    """Every registered suite with its domains and counts per split, sorted by name."""
    return [suite_info(name, seed=seed) for name in suite_names()]


def is_task_source(name: str) -> bool:
    """A suite argument given as a task file path or fsspec URL rather than a registered suite name."""
    return "/" in name or name.endswith((".jsonl", ".json", ".gz"))
