"""extract_code on real SmolLM2-135M-Instruct outputs (``scripts/make_reward_fixtures.py``).

Every expectation below was checked by hand against the raw output in
``tests/fixtures/rewards/smollm2_outputs.jsonl``: the block chosen, its first and last line, and for the
interesting cases the exact code. Regenerating the fixture file means re-checking this table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from execrl.rewards import extract_code
from execrl.rewards.extraction import compiles

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "rewards" / "smollm2_outputs.jsonl"
RECORDS: dict[str, dict[str, Any]] = {
    row["id"]: row for row in (json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines())
}

# id, source, fenced blocks in the answer, lines of code, first line, last line
EXPECTED: list[tuple[str, str, int, int, str, str]] = [
    ("add/greedy/0", "fenced", 1, 2, "def add(a, b):", "    return a + b"),
    (
        "is_palindrome/greedy/0",
        "fenced",
        1,
        2,
        "def is_palindrome(s: str) -> bool:",
        "    return s == s[::-1]",
    ),
    (
        "max_of_list/greedy/0",
        "fenced",
        1,
        2,
        "def max_of_list(xs: list[int]) -> int:",
        "    return max(max_of_list(xs))",
    ),
    (
        "count_vowels/greedy/0",
        "fenced",
        2,
        3,
        "def count_vowels(text):",
        "    return sum(1 for char in text if char in vowels)",
    ),
    ("sum_stdin/greedy/0", "fenced", 1, 11, "def sum_two_integers(num1, num2):", "main()"),
    ("reverse_words_stdin/greedy/0", "fenced", 1, 10, "def reverse_words(input_str):", "main()"),
    ("add/sampled/0", "fenced", 1, 2, "def add_two_integers(a, b):", "    return a + b"),
    ("add/sampled/1", "fenced", 2, 2, "def add(a, b):", "    return a + b"),
    ("add/sampled/2", "fenced", 3, 3, "def add(a, b):", "    return result + 2"),
    (
        "is_palindrome/sampled/0",
        "fenced",
        1,
        2,
        "def is_palindrome(s: str) -> bool:",
        "    return s == s[::-1]",
    ),
    (
        "is_palindrome/sampled/1",
        "fenced",
        2,
        2,
        "def is_palindrome(s: str) -> bool:",
        "    return s == map(reversed_string, map(lambda x: x[::-1], reversed_list))",
    ),
    (
        "is_palindrome/sampled/2",
        "fenced",
        2,
        2,
        "def is_palindrome(s: str) -> bool:",
        "    return s == s[::-1]",
    ),
    (
        "max_of_list/sampled/0",
        "fenced",
        2,
        3,
        "def max_of_list(xs: list[int]) -> int:",
        "    return max(x for x in xs if len(x) > 1)",
    ),
    (
        "max_of_list/sampled/1",
        "fenced",
        2,
        2,
        "def max_of_list(xs: list[int]) -> int:",
        "    return max(max_of_list(xs[:20]) for _ in range(20))",
    ),
    (
        "max_of_list/sampled/2",
        "fenced",
        2,
        2,
        "def max_of_list(xs: list[int]) -> int:",
        "    return max(max_of_list, len(xs))",
    ),
    ("count_vowels/sampled/0", "fenced", 1, 7, "def count_vowels(text):", "    return vowels_count"),
    ("count_vowels/sampled/1", "fenced", 2, 10, "def count_vowels(text):", "    return count"),
    (
        "count_vowels/sampled/2",
        "fenced",
        1,
        2,
        "def count_vowels(text):",
        "    return len(text.lower()) - len(str.maketrans(r'[aeiouyAEIOU', '', 'abcdef'))",
    ),
    ("sum_stdin/sampled/0", "fenced", 1, 14, "def sum_numbers(n1, n2):", "main()"),
    ("sum_stdin/sampled/1", "fenced", 1, 8, "def sum_two_int(num1, num2):", "main()"),
    ("sum_stdin/sampled/2", "fenced", 1, 14, "def sum_two_integers(num1, num2):", "main()"),
    ("reverse_words_stdin/sampled/0", "fenced", 1, 9, "def reverse_words(input_line):", "main()"),
    (
        "reverse_words_stdin/sampled/1",
        "fenced",
        1,
        5,
        "def reverse_words_in_order(input_list):",
        "print(reverse_words_in_order(words))",
    ),
    ("reverse_words_stdin/sampled/2", "fenced", 1, 9, "def reverse_words(line):", "main()"),
    ("add/plain/0", "fenced", 1, 2, "def add(a, b):", "    return a + b"),
    (
        "is_palindrome/plain/0",
        "fenced",
        1,
        3,
        "def is_palindrome(s: str) -> bool:",
        "    return s == s[::-1]",
    ),
    (
        "max_of_list/plain/0",
        "fenced",
        1,
        2,
        "def max_of_list(xs: list[int]) -> int:",
        "    return max(x for x in xs if x > 0)",
    ),
    ("count_vowels/plain/0", "fenced", 1, 16, "def count_vowels(text):", "    return result"),
    ("sum_stdin/plain/0", "fenced", 1, 7, "def sum_two_integers():", "print(sum_result)"),
    ("reverse_words_stdin/plain/0", "fenced", 1, 10, "def reverse_words(line):", "main()"),
    ("add/short/0", "fenced", 1, 2, "def add(a, b):", "    return a + b"),
    (
        "is_palindrome/short/0",
        "fenced",
        1,
        2,
        "def is_palindrome(s: str) -> bool:",
        "    return s == s[::-1]",
    ),
    (
        "max_of_list/short/0",
        "fenced",
        1,
        2,
        "def max_of_list(xs: list[int]) -> int:",
        "    return max(max_of_list(xs))",
    ),
    (
        "count_vowels/short/0",
        "fenced",
        1,
        3,
        "def count_vowels(text):",
        "    return sum(1 for char in text if char in vowels)",
    ),
    (
        "sum_stdin/short/0",
        "unclosed_fence",
        1,
        2,
        "def sum_two_integers(num1, num2):",
        "    return sum(num1, num2)",
    ),
    (
        "reverse_words_stdin/short/0",
        "unclosed_fence",
        1,
        5,
        "def reverse_words(input_str):",
        '    input_str = input("Enter a line of text: ")',
    ),
]


def test_the_corpus_is_the_generated_one() -> None:
    assert len(RECORDS) == 36
    assert {row["decoding"] for row in RECORDS.values()} == {"greedy", "sampled"}
    assert sum(row["hit_token_limit"] for row in RECORDS.values()) == 6
    assert [e[0] for e in EXPECTED] == list(RECORDS)


@pytest.mark.parametrize(("record_id", "source", "blocks", "n_lines", "first", "last"), EXPECTED)
def test_extraction_on_real_outputs(
    record_id: str, source: str, blocks: int, n_lines: int, first: str, last: str
) -> None:
    record = RECORDS[record_id]
    got = extract_code(record["output"], entry_point=record["entry_point"])
    assert got is not None
    lines = got.code.splitlines()
    assert (got.source, got.blocks_found, len(lines), lines[0], lines[-1]) == (
        source,
        blocks,
        n_lines,
        first,
        last,
    )
    assert compiles(got.code), "every extraction of this corpus compiles"
    assert "```" not in got.code and "<|im_end|>" not in got.code


def test_usage_example_block_is_not_taken_for_the_solution() -> None:
    """count_vowels/greedy/0: solution block, prose, then a usage block printing a call."""
    got = extract_code(RECORDS["count_vowels/greedy/0"]["output"], entry_point="count_vowels")
    assert got is not None and got.code == (
        'def count_vowels(text):\n    vowels = "aeiou"\n    return sum(1 for char in text if char in vowels)\n'
    )


def test_the_last_block_defining_the_entry_point_is_the_answer() -> None:
    """add/sampled/2: a solution, a usage block, then a 'manual' rewrite; the model's last word wins."""
    got = extract_code(RECORDS["add/sampled/2"]["output"], entry_point="add")
    assert got is not None and got.code == "def add(a, b):\n    result = a + b\n    return result + 2\n"


def test_without_entry_point_the_longest_block_wins_on_real_output() -> None:
    """add/sampled/1 scored as if no entry point were known: the 2-line solution beats the usage block."""
    got = extract_code(RECORDS["add/sampled/1"]["output"])
    assert got is not None and got.code == "def add(a, b):\n    return a + b\n"


def test_output_cut_inside_a_string_literal_keeps_the_complete_function() -> None:
    """sum_stdin/short/0 ends in 'num1 = int(input("': the partial line and the header left open go."""
    record = RECORDS["sum_stdin/short/0"]
    assert record["hit_token_limit"] and record["output"].endswith('input("')
    got = extract_code(record["output"])
    assert got is not None and got.truncated
    assert got.code == "def sum_two_integers(num1, num2):\n    return sum(num1, num2)\n"


def test_output_cut_after_a_complete_line_keeps_that_line() -> None:
    """reverse_words_stdin/short/0 ends with a whitespace-only partial line after a complete statement."""
    got = extract_code(RECORDS["reverse_words_stdin/short/0"]["output"])
    assert got is not None and got.code.endswith('    input_str = input("Enter a line of text: ")\n')


def test_prose_cut_after_a_closed_block_is_ignored() -> None:
    """is_palindrome/short/0 hit the token limit in the explanation, after the block was closed."""
    record = RECORDS["is_palindrome/short/0"]
    got = extract_code(record["output"], entry_point="is_palindrome")
    assert record["hit_token_limit"] and got is not None and got.source == "fenced" and not got.truncated
