"""Helpers shared by the built-in suite generators: seeded randomness, splits, ids and answer fences.

Every generator is a pure function of ``(split, seed)``: it builds its whole instance pool in a fixed order,
then a seeded shuffle decides which instances are held out for ``test``. Building the pool first (rather
than generating train and test separately) is what keeps ids stable and the two splits disjoint.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from execrl.tasks.schema import Split, Task

T = TypeVar("T")

TEST_FRACTION = 0.17  # share of each pool held out for test: the test split is ~20% the size of train
SPLITS: tuple[Split, ...] = ("train", "test")


def check_split(split: str) -> Split:
    """Return ``split`` typed as a ``Split`` or raise naming the valid values."""
    if split == "train":
        return "train"
    if split == "test":
        return "test"
    raise ValueError(f"unknown split {split!r}; use one of {list(SPLITS)}")


def rng_for(seed: int, *parts: object) -> random.Random:
    """A ``Random`` seeded from ``seed`` and a path of names, so that adding a family never reshuffles
    another family's instances (string seeding is stable across processes, unlike ``hash``)."""
    key = ":".join([str(seed), *map(str, parts)])
    return random.Random(key)


def held_out(count: int, seed: int, *parts: object, fraction: float = TEST_FRACTION) -> frozenset[int]:
    """Indices in ``range(count)`` that belong to the test split (a seeded ~``fraction`` of them).

    Pools of one or two instances stay entirely in train: holding out half of a tiny family would make
    the test split mostly one family.
    """
    if count < 3:
        return frozenset()
    n_test = max(1, round(count * fraction))
    order = list(range(count))
    rng_for(seed, "split", *parts).shuffle(order)
    return frozenset(order[:n_test])


def select(items: Sequence[T], limit: int, seed: int, *parts: object) -> list[tuple[int, T]]:
    """Up to ``limit`` items with their original indices, chosen by a seeded sample, in index order."""
    indexed = list(enumerate(items))
    if len(indexed) <= limit:
        return indexed
    chosen = rng_for(seed, "select", *parts).sample(indexed, limit)
    return sorted(chosen, key=lambda pair: pair[0])


def in_split(index: int, test_indices: frozenset[int], split: Split) -> bool:
    return (index in test_indices) == (split == "test")


def split_pool(pool: Sequence[T], seed: int, split: Split, *parts: object) -> list[tuple[int, T]]:
    """The ``(position, item)`` pairs of ``pool`` that belong to ``split`` (``held_out`` under ``parts``)."""
    test_indices = held_out(len(pool), seed, *parts)
    return [(position, item) for position, item in enumerate(pool) if in_split(position, test_indices, split)]


def distinct_instances(
    make: Callable[[random.Random], T],
    rng: random.Random,
    count: int,
    *,
    key: Callable[[T], str],
    usable: Callable[[T], bool],
) -> list[T]:
    """``count`` draws of ``make(rng)`` with distinct ``key`` (the question text), skipping unusable ones
    (e.g. a wrong answer that equals the right one). Draws stay in order, so ids are stable for a seed."""
    instances: list[T] = []
    seen: set[str] = set()
    while len(instances) < count:
        instance = make(rng)
        if key(instance) not in seen and usable(instance):
            seen.add(key(instance))
            instances.append(instance)
    return instances


def template_tasks(
    suite: str,
    templates: Mapping[str, tuple[Callable[[random.Random], T], int]],
    split: str,
    seed: int,
    per_template: int,
    *,
    key: Callable[[T], str],
    usable: Callable[[T], bool],
    build_task: Callable[[str, int, T, int, Split], Task],
) -> list[Task]:
    """The ``split`` of a suite made of random templates (``name -> (make, difficulty)``): per template,
    ``per_template`` distinct usable instances drawn from its own seeded stream, held out by
    ``split_pool``, each turned into a task by ``build_task(name, index, instance, difficulty, split)``."""
    chosen = check_split(split)
    tasks = []
    for name, (make, difficulty) in templates.items():
        pool = distinct_instances(make, rng_for(seed, suite, name), per_template, key=key, usable=usable)
        for index, instance in split_pool(pool, seed, chosen, suite, name):
            tasks.append(build_task(name, index, instance, difficulty, chosen))
    return tasks


def task_id(suite: str, name: str, index: int) -> str:
    """``functions/sum_digits/0007``: suite, template name, index in the template's pool."""
    return f"{suite}/{name}/{index:04d}"


def fence(code: str, language: str = "python") -> str:
    """Wrap ``code`` the way an instruct model answers: one fenced block."""
    return f"```{language}\n{code.strip()}\n```"


def json_value(value: object, where: str) -> object:
    """``value`` as plain JSON data (tuples become lists); raise if it cannot round-trip through JSON.

    Tests are stored in JSONL, so an expected value with a tuple, a set or a non-string dict key would
    silently change on the way to the sandbox.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{where}: non-finite float {value!r} cannot be stored as JSON")
        return value
    if isinstance(value, list | tuple):
        return [json_value(v, where) for v in value]
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where}: dict key {key!r} is not a string; JSON would change it")
            out[key] = json_value(item, where)
        return out
    raise ValueError(f"{where}: {type(value).__name__} value {value!r} is not JSON data")
