"""The ``structured`` suite: answer with JSON that fits a schema and holds the right values.

Ten templates (extract a person, an event, an order with nested items, an address; classify sentiment with
an enum; compute list statistics; filter numbers; count words; convert 'key: value' lines; flag primes),
15 seeded instances each. ``expected_values`` holds the exact values at dotted paths, so a schema-valid
answer with a wrong value still fails. References alternate between a bare JSON object and a ```json
fenced one (both are what instruct models write); wrong answers drop a required field or change a value.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from execrl.tasks.schema import StructuredSpec, Task, TaskMetadata
from execrl.tasks.suites._common import check_split, fence, task_id, template_tasks
from execrl.tasks.suites._gen import CITIES, NAMES, WORDS

INSTANCES_PER_TEMPLATE = 15


@dataclass(frozen=True)
class Instance:
    instruction: str
    schema: dict[str, Any]
    answer: dict[str, Any]
    expected_paths: tuple[str, ...]  # dotted paths whose values are checked
    wrong: dict[str, Any]


def _obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required or list(props)}


def _person(r: random.Random) -> Instance:
    name, age, city = r.choice(NAMES), r.randint(18, 90), r.choice(CITIES)
    text = r.choice([f"{name} is {age} years old and lives in {city}.", f"Living in {city}, {name} turned {age} this year.",
                     f"Meet {name} from {city}, aged {age}."])  # fmt: skip
    answer = {"name": name, "age": age, "city": city}
    schema = _obj({"name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"}})
    return Instance(
        f'Extract the person\'s name, age and city from this sentence: "{text}"',
        schema,
        answer,
        ("name", "age", "city"),
        {"name": name, "city": city},
    )


def _evens(r: random.Random) -> Instance:
    nums = [r.randint(0, 60) for _ in range(r.randint(4, 9))]
    evens = [n for n in nums if n % 2 == 0]
    schema = _obj({"evens": {"type": "array", "items": {"type": "integer"}}})
    return Instance(
        f'List the even numbers of {nums}, in their original order, under the key "evens".',
        schema,
        {"evens": evens},
        ("evens",),
        {"evens": [n for n in nums if n % 2 == 1]},
    )


POSITIVE = ("loved", "excellent", "fantastic", "great", "wonderful")
NEGATIVE = ("hated", "terrible", "awful", "broken", "disappointing")


def _sentiment(r: random.Random) -> Instance:
    label = r.choice(["positive", "negative", "neutral"])
    item = r.choice(["headphones", "blender", "novel", "backpack", "lamp", "kettle"])
    text = {"positive": f"I {r.choice(POSITIVE[:1])} this {item}, it is {r.choice(POSITIVE[1:])}.",
            "negative": f"The {item} arrived {r.choice(NEGATIVE[3:])} and support was {r.choice(NEGATIVE[1:3])}.",
            "neutral": f"The {item} was delivered on {r.choice(['Monday', 'Friday'])} in a {r.choice(['box', 'bag'])}."}[label]  # fmt: skip
    schema = _obj({"sentiment": {"type": "string", "enum": ["positive", "negative", "neutral"]},
                   "product": {"type": "string"}})  # fmt: skip
    wrong_label = "neutral" if label != "neutral" else "positive"
    return Instance(
        f'Classify the sentiment of this review and name the product: "{text}"',
        schema,
        {"sentiment": label, "product": item},
        ("sentiment", "product"),
        {"sentiment": wrong_label, "product": item},
    )


def _order(r: random.Random) -> Instance:
    name = r.choice(NAMES)
    items: list[dict[str, Any]] = [
        {"sku": s, "qty": r.randint(1, 9)}
        for s in r.sample(["A12", "B07", "C33", "D41", "E05"], r.randint(1, 3))
    ]
    text = ", ".join(f"{i['qty']} of {i['sku']}" for i in items)
    email = f"{name.lower()}@example.com"
    schema = _obj({"customer": _obj({"name": {"type": "string"}, "email": {"type": "string"}}),
                   "items": {"type": "array", "items": _obj({"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}}),
                             "minItems": 1},
                   "total_qty": {"type": "integer"}})  # fmt: skip
    answer: dict[str, Any] = {
        "customer": {"name": name, "email": email},
        "items": items,
        "total_qty": sum(i["qty"] for i in items),
    }
    wrong = {"customer": {"name": name}, "items": items, "total_qty": answer["total_qty"]}
    return Instance(
        f'Turn this order into JSON: "{name} ({email}) ordered {text}." Keep the items in the order '
        "given and add total_qty, the sum of the quantities.",
        schema,
        answer,
        ("customer.name", "customer.email", "items", "total_qty"),
        wrong,
    )


def _event(r: random.Random) -> Instance:
    title = f"{r.choice(['Spring', 'Summer', 'Autumn', 'Winter'])} {r.choice(['Fair', 'Concert', 'Meetup', 'Workshop'])}"
    y, m, d = r.randint(2024, 2027), r.randint(1, 12), r.randint(1, 28)
    people = r.randint(5, 400)
    schema = _obj({"title": {"type": "string"}, "date": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
                   "attendees": {"type": "integer", "minimum": 0}})  # fmt: skip
    month = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
             "November", "December"][m - 1]  # fmt: skip
    answer = {"title": title, "date": f"{y:04d}-{m:02d}-{d:02d}", "attendees": people}
    return Instance(
        f'Extract the event as JSON with the date written YYYY-MM-DD: "The {title} on {month} {d}, {y} '
        f'expects {people} attendees."',
        schema,
        answer,
        ("title", "date", "attendees"),
        {**answer, "date": f"{month} {d}, {y}"},
    )


def _stats(r: random.Random) -> Instance:
    nums = [r.randint(-20, 99) for _ in range(r.randint(3, 8))]
    schema = _obj({"min": {"type": "integer"}, "max": {"type": "integer"}, "sum": {"type": "integer"},
                   "count": {"type": "integer"}})  # fmt: skip
    answer = {"min": min(nums), "max": max(nums), "sum": sum(nums), "count": len(nums)}
    return Instance(
        f"Report the minimum, maximum, sum and count of these numbers: {nums}.",
        schema,
        answer,
        ("min", "max", "sum", "count"),
        {**answer, "sum": sum(nums) - nums[-1]},
    )


def _address(r: random.Random) -> Instance:
    number, street = r.randint(1, 999), r.choice(["Oak Street", "Harbour Road", "Elm Avenue", "Mill Lane"])
    city, zipcode, name = r.choice(CITIES), f"{r.randint(0, 99999):05d}", r.choice(NAMES)
    schema = _obj({"name": {"type": "string"}, "address": _obj({"street": {"type": "string"}, "number": {"type": "integer"},
                   "city": {"type": "string"}, "zip": {"type": "string", "pattern": r"^\d{5}$"}})})  # fmt: skip
    answer = {"name": name, "address": {"street": street, "number": number, "city": city, "zip": zipcode}}
    wrong = {"name": name, "address": {"street": street, "number": number, "city": city, "zip": int(zipcode)}}
    return Instance(
        f'Extract the recipient and the address (zip code as a 5-digit string): "Send it to {name}, '
        f'{number} {street}, {zipcode} {city}."',
        schema,
        answer,
        ("name", "address.street", "address.number", "address.city", "address.zip"),
        wrong,
    )


def _word_stats(r: random.Random) -> Instance:
    words = [w.lower() for w in r.sample(WORDS, r.randint(3, 7))]
    longest = max(words, key=len)
    schema = _obj({"word_count": {"type": "integer"}, "longest_word": {"type": "string"},
                   "first_word": {"type": "string"}})  # fmt: skip
    answer = {"word_count": len(words), "longest_word": longest, "first_word": words[0]}
    return Instance(
        f'For the text "{" ".join(words)}" give the number of words, the longest word (the first one '
        "if several are equally long) and the first word.",
        schema,
        answer,
        ("word_count", "longest_word", "first_word"),
        {"word_count": len(words), "first_word": words[0]},
    )


def _key_values(r: random.Random) -> Instance:
    keys = r.sample(["apples", "pears", "plums", "figs", "limes", "kiwis"], r.randint(2, 5))
    values = {k: r.randint(0, 500) for k in keys}
    lines = "\n".join(f"{k}: {v}" for k, v in values.items())
    schema = {"type": "object", "properties": {k: {"type": "integer"} for k in keys}, "required": keys,
              "additionalProperties": False}  # fmt: skip
    wrong = {k: str(v) for k, v in values.items()}
    return Instance(
        f"Convert these lines into one JSON object with integer values:\n{lines}",
        schema,
        values,
        tuple(keys),
        wrong,
    )


def _primes(r: random.Random) -> Instance:
    nums = [r.randint(2, 60) for _ in range(r.randint(3, 7))]
    flags = [n > 1 and all(n % d for d in range(2, int(n**0.5) + 1)) for n in nums]
    schema = _obj({"numbers": {"type": "array", "items": {"type": "integer"}},
                   "is_prime": {"type": "array", "items": {"type": "boolean"}}})  # fmt: skip
    answer = {"numbers": nums, "is_prime": flags}
    return Instance(
        f'For the numbers {nums} give the list itself under "numbers" and, under "is_prime", a list '
        "of booleans saying whether each one is prime.",
        schema,
        answer,
        ("numbers", "is_prime"),
        {"numbers": nums, "is_prime": [n % 2 == 1 for n in nums]},
    )


TEMPLATES: dict[str, tuple[Callable[[random.Random], Instance], int]] = {
    "person": (_person, 1), "evens": (_evens, 1), "sentiment": (_sentiment, 1), "order": (_order, 3),
    "event": (_event, 2), "stats": (_stats, 2), "address": (_address, 2), "word_stats": (_word_stats, 2),
    "key_values": (_key_values, 1), "primes": (_primes, 2),
}  # fmt: skip


def _value_at(data: Any, path: str) -> Any:
    for part in path.split("."):
        data = data[part]
    return data


def _task(name: str, index: int, inst: Instance, difficulty: int, split: str) -> Task:
    expected = {path: _value_at(inst.answer, path) for path in inst.expected_paths}
    body = json.dumps(inst.answer)
    prompt = (f"{inst.instruction}\n\nReply with only a JSON object that follows this JSON schema:\n"
              f"{json.dumps(inst.schema)}")  # fmt: skip
    return Task(
        id=task_id("structured", name, index),
        domain="structured",
        prompt=prompt,
        spec=StructuredSpec(json_schema=inst.schema, expected_values=expected),
        metadata=TaskMetadata(family=f"structured_{name}", difficulty=difficulty, split=check_split(split)),
        reference_solution=fence(body, "json") if index % 2 else body,
        wrong_solution=json.dumps(inst.wrong),
    )


def build(split: str = "train", seed: int = 0) -> list[Task]:
    """JSON answers checked against a schema and exact expected values.

    Deterministic for ``seed``; ids like ``structured/person/0004``.
    """
    return template_tasks(
        "structured",
        TEMPLATES,
        split,
        seed,
        INSTANCES_PER_TEMPLATE,
        key=lambda inst: inst.instruction,
        usable=lambda inst: inst.wrong != inst.answer,
        build_task=_task,
    )
