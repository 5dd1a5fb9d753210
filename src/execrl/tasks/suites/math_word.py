"""The ``math`` suite: seeded word problems with exact answers (arithmetic, fractions, percentages, rates,
ages, money with thousands separators, ratios, simple algebra).

Each template draws its numbers so that the answer is exact, computes it with ``fractions.Fraction`` and
writes a short worked solution ending in "The answer is X." (the reference) plus the answer a typical
slip produces (the wrong solution: a forgotten step, a wrong operation). Answers are written the way the
question asks: integers with thousands separators ("1,250"), fractions in lowest terms ("15/4") or exact
decimals ("12.75").
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from execrl.tasks.schema import MathSpec, Task, TaskMetadata
from execrl.tasks.suites._common import check_split, task_id, template_tasks
from execrl.tasks.suites._gen import NAMES

INSTANCES_PER_TEMPLATE = 26
INSTRUCTION = (
    "Solve the problem step by step. End your reply with 'The answer is X.' where X is the final answer."
)


@dataclass(frozen=True)
class Problem:
    question: str
    answer: Fraction
    steps: str
    wrong: Fraction
    style: str = "int"  # "int", "frac" or "dec"


def fmt(value: Fraction, style: str) -> str:
    """Write ``value`` as asked: '1,250' (int), '15/4' (fraction) or '12.75' (exact decimal); whole numbers
    get thousands separators except in fraction style."""
    if value.denominator == 1:
        return str(value.numerator) if style == "frac" else f"{value.numerator:,}"
    if style == "dec":
        text = f"{float(value):.6f}".rstrip("0")
        if Fraction(text) != value:
            raise ValueError(f"{value} has no short exact decimal form; use style 'frac'")
        return text
    return f"{value.numerator}/{value.denominator}"


def _shopping(r: random.Random) -> Problem:
    name, a, b = r.choice(NAMES), r.randint(2, 9), r.randint(2, 9)
    p, q = Fraction(r.randint(5, 60), 4), Fraction(r.randint(3, 40), 4)
    total = a * p + b * q
    return Problem(f"{name} buys {a} notebooks at ${fmt(p, 'dec')} each and {b} pens at ${fmt(q, 'dec')} each. "
                   "How many dollars does " + name + " spend in total?", total,
                   f"Notebooks: {a} x {fmt(p, 'dec')} = {fmt(a * p, 'dec')}. Pens: {b} x {fmt(q, 'dec')} = "
                   f"{fmt(b * q, 'dec')}. Total: {fmt(total, 'dec')}.", a * p + q, "dec")  # fmt: skip


def _fraction_scale(r: random.Random) -> Problem:
    num, den = r.choice([(1, 2), (2, 3), (3, 4), (3, 8), (5, 6), (2, 5), (4, 7)])
    k = r.randint(2, 9)
    per = Fraction(num, den)
    return Problem(f"A recipe needs {num}/{den} cup of sugar for one batch. How many cups are needed for {k} "
                   "batches? Give the answer as a fraction in lowest terms or a whole number.", per * k,
                   f"{k} x {num}/{den} = {fmt(per * k, 'frac')}.", per + k, "frac")  # fmt: skip


def _fraction_sum(r: random.Random) -> Problem:
    a, b = Fraction(1, r.randint(2, 8)), Fraction(r.randint(1, 3), r.randint(4, 9))
    if a + b >= 1:
        b = Fraction(1, 12)
    n1, n2 = r.sample(NAMES, 2)
    return Problem(f"{n1} eats {a} of a pizza and {n2} eats {b} of the same pizza. What fraction of the pizza is "
                   "left? Give the answer as a fraction in lowest terms.", 1 - a - b,
                   f"Eaten: {a} + {b} = {a + b}. Left: 1 - {a + b} = {1 - a - b}.", a + b, "frac")  # fmt: skip


def _percent_off(r: random.Random) -> Problem:
    price, pct = r.randint(2, 60) * 5, r.choice([10, 15, 20, 25, 30, 40, 50])
    sale = Fraction(price * (100 - pct), 100)
    return Problem(f"A jacket costs ${price}. It is on sale for {pct}% off. What is the sale price in dollars?",
                   sale, f"Discount: {pct}% of {price} = {fmt(price - sale, 'dec')}. Sale price: {price} - "
                   f"{fmt(price - sale, 'dec')} = {fmt(sale, 'dec')}.", price - sale, "dec")  # fmt: skip


def _percent_of(r: random.Random) -> Problem:
    n, pct = r.randint(4, 90) * 20, r.choice([5, 12, 15, 35, 45, 60, 75, 120, 150])
    value = Fraction(n * pct, 100)
    return Problem(f"A town had {n:,} residents last year and the number grew by {pct}%. How many residents "
                   "does it have now?", n + value, f"Growth: {pct}% of {n:,} = {fmt(value, 'int')}. Now: {n:,} + "
                   f"{fmt(value, 'int')} = {fmt(n + value, 'int')}.", value)  # fmt: skip


def _unit_rate(r: random.Random) -> Problem:
    speed, t1, t2 = r.randint(30, 110), r.randint(2, 6), r.randint(3, 12)
    return Problem(f"A train travels {speed * t1} km in {t1} hours at a constant speed. How many kilometres does "
                   f"it travel in {t2} hours?", Fraction(speed * t2),
                   f"Speed: {speed * t1} / {t1} = {speed} km per hour. Distance: {speed} x {t2} = {speed * t2:,}.",
                   Fraction(speed * t1 * t2))  # fmt: skip


def _price_rate(r: random.Random) -> Problem:
    unit, n1, n2 = Fraction(r.randint(3, 40), 4), r.randint(2, 8), r.randint(3, 15)
    return Problem(f"{n1} bottles of juice cost ${fmt(unit * n1, 'dec')}. At the same price per bottle, how many "
                   f"dollars do {n2} bottles cost?", unit * n2,
                   f"One bottle: {fmt(unit * n1, 'dec')} / {n1} = {fmt(unit, 'dec')}. {n2} bottles: "
                   f"{fmt(unit * n2, 'dec')}.", unit * n1 * n2, "dec")  # fmt: skip


def _ages(r: random.Random) -> Problem:
    young, gap = r.randint(3, 30), r.randint(2, 25)
    a, b = r.sample(NAMES, 2)
    total = 2 * young + gap
    return Problem(f"{a} is {gap} years older than {b}. Together their ages add up to {total}. How old is {b}?",
                   Fraction(young), f"{b} + ({b} + {gap}) = {total}, so 2 x {b} = {total - gap} and {b} = {young}.",
                   Fraction(young + gap))  # fmt: skip


def _ages_multiple(r: random.Random) -> Problem:
    child, mult, years = r.randint(2, 12), r.randint(2, 5), r.randint(2, 10)
    a, b = r.sample(NAMES, 2)
    return Problem(f"{a} is {mult} times as old as {b}, who is {child}. How old will {a} be in {years} years?",
                   Fraction(mult * child + years), f"Now {a} is {mult} x {child} = {mult * child}. In {years} years: "
                   f"{mult * child + years}.", Fraction(mult * (child + years)))  # fmt: skip


def _business(r: random.Random) -> Problem:
    daily, days, costs = r.randint(11, 99) * 50, r.randint(5, 30), r.randint(20, 400) * 25
    profit = daily * days - costs
    return Problem(f"A bakery earns ${daily:,} per day for {days} days and pays ${costs:,} in costs over that "
                   "period. What is its profit in dollars?", Fraction(profit),
                   f"Income: {daily:,} x {days} = {daily * days:,}. Profit: {daily * days:,} - {costs:,} = {profit:,}.",
                   Fraction(daily * days))  # fmt: skip


def _linear(r: random.Random) -> Problem:
    a, x, b = r.randint(2, 9), r.randint(-6, 20), r.randint(1, 30)
    c = a * x + b
    return Problem(f"Solve for x: {a}x + {b} = {c}.", Fraction(x),
                   f"{a}x = {c} - {b} = {c - b}, so x = {c - b} / {a} = {x}.", Fraction(c + b, a), "frac")  # fmt: skip


def _linear_fraction(r: random.Random) -> Problem:
    a, b, c = r.randint(2, 9), r.randint(1, 20), r.randint(21, 60)
    x = Fraction(c - b, a)
    return Problem(f"If {a} times a number plus {b} equals {c}, what is the number? Give the answer as a fraction "
                   "in lowest terms or a whole number.", x, f"{a}n = {c} - {b} = {c - b}, so n = {fmt(x, 'frac')}.",
                   Fraction(c, a) - b, "frac")  # fmt: skip


def _mean(r: random.Random) -> Problem:
    scores = [r.randint(50, 100) for _ in range(4)]
    mean = Fraction(sum(scores), 4)
    return Problem(f"A student scored {', '.join(map(str, scores))} on four tests. What is the mean score?", mean,
                   f"Sum: {sum(scores)}. Mean: {sum(scores)} / 4 = {fmt(mean, 'dec')}.", Fraction(sum(scores), 3), "dec")  # fmt: skip


def _triangle(r: random.Random) -> Problem:
    base, height = r.randint(3, 30), r.randint(3, 30)
    area = Fraction(base * height, 2)
    return Problem(f"A triangle has a base of {base} cm and a height of {height} cm. What is its area in square cm?",
                   area, f"Area = 1/2 x {base} x {height} = {fmt(area, 'dec')}.", Fraction(base * height), "dec")  # fmt: skip


def _ratio(r: random.Random) -> Problem:
    p, q, k = r.randint(1, 7), r.randint(1, 7), r.randint(3, 15)
    return Problem(f"A bag holds red and blue marbles in the ratio {p}:{q}. There are {(p + q) * k} marbles in all. "
                   "How many are blue?", Fraction(q * k),
                   f"One part: {(p + q) * k} / {p + q} = {k}. Blue: {q} x {k} = {q * k}.", Fraction(p * k))  # fmt: skip


def _work_rate(r: random.Random) -> Problem:
    a, b = r.sample(range(2, 13), 2)
    together = Fraction(a * b, a + b)
    return Problem(f"One pipe fills a tank in {a} hours and another fills it in {b} hours. How many hours do they "
                   "take together? Give the answer as a fraction in lowest terms or a whole number.", together,
                   f"Rates: 1/{a} + 1/{b} = {Fraction(1, a) + Fraction(1, b)} tank per hour. Time: "
                   f"{fmt(together, 'frac')}.", Fraction(a + b, 2), "frac")  # fmt: skip


def _buses(r: random.Random) -> Problem:
    seats, students = r.randint(20, 60), r.randint(50, 600)
    buses = -(-students // seats)
    if students % seats == 0:
        students += 1
        buses = -(-students // seats)
    return Problem(f"{students} students go on a trip. Each bus holds {seats} students. How many buses are needed?",
                   Fraction(buses), f"{students} / {seats} is {students // seats} with {students % seats} left over, "
                   f"so {buses} buses.", Fraction(students // seats))  # fmt: skip


def _interest(r: random.Random) -> Problem:
    p, rate, years = r.randint(4, 200) * 50, r.choice([2, 3, 4, 5, 6, 8]), r.randint(2, 10)
    interest = Fraction(p * rate * years, 100)
    return Problem(f"${p:,} is invested at {rate}% simple interest per year. How many dollars of interest does it "
                   f"earn in {years} years?", interest, f"{p:,} x {rate}/100 x {years} = {fmt(interest, 'dec')}.",
                   Fraction(p * rate, 100), "dec")  # fmt: skip


def _km_to_m(r: random.Random) -> Problem:
    km, m = r.randint(2, 90), r.randint(10, 990)
    return Problem(f"A runner covers {km} km and then another {m} m. How many metres is that in total?",
                   Fraction(km * 1000 + m), f"{km} km = {km * 1000:,} m. Total: {km * 1000:,} + {m} = "
                   f"{km * 1000 + m:,}.", Fraction(km * 100 + m))  # fmt: skip


def _packs(r: random.Random) -> Problem:
    n, k, g = r.randint(3, 12), r.randint(4, 24), r.randint(1, 30)
    left = n * k - g
    name = r.choice(NAMES)
    return Problem(f"{name} buys {n} packs of {k} pencils and gives {g} pencils away. How many pencils are left?",
                   Fraction(left), f"{n} x {k} = {n * k}. {n * k} - {g} = {left}.", Fraction(n * k))  # fmt: skip


TEMPLATES: dict[str, tuple[Callable[[random.Random], Problem], int]] = {
    "shopping": (_shopping, 1), "fraction_scale": (_fraction_scale, 2), "fraction_left": (_fraction_sum, 2),
    "percent_off": (_percent_off, 2), "percent_growth": (_percent_of, 2), "unit_rate": (_unit_rate, 1),
    "price_rate": (_price_rate, 2), "ages_sum": (_ages, 2), "ages_multiple": (_ages_multiple, 1),
    "profit": (_business, 2), "linear": (_linear, 2), "linear_fraction": (_linear_fraction, 3),
    "mean": (_mean, 1), "triangle_area": (_triangle, 1), "ratio": (_ratio, 2), "work_rate": (_work_rate, 3),
    "buses": (_buses, 2), "interest": (_interest, 2), "km_to_m": (_km_to_m, 1), "packs": (_packs, 1),
}  # fmt: skip


def _task(name: str, index: int, problem: Problem, difficulty: int, split: str) -> Task:
    answer = fmt(problem.answer, problem.style)
    if problem.wrong == problem.answer:
        raise ValueError(f"math/{name}/{index:04d}: the wrong answer equals the right one")
    wrong = fmt(problem.wrong, "frac" if problem.wrong.denominator != 1 else problem.style)
    return Task(
        id=task_id("math", name, index),
        domain="math",
        prompt=f"{problem.question}\n\n{INSTRUCTION}",
        spec=MathSpec(answer=answer),
        metadata=TaskMetadata(family=f"math_{name}", difficulty=difficulty, split=check_split(split)),
        reference_solution=f"{problem.steps} The answer is {answer}.",
        wrong_solution=f"The answer is {wrong}.",
    )


def build(split: str = "train", seed: int = 0) -> list[Task]:
    """Math word problems with exact answers (fractions, percentages, rates, money, algebra).

    Deterministic for ``seed``; ids like ``math/percent_off/0012``.
    """
    return template_tasks(
        "math",
        TEMPLATES,
        split,
        seed,
        INSTANCES_PER_TEMPLATE,
        key=lambda p: p.question,
        usable=lambda p: p.wrong != p.answer,
        build_task=_task,
    )
