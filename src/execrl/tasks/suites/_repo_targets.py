"""What each repository project asks for: its target functions, in task order.

The projects themselves (modules, tests, and each target's ``wrong``/``buggy``/``old`` variants) are real
files under ``repository-projects/<name>/`` (see ``_repo_core.load_project``), so linters read them.
"""

from __future__ import annotations

from execrl.tasks.suites._repo_core import Target

# Project names in suite order: the order fixes task indices and ids (``repository/shop/0003``).
TARGETS: dict[str, tuple[Target, ...]] = {
    "shop": (
        Target(
            "shop/money.py",
            "to_cents",
            "it parses a price string such as '12.34', '7' or '0.5' into an integer number of cents.",
            own_tests=("tests/test_money.py::test_to_cents",),
        ),
        Target(
            "shop/money.py",
            "format_cents",
            "it formats an integer number of cents as money with the given currency symbol (default '$'), e.g. 1234 -> '$12.34' and -50 -> '-$0.50'.",
            own_tests=("tests/test_money.py::test_format_cents",),
            change_request="Add a parameter `symbol` to `format_cents` in `shop/money.py` (default '$') and use it instead of the hard-coded dollar sign, e.g. format_cents(-50, 'EUR ') returns '-EUR 0.50'.",
        ),
        Target(
            "shop/pricing.py",
            "line_total",
            "it returns the total of one cart line in cents: the price string converted with `to_cents` times `quantity`.",
            own_tests=("tests/test_pricing.py::test_line_total",),
        ),
        Target(
            "shop/pricing.py",
            "apply_discount",
            "it returns `total_cents` minus a `percent` discount, where the discount is rounded down to whole cents (the result is an int).",
            own_tests=("tests/test_pricing.py::test_apply_discount",),
        ),
    ),
    "textstats": (
        Target(
            "textstats/tokens.py",
            "words",
            "it returns the lower-cased words of `text`, where a word is a run of letters and apostrophes and every other character separates words.",
            own_tests=("tests/test_tokens.py::test_words",),
        ),
        Target(
            "textstats/tokens.py",
            "sentences",
            "it splits `text` into sentences that end with '.', '!' or '?', strips them and drops empty ones (such as the extra dots of '...'); trailing text without an end mark is a sentence too.",
            own_tests=("tests/test_tokens.py::test_sentences",),
            difficulty=3,
        ),
        Target(
            "textstats/stats.py",
            "top_words",
            "it returns the `n` most frequent (word, count) pairs as a list of tuples, most frequent first, ties in alphabetical order; `n` defaults to 3.",
            own_tests=("tests/test_stats.py::test_top_words",),
        ),
        Target(
            "textstats/stats.py",
            "words_per_sentence",
            "it returns the average number of words per sentence as a float (0.0 when there are no sentences).",
            own_tests=("tests/test_stats.py::test_words_per_sentence",),
        ),
    ),
    "tracker": (
        Target(
            "tracker/model.py",
            "parse_task",
            "it parses a line like '[x] Buy milk @home !2' into a dict with 'title', 'done' (bool), 'tags' (list of tags without '@') and 'priority' (an int from '!N', default 3).",
            own_tests=("tests/test_model.py::test_parse_task",),
            difficulty=3,
        ),
        Target(
            "tracker/store.py",
            "pending",
            "it returns the tasks that are not done, sorted by priority (lowest number first), keeping the file order for equal priorities, without changing the list it was given.",
            own_tests=("tests/test_store.py::test_pending",),
        ),
        Target(
            "tracker/store.py",
            "by_tag",
            "it returns a dict from each tag to the list of titles of the tasks carrying it, in task order.",
            own_tests=("tests/test_store.py::test_by_tag",),
        ),
        Target(
            "tracker/model.py",
            "label",
            "it renders a task as '[x] Title (pN)' for done tasks and '[ ] Title (pN)' for open ones.",
            own_tests=("tests/test_model.py::test_label",),
        ),
    ),
    "grades": (
        Target(
            "grades/scores.py",
            "average",
            "it returns the mean of `scores` as a float and raises ValueError when the list is empty.",
            own_tests=("tests/test_scores.py::test_average",),
        ),
        Target(
            "grades/scores.py",
            "letter",
            "it returns the letter of the first (threshold, letter) pair of `scale` (default SCALE) whose threshold is at most `avg`, or 'F' when there is none.",
            own_tests=("tests/test_scores.py::test_letter",),
            change_request="Let `letter` in `grades/scores.py` take the grading scale as a second parameter `scale` (a tuple of (threshold, letter) pairs, default SCALE) instead of always using SCALE.",
        ),
        Target(
            "grades/scores.py",
            "curve",
            "it returns a new list with `points` added to each score, capped at 100, and leaves `scores` unchanged.",
            own_tests=("tests/test_scores.py::test_curve",),
        ),
        Target(
            "grades/roster.py",
            "parse_roster",
            "it turns lines like 'Ann: 90, 85' into a dict {'Ann': [90, 85]}, stripping names and numbers; a name with nothing after the colon gets an empty list.",
            own_tests=("tests/test_roster.py::test_parse_roster",),
            difficulty=3,
        ),
    ),
    "warehouse": (
        Target(
            "warehouse/stock.py",
            "restock",
            "it returns a new stock dict with `qty` more items of `sku`, without changing the dict it was given.",
            own_tests=("tests/test_stock.py::test_restock",),
        ),
        Target(
            "warehouse/stock.py",
            "take",
            "it returns a new stock dict with `qty` fewer items of `sku` and raises ValueError when fewer than `qty` are in stock.",
            own_tests=("tests/test_stock.py::test_take",),
        ),
        Target(
            "warehouse/stock.py",
            "low_stock",
            "it returns the sorted list of SKUs that have fewer than `threshold` items (default 5).",
            own_tests=("tests/test_stock.py::test_low_stock",),
            change_request="Give `low_stock` in `warehouse/stock.py` a `threshold` parameter (default 5) instead of the fixed limit of 5: it returns the sorted SKUs with fewer than `threshold` items.",
        ),
        Target(
            "warehouse/orders.py",
            "parse_order",
            "it turns an order like '3x apple, 2x pear' into a list of (sku, quantity) tuples with integer quantities, e.g. [('apple', 3), ('pear', 2)].",
            own_tests=("tests/test_orders.py::test_parse_order",),
        ),
    ),
    "conf": (
        Target(
            "conf/parse.py",
            "parse_line",
            "it turns 'key = value' into the tuple ('key', 'value') with both parts stripped, and returns None for blank lines, '#' comments and lines without '='.",
            own_tests=("tests/test_parse.py::test_parse_line",),
        ),
        Target(
            "conf/typed.py",
            "get_int",
            "it returns the value of `key` converted to int, or `default` (default 0) when `key` is missing.",
            own_tests=("tests/test_typed.py::test_get_int",),
            change_request="Add a `default` parameter (default 0) to `get_int` in `conf/typed.py`: it is returned instead of 0 when the key is missing.",
        ),
        Target(
            "conf/typed.py",
            "get_bool",
            "it returns True when the value of `key` is '1', 'true', 'yes' or 'on' in any letter case, and False otherwise or when the key is missing.",
            own_tests=("tests/test_typed.py::test_get_bool",),
        ),
        Target(
            "conf/typed.py",
            "get_list",
            "it splits the value of `key` on commas and returns the stripped, non-empty items ([] when the key is missing).",
            own_tests=("tests/test_typed.py::test_get_list",),
        ),
    ),
    "ledger": (
        Target(
            "ledger/entries.py",
            "parse_amount",
            "it converts an amount such as '-45.20', '12' or '3.5' into integer cents (-4520, 1200, 350).",
            own_tests=("tests/test_entries.py::test_parse_amount",),
            difficulty=3,
        ),
        Target(
            "ledger/entries.py",
            "parse_entry",
            "it splits a line 'DATE CATEGORY AMOUNT' into a tuple (date, lower-cased category, amount in cents via `parse_amount`).",
            own_tests=("tests/test_entries.py::test_parse_entry",),
        ),
        Target(
            "ledger/summary.py",
            "by_category",
            "it returns a dict with the total cents of each category.",
            own_tests=("tests/test_summary.py::test_by_category",),
        ),
        Target(
            "ledger/summary.py",
            "monthly",
            "it returns a dict with the total cents of each month, keyed by 'YYYY-MM'.",
            own_tests=("tests/test_summary.py::test_monthly",),
        ),
    ),
    "library": (
        Target(
            "library/catalog.py",
            "normalize_isbn",
            "it removes spaces and hyphens from an ISBN and upper-cases it, so '0-306-40615-x' becomes '030640615X'.",
            own_tests=("tests/test_catalog.py::test_normalize_isbn",),
        ),
        Target(
            "library/catalog.py",
            "find",
            "it returns the books whose title or author contains `query` ignoring letter case, sorted by title.",
            own_tests=("tests/test_catalog.py::test_find",),
        ),
        Target(
            "library/loans.py",
            "due_date",
            "it returns the ISO date (YYYY-MM-DD) that is `days` days (default 14) after the ISO date `start`.",
            own_tests=("tests/test_loans.py::test_due_date",),
            change_request="Make the loan length of `due_date` in `library/loans.py` configurable: add a parameter `days` (default 14) and return the ISO date `days` days after `start`.",
        ),
        Target(
            "library/loans.py",
            "fine_cents",
            "it returns the late fine in cents: `per_day` (default 25) per late day, never more than `cap` (default 500), and 0 when `days_late` is 0 or negative.",
            own_tests=("tests/test_loans.py::test_fine_cents",),
        ),
    ),
}
