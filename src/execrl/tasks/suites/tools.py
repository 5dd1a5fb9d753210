"""The ``tools`` suite: questions a model answers far better with a Python tool than in its head.

Two kinds, each task a math-style exact answer ("The answer is X.") with a ``SessionSpec``:

* exact computations a small model cannot do mentally (digit sums of big powers, prime counts, modular
  powers, Collatz lengths): the tool is ``python`` in a bare session;
* data questions over a CSV file placed in the session's work directory (a total, a count, a maximum
  over a filtered column): the file is in the session only, never in the prompt, so the answer needs
  the tool.

Each task has the reference answer (``reference_solution``), the answer a typical slip gives
(``wrong_solution``: off by one, the unfiltered total) and ``reference_cells``: the ``python`` cells of a
reference tool-using solution, whose printed output is the answer. ``execrl tasks check`` scores the
references like any suite's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from execrl.tasks.schema import MathSpec, SessionSpec, Split, Task, TaskMetadata
from execrl.tasks.suites._common import task_id, template_tasks

INSTANCES_PER_TEMPLATE = 24
INSTRUCTION = (
    "Use the python tool to compute the result exactly. End your reply with 'The answer is X.' where X is "
    "the final answer."
)
REGIONS = ("North", "South", "East", "West")
PRODUCTS = ("apples", "pears", "plums", "figs", "limes")


@dataclass(frozen=True)
class Question:
    text: str
    answer: int
    wrong: int
    cell: str  # a reference cell that prints the answer
    files: dict[str, str] = field(default_factory=dict)


def _digit_sum(r: random.Random) -> Question:
    base, power = r.randint(2, 9), r.randint(60, 300)
    answer = sum(map(int, str(base**power)))
    return Question(f"What is the sum of the decimal digits of {base}**{power}?", answer, answer + 1,
                    f"print(sum(map(int, str({base}**{power}))))")  # fmt: skip


def _primes(n: int) -> int:
    sieve = bytearray([1]) * n
    sieve[:2] = b"\0\0"
    for i in range(2, int(n**0.5) + 1):
        if sieve[i]:
            sieve[i * i :: i] = bytearray(len(range(i * i, n, i)))
    return sum(sieve)


def _prime_count(r: random.Random) -> Question:
    n = r.randint(2_000, 60_000)
    answer = _primes(n)
    cell = (f"n = {n}\ns = bytearray([1]) * n\ns[:2] = b'\\0\\0'\nfor i in range(2, int(n ** 0.5) + 1):\n"
            "    if s[i]:\n        s[i*i::i] = bytearray(len(range(i*i, n, i)))\nprint(sum(s))")  # fmt: skip
    return Question(f"How many prime numbers are smaller than {n}?", answer, answer - 1, cell)


def _mod_power(r: random.Random) -> Question:
    a, b, m = r.randint(3, 999), r.randint(10**5, 10**7), r.randint(1_000, 99_999)
    answer = pow(a, b, m)
    return Question(f"What is {a}**{b} modulo {m}?", answer, (answer + 1) % m, f"print(pow({a}, {b}, {m}))")


def _collatz_steps(n: int) -> int:
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def _collatz(r: random.Random) -> Question:
    n = r.randint(1_000, 10**6)
    answer = _collatz_steps(n)
    cell = f"n, k = {n}, 0\nwhile n != 1:\n    n = n // 2 if n % 2 == 0 else 3 * n + 1\n    k += 1\nprint(k)"
    return Question(f"Starting from {n}, how many steps of the Collatz map (n/2 if even, 3n+1 if odd) reach 1?",
                    answer, answer + 1, cell)  # fmt: skip


def _sales(r: random.Random) -> tuple[str, str, list[tuple[str, str, int]]]:
    """A file name of its own (so each question's text differs), its CSV text and rows."""
    rows = [(r.choice(REGIONS), r.choice(PRODUCTS), r.randint(1, 500)) for _ in range(r.randint(40, 80))]
    text = "region,product,amount\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows)
    return f"sales_{r.randint(1000, 9999)}.csv", text, rows


def _read(name: str) -> str:
    return f"import csv\nrows = list(csv.DictReader(open({name!r})))\n"


def _data_total(r: random.Random) -> Question:
    name, text, rows = _sales(r)
    region = r.choice(REGIONS)
    answer = sum(c for a, _, c in rows if a == region)
    cell = _read(name) + f"print(sum(int(x['amount']) for x in rows if x['region'] == {region!r}))"
    return Question(f"The file {name} (columns region, product, amount) is in your working directory. "
                    f"What is the total amount sold in region {region}?", answer, sum(c for _, _, c in rows),
                    cell, {name: text})  # fmt: skip


def _data_count(r: random.Random) -> Question:
    name, text, rows = _sales(r)
    product, floor = r.choice(PRODUCTS), r.randint(100, 400)
    answer = sum(1 for _, b, c in rows if b == product and c > floor)
    cell = (
        _read(name)
        + f"print(sum(1 for x in rows if x['product'] == {product!r} and int(x['amount']) > {floor}))"
    )
    return Question(f"The file {name} (columns region, product, amount) is in your working directory. "
                    f"How many rows sell {product} with an amount above {floor}?", answer,
                    sum(1 for _, b, _ in rows if b == product), cell, {name: text})  # fmt: skip


TEMPLATES = {
    "digit_sum": (_digit_sum, 1),
    "prime_count": (_prime_count, 2),
    "mod_power": (_mod_power, 1),
    "collatz": (_collatz, 2),
    "data_total": (_data_total, 1),
    "data_count": (_data_count, 2),
}


def _task(name: str, index: int, q: Question, difficulty: int, split: Split) -> Task:
    return Task(
        id=task_id("tools", name, index),
        domain="math",
        prompt=f"{q.text}\n\n{INSTRUCTION}",
        spec=MathSpec(answer=str(q.answer)),
        metadata=TaskMetadata(family=f"tools_{name}", difficulty=difficulty, source="execrl", split=split),
        reference_solution=f"The tool printed {q.answer}. The answer is {q.answer}.",
        wrong_solution=f"The answer is {q.wrong}.",
        session=SessionSpec(tools=("python",), files=q.files, reference_cells=(q.cell,)),
    )


def build(split: str = "train", seed: int = 0) -> list[Task]:
    """Questions that need a Python tool: exact computations and data questions over a CSV in the session.

    Deterministic for ``seed``; ids like ``tools/prime_count/0007``.
    """
    return template_tasks("tools", TEMPLATES, split, seed, INSTANCES_PER_TEMPLATE, key=lambda q: q.text,
                          usable=lambda q: q.wrong != q.answer, build_task=_task)  # fmt: skip
