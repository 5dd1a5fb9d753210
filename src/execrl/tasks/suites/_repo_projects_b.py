"""Repository projects, part 2: a grade book, a warehouse, a config reader and a ledger."""

from __future__ import annotations

from execrl.tasks.suites._repo_core import Project, Target

GRADES = Project(
    name="grades",
    files={
        "grades/scores.py": '''
            SCALE = ((90, "A"), (80, "B"), (70, "C"), (60, "D"))


            def average(scores: list[int]) -> float:
                """Mean of the scores; raises ValueError for an empty list."""
                if not scores:
                    raise ValueError("no scores")
                return sum(scores) / len(scores)


            def letter(avg: float, scale: tuple = SCALE) -> str:
                """The letter of the first (threshold, letter) pair with avg >= threshold, else 'F'."""
                for threshold, grade in scale:
                    if avg >= threshold:
                        return grade
                return "F"


            def curve(scores: list[int], points: int) -> list[int]:
                """A new list with `points` added to each score, capped at 100."""
                return [min(100, s + points) for s in scores]
        ''',
        "grades/roster.py": '''
            from grades.scores import average, curve, letter


            def parse_roster(text: str) -> dict[str, list[int]]:
                """Lines like 'Ann: 90, 85' -> {'Ann': [90, 85]}; names and numbers are stripped."""
                out = {}
                for line in text.splitlines():
                    if ":" in line:
                        name, _, rest = line.partition(":")
                        out[name.strip()] = [int(x) for x in rest.split(",") if x.strip()]
                return out


            def report(text: str, bonus: int = 0) -> list[str]:
                """'Name: average letter' per student; students without scores get 'n/a'."""
                lines = []
                for name, scores in parse_roster(text).items():
                    try:
                        avg = average(curve(scores, bonus))
                    except ValueError:
                        lines.append(f"{name}: n/a")
                        continue
                    lines.append(f"{name}: {avg:.1f} {letter(avg)}")
                return lines


            def raw_and_curved(scores: list[int], bonus: int) -> tuple[float, float]:
                curved = curve(scores, bonus)
                return average(scores), average(curved)
        ''',
        "tests/test_scores.py": '''
            from grades.scores import SCALE, average, curve, letter


            def test_average():
                assert average([90, 80]) == 85


            def test_letter():
                assert letter(91, SCALE) == "A"
                assert letter(80, SCALE) == "B"
                assert letter(59.5, SCALE) == "F"
                assert letter(75, ((70, "pass"),)) == "pass"


            def test_curve():
                assert curve([50, 98], 5) == [55, 100]
        ''',
        "tests/test_roster.py": '''
            from grades.roster import parse_roster, raw_and_curved, report

            TEXT = "Ann: 90, 85\\n Bob : 70,61\\nCleo:\\n"


            def test_parse_roster():
                assert parse_roster("Ann: 90, 85\\n Bob : 70,61\\n") == {"Ann": [90, 85], "Bob": [70, 61]}


            def test_report():
                assert report(TEXT) == ["Ann: 87.5 B", "Bob: 65.5 D", "Cleo: n/a"]


            def test_report_with_bonus():
                assert report(TEXT, bonus=10) == ["Ann: 97.5 A", "Bob: 75.5 C", "Cleo: n/a"]


            def test_raw_and_curved():
                assert raw_and_curved([80, 95], 10) == (87.5, 95.0)
        ''',
    },
    targets=(
        Target("grades/scores.py", "average",
               "it returns the mean of `scores` as a float and raises ValueError when the list is empty.",
               wrong='''
                   def average(scores: list[int]) -> float:
                       return sum(scores) // len(scores) if scores else 0.0
               ''',
               buggy='''
                   def average(scores: list[int]) -> float:
                       if not scores:
                           raise ValueError("no scores")
                       return sum(scores) / (len(scores) + 1)
               ''',
               own_tests=("tests/test_scores.py::test_average",)),
        Target("grades/scores.py", "letter",
               "it returns the letter of the first (threshold, letter) pair of `scale` (default SCALE) whose "
               "threshold is at most `avg`, or 'F' when there is none.",
               wrong='''
                   def letter(avg: float, scale: tuple) -> str:
                       for threshold, grade in scale:
                           if avg >= threshold:
                               return grade
                       return "F"
               ''',
               buggy='''
                   def letter(avg: float, scale: tuple = SCALE) -> str:
                       for threshold, grade in scale:
                           if avg > threshold:
                               return grade
                       return "F"
               ''',
               own_tests=("tests/test_scores.py::test_letter",),
               old='''
                   def letter(avg: float) -> str:
                       """The letter of the first (threshold, letter) pair with avg >= threshold, else 'F'."""
                       for threshold, grade in SCALE:
                           if avg >= threshold:
                               return grade
                       return "F"
               ''',
               change_request="Let `letter` in `grades/scores.py` take the grading scale as a second parameter "
                              "`scale` (a tuple of (threshold, letter) pairs, default SCALE) instead of always "
                              "using SCALE."),
        Target("grades/scores.py", "curve",
               "it returns a new list with `points` added to each score, capped at 100, and leaves `scores` "
               "unchanged.",
               wrong='''
                   def curve(scores: list[int], points: int) -> list[int]:
                       for i, s in enumerate(scores):
                           scores[i] = min(100, s + points)
                       return scores
               ''',
               buggy='''
                   def curve(scores: list[int], points: int) -> list[int]:
                       return [s + points for s in scores]
               ''',
               own_tests=("tests/test_scores.py::test_curve",)),
        Target("grades/roster.py", "parse_roster",
               "it turns lines like 'Ann: 90, 85' into a dict {'Ann': [90, 85]}, stripping names and numbers; "
               "a name with nothing after the colon gets an empty list.",
               wrong='''
                   def parse_roster(text: str) -> dict[str, list[int]]:
                       out = {}
                       for line in text.splitlines():
                           if ":" in line:
                               name, _, rest = line.partition(":")
                               out[name.strip()] = [int(x) for x in rest.split(",") if x.strip()] or None
                       return out
               ''',
               buggy='''
                   def parse_roster(text: str) -> dict[str, list[int]]:
                       out = {}
                       for line in text.splitlines():
                           name, _, rest = line.partition(":")
                           out[name] = [int(x) for x in rest.split(",")]
                       return out
               ''',
               own_tests=("tests/test_roster.py::test_parse_roster",), difficulty=3),
    ),
)  # fmt: skip

WAREHOUSE = Project(
    name="warehouse",
    files={
        "warehouse/stock.py": '''
            def restock(stock: dict[str, int], sku: str, qty: int) -> dict[str, int]:
                """A new stock dict with `qty` more of `sku` (the given dict is not changed)."""
                out = dict(stock)
                out[sku] = out.get(sku, 0) + qty
                return out


            def take(stock: dict[str, int], sku: str, qty: int) -> dict[str, int]:
                """A new stock dict with `qty` fewer of `sku`; raises ValueError if there are not enough."""
                have = stock.get(sku, 0)
                if qty > have:
                    raise ValueError(f"only {have} of {sku}")
                out = dict(stock)
                out[sku] = have - qty
                return out


            def low_stock(stock: dict[str, int], threshold: int = 5) -> list[str]:
                """SKUs with fewer than `threshold` items, sorted."""
                return sorted(sku for sku, n in stock.items() if n < threshold)
        ''',
        "warehouse/orders.py": '''
            from warehouse.stock import low_stock, restock, take


            def parse_order(text: str) -> list[tuple[str, int]]:
                """'3x apple, 2x pear' -> [('apple', 3), ('pear', 2)]."""
                out = []
                for part in text.split(","):
                    count, _, sku = part.strip().partition("x ")
                    out.append((sku.strip(), int(count)))
                return out


            def fulfil(stock: dict[str, int], text: str) -> tuple[dict[str, int], list[str]]:
                """Take every line of the order that can be served; return the new stock and the missing SKUs."""
                missing = []
                for sku, qty in parse_order(text):
                    try:
                        stock = take(stock, sku, qty)
                    except ValueError:
                        missing.append(sku)
                return stock, missing


            def reorder_list(stock: dict[str, int]) -> list[str]:
                return [f"reorder {sku}" for sku in low_stock(stock)]


            def receive(stock: dict[str, int], deliveries: list[tuple[str, int]]) -> tuple[dict[str, int], int]:
                """Apply deliveries; also return how many units arrived in total."""
                before = sum(stock.values())
                for sku, qty in deliveries:
                    stock = restock(stock, sku, qty)
                return stock, sum(stock.values()) - before
        ''',
        "tests/test_stock.py": '''
            from warehouse.stock import low_stock, restock, take


            def test_restock():
                assert restock({"apple": 2}, "apple", 3) == {"apple": 5}
                assert restock({}, "pear", 1) == {"pear": 1}


            def test_take():
                assert take({"apple": 5}, "apple", 2) == {"apple": 3}


            def test_low_stock():
                assert low_stock({"a": 1, "b": 9, "c": 4}, 5) == ["a", "c"]
                assert low_stock({"a": 1, "b": 9}, 10) == ["a", "b"]
        ''',
        "tests/test_orders.py": '''
            from warehouse.orders import fulfil, parse_order, receive, reorder_list


            def test_parse_order():
                assert parse_order("3x apple, 2x pear") == [("apple", 3), ("pear", 2)]


            def test_fulfil():
                stock = {"apple": 5, "pear": 1}
                assert fulfil(stock, "3x apple,2x pear, 1x fig") == ({"apple": 2, "pear": 1}, ["pear", "fig"])
                assert stock == {"apple": 5, "pear": 1}


            def test_reorder_list():
                assert reorder_list({"apple": 5, "pear": 1, "fig": 0}) == ["reorder fig", "reorder pear"]


            def test_receive():
                stock = {"apple": 1}
                assert receive(stock, [("apple", 2), ("pear", 12)]) == ({"apple": 3, "pear": 12}, 14)
                assert stock == {"apple": 1}
        ''',
    },
    targets=(
        Target("warehouse/stock.py", "restock",
               "it returns a new stock dict with `qty` more items of `sku`, without changing the dict it was given.",
               wrong='''
                   def restock(stock: dict[str, int], sku: str, qty: int) -> dict[str, int]:
                       stock[sku] = stock.get(sku, 0) + qty
                       return stock
               ''',
               buggy='''
                   def restock(stock: dict[str, int], sku: str, qty: int) -> dict[str, int]:
                       out = dict(stock)
                       out[sku] = qty
                       return out
               ''',
               own_tests=("tests/test_stock.py::test_restock",)),
        Target("warehouse/stock.py", "take",
               "it returns a new stock dict with `qty` fewer items of `sku` and raises ValueError when fewer "
               "than `qty` are in stock.",
               wrong='''
                   def take(stock: dict[str, int], sku: str, qty: int) -> dict[str, int]:
                       out = dict(stock)
                       out[sku] = max(0, out.get(sku, 0) - qty)
                       return out
               ''',
               buggy='''
                   def take(stock: dict[str, int], sku: str, qty: int) -> dict[str, int]:
                       out = dict(stock)
                       out[sku] = out.get(sku, 0) + qty
                       return out
               ''',
               own_tests=("tests/test_stock.py::test_take",)),
        Target("warehouse/stock.py", "low_stock",
               "it returns the sorted list of SKUs that have fewer than `threshold` items (default 5).",
               wrong='''
                   def low_stock(stock: dict[str, int], threshold: int) -> list[str]:
                       return sorted(sku for sku, n in stock.items() if n < threshold)
               ''',
               buggy='''
                   def low_stock(stock: dict[str, int], threshold: int = 5) -> list[str]:
                       return [sku for sku, n in stock.items() if n <= threshold]
               ''',
               own_tests=("tests/test_stock.py::test_low_stock",),
               old='''
                   def low_stock(stock: dict[str, int]) -> list[str]:
                       """SKUs with fewer than 5 items, sorted."""
                       return sorted(sku for sku, n in stock.items() if n < 5)
               ''',
               change_request="Give `low_stock` in `warehouse/stock.py` a `threshold` parameter (default 5) "
                              "instead of the fixed limit of 5: it returns the sorted SKUs with fewer than "
                              "`threshold` items."),
        Target("warehouse/orders.py", "parse_order",
               "it turns an order like '3x apple, 2x pear' into a list of (sku, quantity) tuples with integer "
               "quantities, e.g. [('apple', 3), ('pear', 2)].",
               wrong='''
                   def parse_order(text: str) -> list[tuple[str, int]]:
                       out = []
                       for part in text.split(", "):
                           count, _, sku = part.partition("x ")
                           out.append((sku, int(count)))
                       return out
               ''',
               buggy='''
                   def parse_order(text: str) -> list[tuple[str, int]]:
                       out = []
                       for part in text.split(","):
                           count, _, sku = part.strip().partition("x ")
                           out.append((count, sku))
                       return out
               ''',
               own_tests=("tests/test_orders.py::test_parse_order",)),
    ),
)  # fmt: skip
