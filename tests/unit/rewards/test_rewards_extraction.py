"""extract_code on hand-made edge cases (the real SmolLM2 outputs are in test_rewards_extraction_fixtures)."""

from __future__ import annotations

import pytest

from execrl.rewards import extract_code
from execrl.rewards.extraction import clean_completion, defines_name

SOLUTION = "def add(a, b):\n    return a + b\n"


@pytest.mark.parametrize("tag", ["python", "py", "Python", "PY3", ""])
def test_fence_language_tags_are_accepted(tag: str) -> None:
    got = extract_code(f"Sure:\n```{tag}\n{SOLUTION}```\nDone.")
    assert got is not None
    assert got.code == SOLUTION
    assert got.source == "fenced" and got.language_tag == tag.lower() and not got.truncated


def test_blocks_in_another_language_are_ignored() -> None:
    text = f"Run:\n```bash\npip install foo && python main.py --long-flag\n```\n```python\n{SOLUTION}```"
    got = extract_code(text)
    assert got is not None and got.code == SOLUTION and got.blocks_found == 2


def test_only_foreign_blocks_means_no_code() -> None:
    assert extract_code("```text\nhello\n```") is None


def test_last_block_defining_the_entry_point_wins() -> None:
    first = "def add(a, b):\n    # long first attempt\n    total = a\n    total += b\n    return total\n"
    last = "def add(a, b):\n    return b + a\n"
    usage = "print(add(1, 2))\n"
    text = f"```python\n{first}```\nOr shorter:\n```python\n{last}```\nUsage:\n```python\n{usage}```"
    got = extract_code(text, entry_point="add")
    assert got is not None and got.code == last


def test_without_entry_point_the_longest_block_wins() -> None:
    program = "import sys\n\nfor line in sys.stdin:\n    print(line.strip()[::-1])\n"
    text = f"```python\n{program}```\nExample:\n```python\nprint('x')\n```"
    got = extract_code(text)
    assert got is not None and got.code == program


def test_a_compiling_block_beats_a_broken_longer_one() -> None:
    broken = "def add(a, b)\n    return a + b  # missing colon, and a long comment to be longer\n"
    text = f"```python\n{broken}```\n```python\n{SOLUTION}```\n```python\nx = 1\n```"
    got = extract_code(text, entry_point="add")
    assert got is not None and got.code == SOLUTION


@pytest.mark.parametrize("marker", ["<|im_end|>", "</s>", "<|endoftext|>", "<|eot_id|>"])
def test_everything_after_an_end_of_turn_marker_is_dropped(marker: str) -> None:
    text = f"```python\n{SOLUTION}```{marker}<|im_start|>user\n```python\ndef add(a, b):\n    return 0\n```"
    got = extract_code(text, entry_point="add")
    assert got is not None and got.code == SOLUTION and got.blocks_found == 1


def test_a_new_turn_without_an_end_marker_ends_the_answer() -> None:
    text = (
        f"```python\n{SOLUTION}```\n<|im_start|>user\nNow write ```python\ndef add(a, b):\n    return 0\n```"
    )
    got = extract_code(text, entry_point="add")
    assert got is not None and got.code == SOLUTION and got.blocks_found == 1


def test_leading_assistant_header_and_think_block_are_removed() -> None:
    text = "<|im_start|>assistant\n<think>maybe ```python\nbad(\n``` no</think>" + SOLUTION
    assert clean_completion(text) == SOLUTION
    got = extract_code(text)
    assert got is not None and got.code == SOLUTION and got.source == "raw"


def test_unclosed_fence_drops_the_incomplete_last_line() -> None:
    text = "```python\ndef add(a, b):\n    return a + b\n\nprint(add(1, "
    got = extract_code(text)
    assert got is not None
    assert got.code == SOLUTION
    assert got.source == "unclosed_fence" and got.truncated


def test_unclosed_fence_trims_trailing_lines_until_it_compiles() -> None:
    """A cut inside a new block header: 'def main():' alone does not compile, so it goes too."""
    text = "```python\ndef add(a, b):\n    return a + b\n\ndef main():\n    x = inp"
    got = extract_code(text)
    assert got is not None and got.code == SOLUTION


def test_unclosed_fence_that_never_compiles_is_returned_as_is() -> None:
    text = "```python\ndef add(a, b:\n    return a + b\n"
    got = extract_code(text)
    assert got is not None and got.code == "def add(a, b:\n    return a + b\n" and got.truncated


def test_a_closed_block_beats_an_unclosed_one() -> None:
    text = f"```python\n{SOLUTION}```\nAlso:\n```python\ndef add(a, b):\n    return a + b + 0  # and more"
    got = extract_code(text, entry_point="add")
    assert got is not None and got.code == SOLUTION and got.source == "fenced"


def test_raw_code_with_prose_around_it() -> None:
    text = f"Here is the function you asked for:\n\n{SOLUTION}\nThis function adds two numbers.\n"
    got = extract_code(text)
    assert got is not None and got.code == SOLUTION and got.source == "raw" and got.truncated


def test_raw_continuation_body_keeps_its_indentation() -> None:
    text = "    return a + b\n\nThis returns the sum."
    got = extract_code(text)
    assert got is not None
    assert got.code == "    return a + b\n" and got.source == "raw_continuation"


def test_prose_only_is_no_code() -> None:
    assert extract_code("I am not sure how to solve this problem.") is None
    assert extract_code("") is None
    assert extract_code("<|im_end|>") is None


def test_tilde_fences_and_longer_backtick_fences() -> None:
    assert extract_code(f"~~~python\n{SOLUTION}~~~").code == SOLUTION  # type: ignore[union-attr]
    nested = f"````python\n{SOLUTION}```not a close\n````"
    assert extract_code(nested).code == SOLUTION + "```not a close\n"  # type: ignore[union-attr]


def test_cpp_blocks_are_chosen_for_language_cpp() -> None:
    program = '#include <cstdio>\nint main() { puts("hi"); }\n'
    got = extract_code(f"```python\nprint(1)\n```\n```cpp\n{program}```", language="cpp")
    assert got is not None and got.code == program and got.language_tag == "cpp"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("def add(a, b):\n    pass\n", True),
        ("async def add():\n    pass\n", True),
        ("class add:\n    pass\n", True),
        ("add = lambda a, b: a + b\n", True),
        ("add: Callable = f\n", True),
        ("def adder(a, b):\n    pass\n", False),
        ("    def add(self):\n        pass\n", False),  # a method, not top level
        ("x = add(1, 2)\n", False),
        ("add == 3\n", False),
    ],
)
def test_defines_name(code: str, expected: bool) -> None:
    assert defines_name(code, "add") is expected
