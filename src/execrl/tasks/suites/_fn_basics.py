"""Difficulty-1 function templates: one-liners a 135M instruct model can sometimes get right.

These give the RL demo a non-zero reward signal from the first step; without them the policy sees almost
only zero-reward groups and GRPO has nothing to learn from.
"""

from __future__ import annotations

import random

from execrl.tasks.suites._fn_core import FunctionTemplate as F
from execrl.tasks.suites._fn_core import Params
from execrl.tasks.suites._gen import int_list, letters, sentence, spaced, word, words


def _nums(r: random.Random, p: Params) -> tuple[list[int]]:
    return (int_list(r),)


def _nonempty(r: random.Random, p: Params) -> tuple[list[int]]:
    return (int_list(r, 1, 20, 1, 7),)


def _nums_target(r: random.Random, p: Params) -> tuple[list[int], int]:
    nums = int_list(r, 0, 5, 0, 8)
    return nums, r.randint(0, 5)


def _text(r: random.Random, p: Params) -> tuple[str]:
    return (r.choice([sentence(r), word(r), spaced(r), letters(r, "aAbEioU z")]),)


def _two(r: random.Random, p: Params) -> tuple[int, int]:
    return r.randint(-20, 20), r.randint(-20, 20)


def _one(r: random.Random, p: Params) -> tuple[int]:
    return (r.randint(-500, 500),)


LIST_BASICS: tuple[F, ...] = (
    F("sum_list", "list_basics", 1, "(nums: list[int]) -> int",
      "Return the sum of the numbers in `nums` (0 for an empty list).",
      "return sum(nums)",
      "total = 0\nfor i in range(len(nums) - 1):\n    total += nums[i]\nreturn total", _nums),
    F("product_list", "list_basics", 1, "(nums: list[int]) -> int",
      "Return the product of the numbers in `nums` (1 for an empty list).",
      "result = 1\nfor x in nums:\n    result *= x\nreturn result",
      "result = 1\nfor x in nums[1:]:\n    result *= x\nreturn result", _nums),
    F("count_evens", "list_basics", 1, "(nums: list[int]) -> int",
      "Return how many numbers in `nums` are even (zero and negative numbers count too).",
      "return sum(1 for x in nums if x % 2 == 0)",
      "return sum(1 for x in nums if x % 2 == 0 and x > 0)", _nums),
    F("sum_odds", "list_basics", 1, "(nums: list[int]) -> int",
      "Return the sum of the odd numbers in `nums`.",
      "return sum(x for x in nums if x % 2 != 0)",
      "return sum(nums[1::2])", _nums),
    F("smallest_value", "list_basics", 1, "(nums: list[int]) -> int",
      "Return the smallest number in `nums`. The list is never empty.",
      "return min(nums)",
      "best = 0\nfor x in nums:\n    if x < best:\n        best = x\nreturn best", _nonempty),
    F("list_average", "list_basics", 1, "(nums: list[int]) -> float",
      "Return the average of the numbers in `nums` as a float, or 0.0 for an empty list.",
      "return sum(nums) / len(nums) if nums else 0.0",
      "return sum(nums) // len(nums) if nums else 0.0", _nums),
    F("count_negatives", "list_basics", 1, "(nums: list[int]) -> int",
      "Return how many numbers in `nums` are strictly less than zero.",
      "return sum(1 for x in nums if x < 0)",
      "return sum(1 for x in nums if x <= 0)", _nums, edges=lambda p: (([0, -1, 0],),)),
    F("double_each", "list_basics", 1, "(nums: list[int]) -> list[int]",
      "Return a new list where every number of `nums` is doubled.",
      "return [x * 2 for x in nums]",
      "return [x ** 2 for x in nums]", _nums),
    F("contains_value", "list_basics", 1, "(nums: list[int], target: int) -> bool",
      "Return True if `target` appears in `nums`, otherwise False.",
      "return target in nums",
      "return target in nums[1:]", _nums_target, edges=lambda p: (([3, 1], 3),)),
    F("index_of", "list_basics", 1, "(nums: list[int], target: int) -> int",
      "Return the index of the first occurrence of `target` in `nums`, or -1 if it is not there.",
      "for i, x in enumerate(nums):\n    if x == target:\n        return i\nreturn -1",
      "found = -1\nfor i, x in enumerate(nums):\n    if x == target:\n        found = i\nreturn found",
      _nums_target, edges=lambda p: (([2, 5, 2], 2),)),
    F("count_occurrences", "list_basics", 1, "(nums: list[int], target: int) -> int",
      "Return how many times `target` appears in `nums`.",
      "return nums.count(target)",
      "return sum(1 for x in nums[1:] if x == target)", _nums_target, edges=lambda p: (([4, 4], 4),)),
    F("last_or_zero", "list_basics", 1, "(nums: list[int]) -> int",
      "Return the last number in `nums`, or 0 if the list is empty.",
      "return nums[-1] if nums else 0",
      "return nums[-1] if len(nums) > 1 else 0", _nums, edges=lambda p: (([7],),)),
    F("value_span", "list_basics", 1, "(nums: list[int]) -> int",
      "Return the largest number minus the smallest number in `nums`, or 0 for an empty list.",
      "return max(nums) - min(nums) if nums else 0",
      "return nums[-1] - nums[0] if nums else 0", _nums),
    F("square_each", "list_basics", 1, "(nums: list[int]) -> list[int]",
      "Return a new list with the square of every number in `nums`, in the same order.",
      "return [x * x for x in nums]",
      "return sorted(x * x for x in nums)", _nums),
    F("sum_absolute", "list_basics", 1, "(nums: list[int]) -> int",
      "Return the sum of the absolute values of the numbers in `nums`.",
      "return sum(abs(x) for x in nums)",
      "return abs(sum(nums))", _nums),
)  # fmt: skip

STRING_BASICS: tuple[F, ...] = (
    F("reverse_string", "string_basics", 1, "(s: str) -> str",
      "Return the string `s` reversed.",
      "return s[::-1]", "return s[:0:-1]", _text),
    F("count_vowels", "string_basics", 1, "(s: str) -> int",
      "Return how many characters of `s` are vowels: a, e, i, o or u, in lower or upper case.",
      "return sum(1 for c in s if c.lower() in 'aeiou')",
      "return sum(1 for c in s if c in 'aeiou')", _text, edges=lambda p: (("Ape",),)),
    F("count_spaces", "string_basics", 1, "(s: str) -> int",
      "Return how many space characters ' ' the string `s` contains.",
      "return s.count(' ')", "return len(s.split()) - 1 if s else 0", _text),
    F("repeat_string", "string_basics", 1, "(s: str, n: int) -> str",
      "Return the string `s` repeated `n` times (the empty string when `n` is 0).",
      "return s * n", "return s * (n - 1) if n > 1 else s",
      lambda r, p: (word(r), r.randint(0, 4))),
    F("count_words", "string_basics", 1, "(s: str) -> int",
      "Return the number of words in `s`; words are separated by one or more spaces.",
      "return len(s.split())", "return s.count(' ') + 1", _text),
    F("double_letters", "string_basics", 1, "(s: str) -> str",
      "Return a string where every character of `s` appears twice in a row, e.g. 'ab' becomes 'aabb'.",
      "return ''.join(c * 2 for c in s)", "return ''.join(c * 2 for c in s[:-1]) + s[-1:]",
      lambda r, p: (letters(r, "abcxyz", 1, 6),)),
    F("remove_spaces", "string_basics", 1, "(s: str) -> str",
      "Return `s` with every space character removed.",
      "return s.replace(' ', '')", "return s.strip()", _text),
    F("swap_ends", "string_basics", 1, "(s: str) -> str",
      "Return `s` with its first and last characters swapped; strings shorter than 2 are returned unchanged.",
      "if len(s) < 2:\n    return s\nreturn s[-1] + s[1:-1] + s[0]",
      "if not s:\n    return s\nreturn s[-1] + s[1:-1] + s[0]",
      lambda r, p: (letters(r, "abcdef", 0, 7),), edges=lambda p: (("q",),)),
    F("count_char", "string_basics", 1, "(s: str, ch: str) -> int",
      "Return how many times the character `ch` occurs in `s` (case-sensitive).",
      "return s.count(ch)", "return s.lower().count(ch.lower())",
      lambda r, p: (letters(r, "aAbBc", 0, 9), r.choice("abAB"))),
    F("first_word", "string_basics", 1, "(s: str) -> str",
      "Return the first word of `s` (words are separated by spaces), or '' if there is none.",
      "parts = s.split()\nreturn parts[0] if parts else ''",
      "return s.split(' ')[0]", lambda r, p: (spaced(r),), edges=lambda p: ((" hi there",),)),
    F("shout", "string_basics", 1, "(s: str) -> str",
      "Return `s` in upper case followed by an exclamation mark '!'.",
      "return s.upper() + '!'", "return s.capitalize() + '!'", _text),
    F("initials", "string_basics", 1, "(s: str) -> str",
      "Return the first letter of every word in `s`, upper-cased and joined, e.g. 'big red dog' -> 'BRD'.",
      "return ''.join(w[0].upper() for w in s.split())",
      "return ''.join(w[0] for w in s.split())", lambda r, p: (sentence(r, 1, 5),)),
)  # fmt: skip

NUMBER_BASICS: tuple[F, ...] = (
    F("max_of_two", "number_basics", 1, "(a: int, b: int) -> int",
      "Return the larger of the two numbers `a` and `b`.",
      "return a if a > b else b", "return a if a < b else b", _two),
    F("min_of_three", "number_basics", 1, "(a: int, b: int, c: int) -> int",
      "Return the smallest of the three numbers `a`, `b` and `c`.",
      "return min(a, b, c)", "return min(a, b)",
      lambda r, p: (r.randint(-9, 9), r.randint(-9, 9), r.randint(-9, 9))),
    F("abs_difference", "number_basics", 1, "(a: int, b: int) -> int",
      "Return the absolute difference between `a` and `b` (never negative).",
      "return abs(a - b)", "return a - b", _two),
    F("is_even", "number_basics", 1, "(n: int) -> bool",
      "Return True if `n` is even (this includes 0 and negative even numbers), otherwise False.",
      "return n % 2 == 0", "return n % 2 == 0 if n > 0 else False", _one, edges=lambda p: ((0,), (-4,))),
    F("last_digit", "number_basics", 1, "(n: int) -> int",
      "Return the last decimal digit of `n`, ignoring its sign (so -47 gives 7).",
      "return abs(n) % 10", "return n % 10", _one, edges=lambda p: ((-47,),)),
    F("digit_count", "number_basics", 1, "(n: int) -> int",
      "Return how many decimal digits `n` has, ignoring its sign (0 has one digit).",
      "return len(str(abs(n)))", "return len(str(n))", _one, edges=lambda p: ((-305,),)),
    F("is_multiple", "number_basics", 1, "(a: int, b: int) -> bool",
      "Return True if `a` is a multiple of `b` (`b` is never 0), otherwise False.",
      "return a % b == 0", "return b % a == 0 if a else True",
      lambda r, p: (r.randint(0, 40), r.randint(1, 9)), edges=lambda p: ((12, 4),)),
    F("sign_of", "number_basics", 1, "(n: int) -> int",
      "Return 1 if `n` is positive, -1 if it is negative and 0 if it is zero.",
      "return (n > 0) - (n < 0)", "return 1 if n >= 0 else -1", _one, edges=lambda p: ((0,),)),
    F("clamp", "number_basics", 1, "(x: int, lo: int, hi: int) -> int",
      "Return `x` limited to the range [`lo`, `hi`]: `lo` if it is smaller, `hi` if it is larger.",
      "return max(lo, min(x, hi))", "return max(lo, x)",
      lambda r, p: (r.randint(-20, 20), r.randint(-8, 0), r.randint(1, 8))),
    F("average_of_two", "number_basics", 1, "(a: int, b: int) -> float",
      "Return the average of `a` and `b` as a float.",
      "return (a + b) / 2", "return (a + b) // 2", _two, edges=lambda p: ((1, 2),)),
    F("celsius_to_fahrenheit", "number_basics", 1, "(c: float) -> float",
      "Convert the temperature `c` from degrees Celsius to degrees Fahrenheit (F = C * 9 / 5 + 32).",
      "return c * 9 / 5 + 32", "return c * 5 / 9 + 32",
      lambda r, p: (r.choice([r.randint(-40, 100), r.randint(-400, 1000) / 10]),)),
    F("total_seconds", "number_basics", 1, "(hours: int, minutes: int, seconds: int) -> int",
      "Return the total number of seconds in `hours` hours, `minutes` minutes and `seconds` seconds.",
      "return hours * 3600 + minutes * 60 + seconds", "return hours * 360 + minutes * 60 + seconds",
      lambda r, p: (r.randint(0, 5), r.randint(0, 59), r.randint(0, 59))),
)  # fmt: skip


def _threshold_nums(r: random.Random, p: Params) -> tuple[list[int]]:
    nums = int_list(r, -5, 20, 0, 8)
    if nums and r.random() < 0.5:
        nums[r.randrange(len(nums))] = next(iter(p.values()))
    return (nums,)


def _with_letter(r: random.Random, letter: str) -> list[str]:
    out = words(r, 0, 6) + [r.choice([letter, letter.upper()]) + word(r) for _ in range(r.randint(0, 3))]
    r.shuffle(out)
    return out


THRESHOLDS: tuple[F, ...] = (
    F("count_greater", "thresholds", 1, "(nums: list[int]) -> int",
      "Return how many numbers in `nums` are strictly greater than $t.",
      "return sum(1 for x in nums if x > $t)", "return sum(1 for x in nums if x >= $t)",
      _threshold_nums, grid=tuple({"t": t} for t in range(-5, 25)), edges=lambda p: (([p["t"], p["t"] + 1],),)),
    F("add_to_each", "thresholds", 1, "(nums: list[int]) -> list[int]",
      "Return a new list with $k added to every number of `nums`.",
      "return [x + $k for x in nums]", "return [x + $k for x in nums[:-1]] + nums[-1:]",
      _nums, grid=tuple({"k": k} for k in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15, 20, 25, 100, -1, -2, -3, -5, -10))),
    F("multiples_only", "thresholds", 1, "(nums: list[int]) -> list[int]",
      "Return the numbers of `nums` that are divisible by $k, in their original order (0 counts).",
      "return [x for x in nums if x % $k == 0]", "return [x for x in nums if x % $k == 0 and x != 0]",
      lambda r, p: (int_list(r, -12, 30, 0, 9),), grid=tuple({"k": k} for k in range(2, 13)),
      edges=lambda p: (([0, p["k"]],),)),
    F("longer_words", "thresholds", 1, "(words: list[str]) -> list[str]",
      "Return the words of `words` that have more than $n letters, in their original order.",
      "return [w for w in words if len(w) > $n]", "return [w for w in words if len(w) >= $n]",
      lambda r, p: (words(r, 0, 7),), grid=tuple({"n": n} for n in range(1, 8))),
    F("cap_values", "thresholds", 1, "(nums: list[int]) -> list[int]",
      "Return a new list where every number of `nums` greater than $c is replaced by $c.",
      "return [min(x, $c) for x in nums]", "return [x for x in nums if x <= $c]",
      _threshold_nums, grid=tuple({"c": c} for c in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 15, 18))),
    F("words_starting_with", "thresholds", 1, "(words: list[str]) -> int",
      "Return how many words in `words` start with the letter '$letter' in lower or upper case.",
      "return sum(1 for w in words if w[:1].lower() == $letter)",
      "return sum(1 for w in words if w.startswith($letter))",
      lambda r, p: (_with_letter(r, p["letter"]),), grid=tuple({"letter": c} for c in "abcdefgimnoprstw")),
)  # fmt: skip

CHAR_SETS: tuple[tuple[str, str], ...] = (
    ("digits", "0123456789"), ("the letters x, y and z", "xyz"), ("punctuation marks . , ! ?", ".,!?"),
    ("upper-case letters A to Z", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"), ("the letters a and b", "ab"),
    ("the characters # and @", "#@"), ("the letters q, r, s and t", "qrst"), ("hyphens and underscores", "-_"),
)  # fmt: skip


def _mixed(r: random.Random, p: Params) -> tuple[str]:
    return (letters(r, "abxyzAB09.!#@-_ qrst", 0, 12),)


STRING_PARAMS: tuple[F, ...] = (
    F("count_in_set", "string_basics", 1, "(s: str) -> int",
      "Return how many characters of `s` are $what.",
      "return sum(1 for c in s if c in $chars)", "return sum(1 for c in s[1:] if c in $chars)",
      _mixed, grid=tuple({"what": w, "chars": c} for w, c in CHAR_SETS), edges=lambda p: ((p["chars"][0] * 2,),)),
    F("has_suffix", "string_basics", 1, "(s: str) -> bool",
      "Return True if the string `s` ends with '$suffix', otherwise False.",
      "return s.endswith($suffix)", "return $suffix in s",
      lambda r, p: (r.choice([word(r), word(r) + p["suffix"], p["suffix"] + word(r)]),),
      grid=tuple({"suffix": x} for x in ("ing", "ed", "ly", ".py", "!", "er", "s", "tion", "ab", ".txt"))),
    F("replace_letter", "string_basics", 1, "(s: str) -> str",
      "Return `s` with every '$old' replaced by '$new'.",
      "return s.replace($old, $new)", "return s.replace($old, $new, 1)",
      lambda r, p: (letters(r, p["old"] * 3 + "xyz ", 0, 10),),
      grid=tuple({"old": a, "new": b} for a, b in ("ab", "ba", "a-", "e3", "o0", " _", "xy", "s$"))),
    F("pad_left", "string_basics", 1, "(s: str) -> str",
      "Return `s` padded on the left with '$fill' characters to a length of $width; longer strings are unchanged.",
      "return $fill * ($width - len(s)) + s", "return $fill * ($width - len(s) - 1) + s",
      lambda r, p: (letters(r, "abc123", 0, p["width"] + 2),),
      grid=tuple({"fill": f, "width": w} for f in ("0", "*", " ") for w in (3, 5, 8))),
)  # fmt: skip

SLICES: tuple[F, ...] = (
    F("first_n", "list_basics", 1, "(nums: list[int]) -> list[int]",
      "Return the first $n elements of `nums` (the whole list if it is shorter).",
      "return nums[:$n]", "return nums[:$n - 1]", _nums, grid=tuple({"n": n} for n in range(1, 7))),
    F("last_n", "list_basics", 1, "(nums: list[int]) -> list[int]",
      "Return the last $n elements of `nums` (the whole list if it is shorter).",
      "return nums[-$n:]", "return nums[-$n + 1:]", _nums, grid=tuple({"n": n} for n in range(1, 7))),
    F("drop_first_n", "list_basics", 1, "(nums: list[int]) -> list[int]",
      "Return `nums` without its first $n elements (an empty list if it is shorter).",
      "return nums[$n:]", "return nums[$n + 1:]", _nums, grid=tuple({"n": n} for n in range(1, 7))),
    F("divisible_by", "number_basics", 1, "(n: int) -> bool",
      "Return True if the integer `n` is divisible by $k (0 and negative numbers included), otherwise False.",
      "return n % $k == 0", "return n % $k == 0 and n > 0", _one, grid=tuple({"k": k} for k in range(2, 13)),
      edges=lambda p: ((0,), (-p["k"],))),
    F("round_to_multiple", "number_basics", 2, "(n: int) -> int",
      "Return the multiple of $k closest to the integer `n`; when two multiples are equally close, return the "
      "larger one.",
      "return (n + $k // 2) // $k * $k", "return n // $k * $k", _one, grid=tuple({"k": k} for k in range(2, 11))),
    F("repeat_chars", "string_basics", 1, "(s: str) -> str",
      "Return a string in which every character of `s` is repeated $k times in a row.",
      "return ''.join(c * $k for c in s)", "return s * $k", lambda r, p: (letters(r, "abcxyz", 0, 6),),
      grid=tuple({"k": k} for k in range(2, 6)), edges=lambda p: (("ab",),)),
    F("shorten", "string_basics", 1, "(s: str) -> str",
      "If `s` is longer than $n characters, return its first $n characters followed by '...'; otherwise "
      "return `s` unchanged.",
      "return s[:$n] + '...' if len(s) > $n else s", "return s[:$n] + '...' if len(s) >= $n else s",
      lambda r, p: (letters(r, "abcdef ", 0, p["n"] + 3),), grid=tuple({"n": n} for n in range(3, 9)),
      edges=lambda p: (("x" * p["n"],),)),
)  # fmt: skip

BASIC_TEMPLATES: tuple[F, ...] = (
    LIST_BASICS + STRING_BASICS + NUMBER_BASICS + THRESHOLDS + STRING_PARAMS + SLICES
)
