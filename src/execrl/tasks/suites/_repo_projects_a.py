"""Repository projects, part 1: a shop and a text-statistics tool."""

from __future__ import annotations

from execrl.tasks.suites._repo_core import Project, Target

SHOP = Project(
    name="shop",
    files={
        "shop/money.py": '''
            def to_cents(amount: str) -> int:
                """Parse a price like '12.34', '7' or '0.5' into whole cents (1234, 700, 50)."""
                whole, _, frac = amount.partition(".")
                return int(whole) * 100 + int((frac + "00")[:2])


            def format_cents(cents: int, symbol: str = "$") -> str:
                """Format cents as money: 1234 -> '$12.34', -50 -> '-$0.50'."""
                sign = "-" if cents < 0 else ""
                cents = abs(cents)
                return f"{sign}{symbol}{cents // 100}.{cents % 100:02d}"
        ''',
        "shop/pricing.py": '''
            from shop.money import to_cents


            def line_total(price: str, quantity: int) -> int:
                """Total of one cart line in cents."""
                return to_cents(price) * quantity


            def apply_discount(total_cents: int, percent: int) -> int:
                """The total after a percentage discount; the discount is rounded down to whole cents."""
                return total_cents - total_cents * percent // 100
        ''',
        "shop/cart.py": '''
            from shop.money import format_cents
            from shop.pricing import apply_discount, line_total


            def cart_total(items: list[tuple[str, str, int]], discount_percent: int = 0) -> int:
                """Total in cents of (name, price, quantity) items after the discount."""
                subtotal = sum(line_total(price, quantity=qty) for _, price, qty in items)
                return apply_discount(subtotal, discount_percent)


            def receipt(items: list[tuple[str, str, int]], discount_percent: int = 0) -> list[str]:
                """One line per item and a final TOTAL line."""
                lines = [f"{name} x{qty}: {format_cents(line_total(price, quantity=qty))}" for name, price, qty in items]
                lines.append(f"TOTAL: {format_cents(cart_total(items, discount_percent))}")
                return lines
        ''',
        "tests/test_money.py": '''
            from shop.money import format_cents, to_cents


            def test_to_cents():
                assert to_cents("12.34") == 1234
                assert to_cents("7") == 700
                assert to_cents("0.5") == 50


            def test_format_cents():
                assert format_cents(1234, "$") == "$12.34"
                assert format_cents(5, "$") == "$0.05"
                assert format_cents(-50, "EUR ") == "-EUR 0.50"
        ''',
        "tests/test_pricing.py": '''
            from shop.pricing import apply_discount, line_total


            def test_line_total():
                assert line_total("2.50", 3) == 750


            def test_apply_discount():
                assert apply_discount(1000, 15) == 850
                assert apply_discount(2000, 50) == 1000
        ''',
        "tests/test_cart.py": '''
            from shop.cart import cart_total, receipt

            ITEMS = [("tea", "3.99", 2), ("cake", "19.99", 1), ("jam", "0.29", 3)]


            def test_cart_total():
                assert cart_total(ITEMS) == 798 + 1999 + 87


            def test_cart_total_with_discount():
                assert cart_total(ITEMS, 10) == 2884 - 288


            def test_receipt():
                assert receipt(ITEMS, 10) == ["tea x2: $7.98", "cake x1: $19.99", "jam x3: $0.87", "TOTAL: $25.96"]
        ''',
    },
    targets=(
        Target("shop/money.py", "to_cents",
               "it parses a price string such as '12.34', '7' or '0.5' into an integer number of cents.",
               wrong='''
                   def to_cents(amount: str) -> int:
                       return int(float(amount) * 100)
               ''',
               buggy='''
                   def to_cents(amount: str) -> int:
                       whole, _, frac = amount.partition(".")
                       return int(whole) * 100 + int(frac or 0)
               ''',
               own_tests=("tests/test_money.py::test_to_cents",)),
        Target("shop/money.py", "format_cents",
               "it formats an integer number of cents as money with the given currency symbol (default '$'), "
               "e.g. 1234 -> '$12.34' and -50 -> '-$0.50'.",
               wrong='''
                   def format_cents(cents: int, symbol: str) -> str:
                       sign = "-" if cents < 0 else ""
                       cents = abs(cents)
                       return f"{sign}{symbol}{cents // 100}.{cents % 100:02d}"
               ''',
               buggy='''
                   def format_cents(cents: int, symbol: str = "$") -> str:
                       return f"{symbol}{cents // 100}.{cents % 100}"
               ''',
               own_tests=("tests/test_money.py::test_format_cents",),
               old='''
                   def format_cents(cents: int) -> str:
                       """Format cents as money: 1234 -> '$12.34', -50 -> '-$0.50'."""
                       sign = "-" if cents < 0 else ""
                       cents = abs(cents)
                       return f"{sign}${cents // 100}.{cents % 100:02d}"
               ''',
               change_request="Add a parameter `symbol` to `format_cents` in `shop/money.py` (default '$') and "
                              "use it instead of the hard-coded dollar sign, e.g. format_cents(-50, 'EUR ') "
                              "returns '-EUR 0.50'."),
        Target("shop/pricing.py", "line_total",
               "it returns the total of one cart line in cents: the price string converted with `to_cents` "
               "times `quantity`.",
               wrong='''
                   def line_total(price: str, qty: int) -> int:
                       return to_cents(price) * qty
               ''',
               buggy='''
                   def line_total(price: str, quantity: int) -> int:
                       return to_cents(price) + quantity
               ''',
               own_tests=("tests/test_pricing.py::test_line_total",)),
        Target("shop/pricing.py", "apply_discount",
               "it returns `total_cents` minus a `percent` discount, where the discount is rounded down to "
               "whole cents (the result is an int).",
               wrong='''
                   def apply_discount(total_cents: int, percent: int) -> int:
                       return total_cents * (100 - percent) / 100
               ''',
               buggy='''
                   def apply_discount(total_cents: int, percent: int) -> int:
                       return total_cents * percent // 100
               ''',
               own_tests=("tests/test_pricing.py::test_apply_discount",)),
    ),
)  # fmt: skip

TEXTSTATS = Project(
    name="textstats",
    files={
        "textstats/tokens.py": '''
            def words(text: str) -> list[str]:
                """Lower-cased words: runs of letters and apostrophes; everything else separates words."""
                out = []
                current = ""
                for ch in text.lower() + " ":
                    if ch.isalpha() or ch == "'":
                        current += ch
                    elif current:
                        out.append(current)
                        current = ""
                return out


            def sentences(text: str) -> list[str]:
                """Sentences end with '.', '!' or '?'; returns them stripped, without empty ones."""
                out = []
                current = ""
                for ch in text:
                    current += ch
                    if ch in ".!?":
                        if current.strip(" .!?"):
                            out.append(current.strip())
                        current = ""
                if current.strip():
                    out.append(current.strip())
                return out
        ''',
        "textstats/stats.py": '''
            from textstats.tokens import sentences, words


            def word_counts(text: str) -> dict[str, int]:
                """How often each word occurs."""
                counts: dict[str, int] = {}
                for w in words(text):
                    counts[w] = counts.get(w, 0) + 1
                return counts


            def top_words(text: str, n: int = 3) -> list[tuple[str, int]]:
                """The n most frequent (word, count) pairs, most frequent first, ties alphabetical."""
                counts = word_counts(text)
                return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]


            def words_per_sentence(text: str) -> float:
                """Average number of words per sentence (0.0 for no sentences)."""
                parts = sentences(text)
                return len(words(text)) / len(parts) if parts else 0.0
        ''',
        "textstats/report.py": '''
            from textstats.stats import top_words, words_per_sentence


            def summary(text: str) -> str:
                """A one-line summary used by the command line tool."""
                top = ", ".join(f"{w}={c}" for w, c in top_words(text, n=2))
                return f"top: {top}; words/sentence: {words_per_sentence(text):.1f}"
        ''',
        "tests/test_tokens.py": '''
            from textstats.tokens import sentences, words


            def test_words():
                assert words("the cat sat on the mat") == ["the", "cat", "sat", "on", "the", "mat"]
                assert words("don't stop") == ["don't", "stop"]


            def test_sentences():
                assert sentences("One. Two!") == ["One.", "Two!"]
        ''',
        "tests/test_stats.py": '''
            from textstats.stats import top_words, word_counts, words_per_sentence


            def test_word_counts():
                assert word_counts("a b a") == {"a": 2, "b": 1}


            def test_top_words():
                assert top_words("b a b c a b", 2) == [("b", 3), ("a", 2)]


            def test_words_per_sentence():
                assert words_per_sentence("Hi there. Bye!") == 1.5
        ''',
        "tests/test_report.py": '''
            from textstats.report import summary


            def test_summary():
                text = "The dog barked. The Dog ran - fast... Why? The end"
                assert summary(text) == "top: the=3, dog=2; words/sentence: 2.5"
        ''',
    },
    targets=(
        Target("textstats/tokens.py", "words",
               "it returns the lower-cased words of `text`, where a word is a run of letters and apostrophes "
               "and every other character separates words.",
               wrong='''
                   def words(text: str) -> list[str]:
                       return text.split()
               ''',
               buggy='''
                   def words(text: str) -> list[str]:
                       out = []
                       current = ""
                       for ch in text.lower():
                           if ch.isalpha() or ch == "'":
                               current += ch
                           elif current:
                               out.append(current)
                               current = ""
                       return out
               ''',
               own_tests=("tests/test_tokens.py::test_words",)),
        Target("textstats/tokens.py", "sentences",
               "it splits `text` into sentences that end with '.', '!' or '?', strips them and drops empty "
               "ones (such as the extra dots of '...'); trailing text without an end mark is a sentence too.",
               wrong='''
                   def sentences(text: str) -> list[str]:
                       out = []
                       current = ""
                       for ch in text:
                           current += ch
                           if ch in ".!?":
                               out.append(current.strip())
                               current = ""
                       if current.strip():
                           out.append(current.strip())
                       return out
               ''',
               buggy='''
                   def sentences(text: str) -> list[str]:
                       return [s.strip() for s in text.split(".") if s.strip()]
               ''',
               own_tests=("tests/test_tokens.py::test_sentences",), difficulty=3),
        Target("textstats/stats.py", "top_words",
               "it returns the `n` most frequent (word, count) pairs as a list of tuples, most frequent first, "
               "ties in alphabetical order; `n` defaults to 3.",
               wrong='''
                   def top_words(text: str, count: int = 3) -> list[tuple[str, int]]:
                       counts = word_counts(text)
                       return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:count]
               ''',
               buggy='''
                   def top_words(text: str, n: int = 3) -> list[tuple[str, int]]:
                       counts = word_counts(text)
                       return sorted(counts.items(), key=lambda item: item[1], reverse=True)[:n - 1]
               ''',
               own_tests=("tests/test_stats.py::test_top_words",)),
        Target("textstats/stats.py", "words_per_sentence",
               "it returns the average number of words per sentence as a float (0.0 when there are no sentences).",
               wrong='''
                   def words_per_sentence(text: str) -> float:
                       parts = sentences(text)
                       return len(text.split()) / len(parts) if parts else 0.0
               ''',
               buggy='''
                   def words_per_sentence(text: str) -> float:
                       parts = sentences(text)
                       return len(words(text)) // len(parts) if parts else 0.0
               ''',
               own_tests=("tests/test_stats.py::test_words_per_sentence",)),
    ),
)  # fmt: skip
