"""Repository projects, part 3: a config reader and a personal ledger."""

from __future__ import annotations

from execrl.tasks.suites._repo_core import Project, Target

CONF = Project(
    name="conf",
    files={
        "conf/parse.py": '''
            def parse_line(line: str) -> tuple[str, str] | None:
                """'key = value' -> ('key', 'value'), both stripped; blank lines and '#' comments -> None."""
                line = line.strip()
                if not line or line.startswith("#") or "=" not in line:
                    return None
                key, _, value = line.partition("=")
                return key.strip(), value.strip()


            def parse(text: str) -> dict[str, str]:
                """All key/value pairs of a config text; later keys win."""
                out = {}
                for line in text.splitlines():
                    pair = parse_line(line)
                    if pair is not None:
                        out[pair[0]] = pair[1]
                return out
        ''',
        "conf/typed.py": '''
            TRUE_WORDS = ("1", "true", "yes", "on")


            def get_int(conf: dict[str, str], key: str, default: int = 0) -> int:
                """The value of `key` as an int, or `default` when the key is missing."""
                return int(conf[key]) if key in conf else default


            def get_bool(conf: dict[str, str], key: str) -> bool:
                """True for '1', 'true', 'yes' or 'on' in any case; False otherwise or when missing."""
                return conf.get(key, "").lower() in TRUE_WORDS


            def get_list(conf: dict[str, str], key: str) -> list[str]:
                """Comma-separated items, stripped, without empty ones; [] when missing."""
                return [item.strip() for item in conf.get(key, "").split(",") if item.strip()]
        ''',
        "conf/app.py": '''
            from conf.parse import parse
            from conf.typed import get_bool, get_int, get_list


            def load_settings(text: str) -> dict:
                conf = parse(text)
                return {
                    "port": get_int(conf, "port", 8080),
                    "workers": get_int(conf, "workers", default=1),
                    "debug": get_bool(conf, "debug"),
                    "hosts": get_list(conf, "hosts"),
                }
        ''',
        "tests/test_parse.py": '''
            from conf.parse import parse, parse_line


            def test_parse_line():
                assert parse_line("a=1") == ("a", "1")
                assert parse_line("# comment") is None


            def test_parse():
                assert parse("a=1\\nb=2\\na=3") == {"a": "3", "b": "2"}
        ''',
        "tests/test_typed.py": '''
            from conf.typed import get_bool, get_int, get_list


            def test_get_int():
                assert get_int({"n": "4"}, "n", 7) == 4
                assert get_int({}, "n", 7) == 7


            def test_get_bool():
                assert get_bool({"x": "true"}, "x") is True
                assert get_bool({"x": "false"}, "x") is False
                assert get_bool({}, "x") is False


            def test_get_list():
                assert get_list({"h": "a,b"}, "h") == ["a", "b"]
                assert get_list({}, "h") == []
        ''',
        "tests/test_app.py": '''
            from conf.app import load_settings

            TEXT = "# server\\nport = 9000\\ndebug = Yes\\nhosts = alpha, beta,\\n\\n"


            def test_load_settings():
                assert load_settings(TEXT) == {"port": 9000, "workers": 1, "debug": True, "hosts": ["alpha", "beta"]}


            def test_defaults():
                assert load_settings("") == {"port": 8080, "workers": 1, "debug": False, "hosts": []}
        ''',
    },
    targets=(
        Target("conf/parse.py", "parse_line",
               "it turns 'key = value' into the tuple ('key', 'value') with both parts stripped, and returns "
               "None for blank lines, '#' comments and lines without '='.",
               wrong='''
                   def parse_line(line: str) -> tuple[str, str] | None:
                       if not line or line.startswith("#"):
                           return None
                       key, _, value = line.partition("=")
                       return key, value
               ''',
               buggy='''
                   def parse_line(line: str) -> tuple[str, str] | None:
                       key, _, value = line.partition("=")
                       return key.strip(), value.strip()
               ''',
               own_tests=("tests/test_parse.py::test_parse_line",)),
        Target("conf/typed.py", "get_int",
               "it returns the value of `key` converted to int, or `default` (default 0) when `key` is missing.",
               wrong='''
                   def get_int(conf: dict[str, str], key: str, fallback: int = 0) -> int:
                       return int(conf[key]) if key in conf else fallback
               ''',
               buggy='''
                   def get_int(conf: dict[str, str], key: str, default: int = 0) -> int:
                       return int(conf.get(key, 0))
               ''',
               own_tests=("tests/test_typed.py::test_get_int",),
               old='''
                   def get_int(conf: dict[str, str], key: str) -> int:
                       """The value of `key` as an int, or 0 when the key is missing."""
                       return int(conf[key]) if key in conf else 0
               ''',
               change_request="Add a `default` parameter (default 0) to `get_int` in `conf/typed.py`: it is "
                              "returned instead of 0 when the key is missing."),
        Target("conf/typed.py", "get_bool",
               "it returns True when the value of `key` is '1', 'true', 'yes' or 'on' in any letter case, and "
               "False otherwise or when the key is missing.",
               wrong='''
                   def get_bool(conf: dict[str, str], key: str) -> bool:
                       return conf.get(key) == "true"
               ''',
               buggy='''
                   def get_bool(conf: dict[str, str], key: str) -> bool:
                       return bool(conf.get(key))
               ''',
               own_tests=("tests/test_typed.py::test_get_bool",)),
        Target("conf/typed.py", "get_list",
               "it splits the value of `key` on commas and returns the stripped, non-empty items ([] when the "
               "key is missing).",
               wrong='''
                   def get_list(conf: dict[str, str], key: str) -> list[str]:
                       value = conf.get(key, "")
                       return value.split(",") if value else []
               ''',
               buggy='''
                   def get_list(conf: dict[str, str], key: str) -> list[str]:
                       return conf.get(key, "").split(",")
               ''',
               own_tests=("tests/test_typed.py::test_get_list",)),
    ),
)  # fmt: skip

LEDGER = Project(
    name="ledger",
    files={
        "ledger/entries.py": '''
            def parse_amount(text: str) -> int:
                """'-45.20' -> -4520 cents; '12' -> 1200; '3.5' -> 350."""
                sign = -1 if text.startswith("-") else 1
                whole, _, frac = text.lstrip("+-").partition(".")
                return sign * (int(whole) * 100 + int((frac + "00")[:2]))


            def parse_entry(line: str) -> tuple[str, str, int]:
                """'2024-01-05 Groceries -45.20' -> ('2024-01-05', 'groceries', -4520)."""
                date, category, amount = line.split()
                return date, category.lower(), parse_amount(amount)
        ''',
        "ledger/summary.py": '''
            from ledger.entries import parse_entry


            def load(text: str) -> list[tuple[str, str, int]]:
                return [parse_entry(line) for line in text.splitlines() if line.strip()]


            def by_category(entries: list[tuple[str, str, int]]) -> dict[str, int]:
                """Total cents per category."""
                out: dict[str, int] = {}
                for _, category, cents in entries:
                    out[category] = out.get(category, 0) + cents
                return out


            def monthly(entries: list[tuple[str, str, int]]) -> dict[str, int]:
                """Total cents per month, keyed 'YYYY-MM'."""
                out: dict[str, int] = {}
                for date, _, cents in entries:
                    out[date[:7]] = out.get(date[:7], 0) + cents
                return out
        ''',
        "ledger/report.py": '''
            from ledger.summary import by_category, load, monthly


            def money(cents: int) -> str:
                sign = "-" if cents < 0 else ""
                return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"


            def report(text: str) -> list[str]:
                entries = load(text)
                lines = [f"{cat}: {money(total)}" for cat, total in sorted(by_category(entries).items())]
                lines += [f"{month}: {money(total)}" for month, total in sorted(monthly(entries).items())]
                return lines
        ''',
        "tests/test_entries.py": '''
            from ledger.entries import parse_amount, parse_entry


            def test_parse_amount():
                assert parse_amount("-45.20") == -4520
                assert parse_amount("12") == 1200


            def test_parse_entry():
                assert parse_entry("2024-01-05 rent -900.00") == ("2024-01-05", "rent", -90000)
        ''',
        "tests/test_summary.py": '''
            from ledger.summary import by_category, monthly

            ENTRIES = [("2024-01-05", "food", -450), ("2024-01-20", "pay", 10000), ("2024-02-01", "food", -50)]


            def test_by_category():
                assert by_category(ENTRIES[:2]) == {"food": -450, "pay": 10000}


            def test_monthly():
                assert monthly(ENTRIES) == {"2024-01": 9550, "2024-02": -50}
        ''',
        "tests/test_report.py": '''
            from ledger.report import report

            TEXT = "2024-01-05 Food -4.5\\n2024-01-20 pay 100\\n2024-02-01 food -0.07\\n2023-12-31 pay 19.99\\n"


            def test_report():
                assert report(TEXT) == ["food: -4.57", "pay: 119.99", "2023-12: 19.99", "2024-01: 95.50", "2024-02: -0.07"]
        ''',
    },
    targets=(
        Target("ledger/entries.py", "parse_amount",
               "it converts an amount such as '-45.20', '12' or '3.5' into integer cents (-4520, 1200, 350).",
               wrong='''
                   def parse_amount(text: str) -> int:
                       return int(float(text) * 100)
               ''',
               buggy='''
                   def parse_amount(text: str) -> int:
                       whole, _, frac = text.partition(".")
                       return int(whole) * 100 + int((frac + "00")[:2])
               ''',
               own_tests=("tests/test_entries.py::test_parse_amount",), difficulty=3),
        Target("ledger/entries.py", "parse_entry",
               "it splits a line 'DATE CATEGORY AMOUNT' into a tuple (date, lower-cased category, amount in cents "
               "via `parse_amount`).",
               wrong='''
                   def parse_entry(line: str) -> tuple[str, str, int]:
                       date, category, amount = line.split()
                       return date, category, parse_amount(amount)
               ''',
               buggy='''
                   def parse_entry(line: str) -> tuple[str, str, int]:
                       date, category, amount = line.split()
                       return date, category.lower(), int(float(amount))
               ''',
               own_tests=("tests/test_entries.py::test_parse_entry",)),
        Target("ledger/summary.py", "by_category",
               "it returns a dict with the total cents of each category.",
               wrong='''
                   def by_category(entries: list[tuple[str, str, int]]) -> dict[str, int]:
                       return {category: cents for _, category, cents in entries}
               ''',
               buggy='''
                   def by_category(entries: list[tuple[str, str, int]]) -> dict[str, int]:
                       out = {}
                       for date, _, cents in entries:
                           out[date] = out.get(date, 0) + cents
                       return out
               ''',
               own_tests=("tests/test_summary.py::test_by_category",)),
        Target("ledger/summary.py", "monthly",
               "it returns a dict with the total cents of each month, keyed by 'YYYY-MM'.",
               wrong='''
                   def monthly(entries: list[tuple[str, str, int]]) -> dict[str, int]:
                       out = {}
                       for date, _, cents in entries:
                           out[date[:7]] = out.get(date[:7], 0.0) + cents
                       return out
               ''',
               buggy='''
                   def monthly(entries: list[tuple[str, str, int]]) -> dict[str, int]:
                       out = {}
                       for date, _, cents in entries:
                           out[date[:7]] = cents
                       return out
               ''',
               own_tests=("tests/test_summary.py::test_monthly",)),
    ),
)  # fmt: skip

LIBRARY = Project(
    name="library",
    files={
        "library/catalog.py": '''
            def normalize_isbn(text: str) -> str:
                """Drop spaces and hyphens and upper-case a final 'x': '0-306-40615-x' -> '030640615X'."""
                return text.replace("-", "").replace(" ", "").upper()


            def find(books: list[dict], query: str) -> list[dict]:
                """Books whose title or author contains `query`, ignoring case, sorted by title."""
                q = query.lower()
                hits = [b for b in books if q in b["title"].lower() or q in b["author"].lower()]
                return sorted(hits, key=lambda b: b["title"])
        ''',
        "library/loans.py": '''
            import datetime


            def due_date(start: str, days: int = 14) -> str:
                """The ISO date `days` days after the ISO date `start`."""
                return (datetime.date.fromisoformat(start) + datetime.timedelta(days=days)).isoformat()


            def fine_cents(days_late: int, per_day: int = 25, cap: int = 500) -> int:
                """Late fine: `per_day` cents per late day, at most `cap`; nothing when not late."""
                return min(cap, max(0, days_late) * per_day)


            def days_late(due: str, returned: str) -> int:
                delta = datetime.date.fromisoformat(returned) - datetime.date.fromisoformat(due)
                return max(0, delta.days)
        ''',
        "library/desk.py": '''
            from library.catalog import find, normalize_isbn
            from library.loans import days_late, due_date, fine_cents


            def checkout(loans: dict[str, str], isbn: str, today: str) -> str:
                """Record a loan and return the receipt line."""
                key = normalize_isbn(isbn)
                loans[key] = due_date(today)
                return f"{key} due {loans[key]}"


            def give_back(loans: dict[str, str], isbn: str, today: str) -> str:
                due = loans.pop(normalize_isbn(isbn))
                fine = fine_cents(days_late(due, today))
                return f"fine {fine // 100}.{fine % 100:02d}" if fine else "thank you"


            def search_line(books: list[dict], query: str) -> str:
                return " | ".join(b["title"] for b in find(books, query)) or "no match"
        ''',
        "tests/test_catalog.py": '''
            from library.catalog import find, normalize_isbn

            BOOKS = [{"title": "Dune", "author": "Herbert"}, {"title": "Emma", "author": "Austen"},
                     {"title": "Persuasion", "author": "Austen"}]


            def test_normalize_isbn():
                assert normalize_isbn("978-0-306-40615-7") == "9780306406157"


            def test_find():
                assert [b["title"] for b in find(BOOKS, "Austen")] == ["Emma", "Persuasion"]
        ''',
        "tests/test_loans.py": '''
            from library.loans import days_late, due_date, fine_cents


            def test_due_date():
                assert due_date("2024-02-20", 14) == "2024-03-05"
                assert due_date("2023-12-30", 3) == "2024-01-02"


            def test_fine_cents():
                assert fine_cents(3) == 75
                assert fine_cents(0) == 0


            def test_days_late():
                assert days_late("2024-01-10", "2024-01-13") == 3
        ''',
        "tests/test_desk.py": '''
            from library.desk import checkout, give_back, search_line

            BOOKS = [{"title": "Persuasion", "author": "Austen"}, {"title": "Emma", "author": "Austen"},
                     {"title": "Dune", "author": "Herbert"}]


            def test_checkout_and_return():
                loans = {}
                assert checkout(loans, "0-306-40615-x", "2024-01-01") == "030640615X due 2024-01-15"
                assert give_back(loans, "030640615X", "2024-03-01") == "fine 5.00"
                assert loans == {}


            def test_return_on_time():
                loans = {"111": "2024-05-01"}
                assert give_back(loans, "1-1-1", "2024-04-30") == "thank you"


            def test_search_line():
                assert search_line(BOOKS, "austen") == "Emma | Persuasion"
                assert search_line(BOOKS, "tolkien") == "no match"
        ''',
    },
    targets=(
        Target("library/catalog.py", "normalize_isbn",
               "it removes spaces and hyphens from an ISBN and upper-cases it, so '0-306-40615-x' becomes "
               "'030640615X'.",
               wrong='''
                   def normalize_isbn(text: str) -> str:
                       return "".join(ch for ch in text if ch.isdigit())
               ''',
               buggy='''
                   def normalize_isbn(text: str) -> str:
                       return text.replace("-", "")
               ''',
               own_tests=("tests/test_catalog.py::test_normalize_isbn",)),
        Target("library/catalog.py", "find",
               "it returns the books whose title or author contains `query` ignoring letter case, sorted by title.",
               wrong='''
                   def find(books: list[dict], query: str) -> list[dict]:
                       hits = [b for b in books if query in b["title"] or query in b["author"]]
                       return sorted(hits, key=lambda b: b["title"])
               ''',
               buggy='''
                   def find(books: list[dict], query: str) -> list[dict]:
                       q = query.lower()
                       return [b for b in books if q in b["title"].lower()]
               ''',
               own_tests=("tests/test_catalog.py::test_find",)),
        Target("library/loans.py", "due_date",
               "it returns the ISO date (YYYY-MM-DD) that is `days` days (default 14) after the ISO date `start`.",
               wrong='''
                   def due_date(start: str, days: int) -> str:
                       return (datetime.date.fromisoformat(start) + datetime.timedelta(days=days)).isoformat()
               ''',
               buggy='''
                   def due_date(start: str, days: int = 14) -> str:
                       year, month, day = map(int, start.split("-"))
                       return f"{year:04d}-{month:02d}-{day + days:02d}"
               ''',
               own_tests=("tests/test_loans.py::test_due_date",),
               old='''
                   def due_date(start: str) -> str:
                       """The ISO date 14 days after the ISO date `start`."""
                       return (datetime.date.fromisoformat(start) + datetime.timedelta(days=14)).isoformat()
               ''',
               change_request="Make the loan length of `due_date` in `library/loans.py` configurable: add a "
                              "parameter `days` (default 14) and return the ISO date `days` days after `start`."),
        Target("library/loans.py", "fine_cents",
               "it returns the late fine in cents: `per_day` (default 25) per late day, never more than `cap` "
               "(default 500), and 0 when `days_late` is 0 or negative.",
               wrong='''
                   def fine_cents(days_late: int, per_day: int = 25, cap: int = 500) -> int:
                       return max(0, days_late) * per_day
               ''',
               buggy='''
                   def fine_cents(days_late: int, per_day: int = 25, cap: int = 500) -> int:
                       return min(cap, days_late * per_day) + per_day
               ''',
               own_tests=("tests/test_loans.py::test_fine_cents",)),
    ),
)  # fmt: skip
