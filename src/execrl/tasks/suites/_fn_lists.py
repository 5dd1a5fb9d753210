"""List templates: transforms, statistics, sorting with keys and two-pointer problems (difficulty 2-3)."""

from __future__ import annotations

import random

from execrl.tasks.suites._fn_core import FunctionTemplate as F
from execrl.tasks.suites._fn_core import Params
from execrl.tasks.suites._gen import int_list, letters, sorted_ints, words


def _nums(r: random.Random, p: Params) -> tuple[list[int]]:
    return (int_list(r),)


def _nonempty(r: random.Random, p: Params) -> tuple[list[int]]:
    return (int_list(r, -9, 9, 1, 8),)


def _small(r: random.Random, p: Params) -> tuple[list[int]]:
    return (int_list(r, 0, 6, 0, 9),)


def _positive(r: random.Random, p: Params) -> tuple[list[int]]:
    return (int_list(r, 1, 9, 0, 9),)


RUNNING = (("sum", "acc + x"), ("product", "acc * x"), ("minimum", "min(acc, x)"))
PAIRS = (("differences", "b - a", "nums[i+1] - nums[i]"), ("sums", "a + b", "nums[i] + nums[i+1]"),
         ("products", "a * b", "nums[i] * nums[i+1]"))  # fmt: skip

LIST_TRANSFORMS: tuple[F, ...] = (
    F("rotate_left", "list_transforms", 2, "(nums: list[int]) -> list[int]",
      "Return a new list with the elements of `nums` rotated left by $k positions (the first element moves "
      "to the end each step; rotating by the list length gives the same list).",
      "if not nums:\n    return []\nk = $k % len(nums)\nreturn nums[k:] + nums[:k]",
      "if not nums:\n    return []\nk = $k % len(nums)\nreturn nums[len(nums) - k:] + nums[:len(nums) - k]",
      _nums, grid=tuple({"k": k} for k in range(1, 11))),
    F("rotate_right", "list_transforms", 2, "(nums: list[int]) -> list[int]",
      "Return a new list with the elements of `nums` rotated right by $k positions (the last element moves "
      "to the front each step; rotating by the list length gives the same list).",
      "if not nums:\n    return []\nk = $k % len(nums)\nreturn nums[len(nums) - k:] + nums[:len(nums) - k]",
      "if not nums:\n    return []\nk = $k % len(nums)\nreturn nums[k:] + nums[:k]",
      _nums, grid=tuple({"k": k} for k in range(1, 11))),
    F("chunk_list", "list_transforms", 2, "(nums: list[int]) -> list[list[int]]",
      "Split `nums` into consecutive chunks of $k elements and return the list of chunks; the last chunk "
      "may be shorter.",
      "return [nums[i:i + $k] for i in range(0, len(nums), $k)]",
      "return [nums[i:i + $k] for i in range(0, len(nums) - $k + 1, $k)]",
      _nums, grid=tuple({"k": k} for k in range(2, 8))),
    F("every_kth", "list_transforms", 2, "(nums: list[int]) -> list[int]",
      "Return every $k-th element of `nums` starting at index $o (indices $o, $o + $k, $o + 2*$k, ...).",
      "return nums[$o::$k]", "return [nums[i] for i in range($o, len(nums) - 1, $k)]",
      lambda r, p: (int_list(r, -9, 9, 0, 12),),
      grid=tuple({"k": k, "o": o} for k in range(2, 6) for o in range(k))),
    F("adjacent_pairs", "list_transforms", 2, "(nums: list[int]) -> list[int]",
      "Return the list of $what of neighbouring elements: element i of the result is $formula.",
      "return [$expr_src for a, b in zip(nums, nums[1:])]",
      "return [$expr_src for a, b in zip(nums[1:], nums[2:])]", _nums,
      grid=tuple({"what": w, "expr_src": e, "formula": f} for w, e, f in PAIRS), entry="adjacent_$what"),
    F("running_total", "list_transforms", 2, "(nums: list[int]) -> list[int]",
      "Return the running $what of `nums`: element i of the result is the $what of nums[0] .. nums[i].",
      "out = []\nacc = None\nfor x in nums:\n    acc = x if acc is None else $combine_src\n    out.append(acc)\nreturn out",
      "out = []\nacc = None\nfor x in nums:\n    out.append(x if acc is None else acc)\n"
      "    acc = x if acc is None else $combine_src\nreturn out",
      _nums, grid=tuple({"what": w, "combine_src": c} for w, c in RUNNING), entry="running_$what"),
    F("interleave", "list_transforms", 2, "(a: list[int], b: list[int]) -> list[int]",
      "Merge the lists `a` and `b` by alternating their elements, starting with `$first`; when one list "
      "runs out, append the rest of the other.",
      "x, y = ($first_src, $second_src)\nout = []\nfor i in range(max(len(x), len(y))):\n"
      "    if i < len(x):\n        out.append(x[i])\n    if i < len(y):\n        out.append(y[i])\nreturn out",
      "x, y = ($first_src, $second_src)\nout = []\nfor p, q in zip(x, y):\n    out += [p, q]\nreturn out",
      lambda r, p: (int_list(r, 0, 9, 0, 5), int_list(r, 10, 19, 0, 5)),
      grid=({"first": "a", "first_src": "a", "second_src": "b"}, {"first": "b", "first_src": "b", "second_src": "a"}),
      entry="interleave_from_$first"),
    F("dedupe_keep_order", "list_transforms", 2, "(nums: list[int]) -> list[int]",
      "Return `nums` without repeated values, keeping the first occurrence of each value in its original order.",
      "seen = set()\nout = []\nfor x in nums:\n    if x not in seen:\n        seen.add(x)\n        out.append(x)\nreturn out",
      "return sorted(set(nums))", _small),
    F("move_to_end", "list_transforms", 2, "(nums: list[int]) -> list[int]",
      "Return a new list with every occurrence of $v moved to the end; the other numbers keep their order.",
      "return [x for x in nums if x != $v] + [x for x in nums if x == $v]",
      "return [x for x in nums if x != $v] + ([$v] if $v in nums else [])",
      lambda r, p: (int_list(r, 0, 9, 0, 9) + [p["v"]] * r.randint(0, 2),),
      grid=tuple({"v": v} for v in range(10)), edges=lambda p: (([p["v"], 1, p["v"]],),)),
)  # fmt: skip

LIST_STATISTICS: tuple[F, ...] = (
    F("mean_above", "list_statistics", 2, "(nums: list[int]) -> float",
      "Return the average of the numbers in `nums` that are strictly greater than $t, or 0.0 if there are none.",
      "chosen = [x for x in nums if x > $t]\nreturn sum(chosen) / len(chosen) if chosen else 0.0",
      "chosen = [x for x in nums if x >= $t]\nreturn sum(chosen) / len(chosen) if chosen else 0.0",
      lambda r, p: (int_list(r, -5, 15, 0, 8) + [p["t"]],), grid=tuple({"t": t} for t in range(-3, 13))),
    F("kth_largest_distinct", "list_statistics", 2, "(nums: list[int]) -> int | None",
      "Return the $k-th largest distinct value in `nums` (equal values count once), or None if there are "
      "fewer than $k distinct values.",
      "values = sorted(set(nums), reverse=True)\nreturn values[$k - 1] if len(values) >= $k else None",
      "values = sorted(nums, reverse=True)\nreturn values[$k - 1] if len(values) >= $k else None",
      _small, grid=tuple({"k": k} for k in (2, 3, 4))),
    F("most_common", "list_statistics", 2, "(nums: list[int]) -> int",
      "Return the value that occurs most often in the non-empty list `nums`; on a tie return the $tie of "
      "the tied values.",
      "counts = {}\nfor x in nums:\n    counts[x] = counts.get(x, 0) + 1\nbest = max(counts.values())\n"
      "return $tie_src(x for x, c in counts.items() if c == best)",
      "return max(nums, key=nums.count)", lambda r, p: (int_list(r, 0, 6, 1, 9),),
      grid=({"tie": "smallest", "tie_src": "min"}, {"tie": "largest", "tie_src": "max"}),
      edges=lambda p: (([5, 1, 5, 1],), ([1, 5, 1, 5],))),
    F("variance", "list_statistics", 2, "(nums: list[int]) -> float",
      "Return the population variance of the non-empty list `nums`: the mean of the squared differences "
      "from the mean.",
      "m = sum(nums) / len(nums)\nreturn sum((x - m) ** 2 for x in nums) / len(nums)",
      "m = sum(nums) / len(nums)\nreturn sum((x - m) ** 2 for x in nums) / (len(nums) - 1)", _nonempty),
    F("std_dev", "list_statistics", 2, "(nums: list[int]) -> float",
      "Return the population standard deviation of the non-empty list `nums` (the square root of the mean "
      "squared difference from the mean). Do not import anything.",
      "m = sum(nums) / len(nums)\nreturn (sum((x - m) ** 2 for x in nums) / len(nums)) ** 0.5",
      "m = sum(nums) / len(nums)\nreturn sum(abs(x - m) for x in nums) / len(nums)", _nonempty),
    F("count_in_range", "list_statistics", 2, "(nums: list[int]) -> int",
      "Return how many numbers in `nums` lie between $lo and $hi, both ends included.",
      "return sum(1 for x in nums if $lo <= x <= $hi)", "return sum(1 for x in nums if $lo <= x < $hi)",
      lambda r, p: (int_list(r, -5, 22, 0, 8) + [p["hi"]] * r.randint(0, 1),),
      grid=tuple({"lo": a, "hi": b} for a, b in ((0, 5), (1, 10), (-3, 3), (2, 4), (5, 9), (10, 20),
                                                  (-5, 0), (3, 3), (0, 1), (7, 15), (4, 12), (-2, 8)))),
    F("top_k_sum", "list_statistics", 2, "(nums: list[int]) -> int",
      "Return the sum of the $k largest numbers in `nums` (all of them if there are fewer than $k).",
      "return sum(sorted(nums, reverse=True)[:$k])", "return sum(sorted(nums, reverse=True)[:$k - 1])",
      _nums, grid=tuple({"k": k} for k in range(1, 7))),
    F("percent_above", "list_statistics", 2, "(nums: list[int]) -> float",
      "Return the percentage (from 0.0 to 100.0) of numbers in `nums` that are greater than $t; return 0.0 "
      "for an empty list.",
      "if not nums:\n    return 0.0\nreturn 100 * sum(1 for x in nums if x > $t) / len(nums)",
      "if not nums:\n    return 0.0\nreturn 100 * sum(1 for x in nums if x > $t) // len(nums)",
      lambda r, p: (int_list(r, -5, 15, 0, 7),), grid=tuple({"t": t} for t in range(10))),
)  # fmt: skip

ORDERS = ({"order": "ascending", "rev_src": "False"}, {"order": "descending", "rev_src": "True"})

SORTING: tuple[F, ...] = (
    F("sort_by_length", "sorting_keys", 2, "(words: list[str]) -> list[str]",
      "Return the words sorted by length in $order order; words of equal length are in alphabetical order.",
      "return sorted(sorted(words), key=len, reverse=$rev_src)",
      "return sorted(words, key=len, reverse=$rev_src)", lambda r, p: (words(r, 0, 7),), grid=ORDERS),
    F("sort_by_abs", "sorting_keys", 2, "(nums: list[int]) -> list[int]",
      "Return the numbers sorted by absolute value in $order order; when two numbers have the same absolute "
      "value, the negative one comes first.",
      "return sorted(sorted(nums), key=abs, reverse=$rev_src)",
      "return sorted(nums, key=abs, reverse=$rev_src)", _nums, grid=ORDERS,
      edges=lambda p: (([3, -3, 1],),)),
    F("sort_by_last_digit", "sorting_keys", 2, "(nums: list[int]) -> list[int]",
      "Return the numbers sorted by their last decimal digit (ignoring the sign); numbers with the same last "
      "digit are sorted by value.",
      "return sorted(nums, key=lambda x: (abs(x) % 10, x))", "return sorted(nums, key=lambda x: (x % 10, x))",
      lambda r, p: (int_list(r, -99, 99, 0, 7),)),
    F("sort_by_distance", "sorting_keys", 3, "(nums: list[int]) -> list[int]",
      "Return the numbers sorted by their distance to $t (closest first); on equal distance the smaller "
      "number comes first.",
      "return sorted(nums, key=lambda x: (abs(x - $t), x))", "return sorted(nums, key=lambda x: abs(x) - $t)",
      lambda r, p: (int_list(r, -10, 15, 0, 8),), grid=tuple({"t": t} for t in range(-5, 11))),
    F("sort_pairs_by_second", "sorting_keys", 2, "(pairs: list[list[int]]) -> list[list[int]]",
      "Return the [a, b] pairs sorted by their second number in $order order, then by the first number in "
      "the same order.",
      "return sorted(pairs, key=lambda p: (p[1], p[0]), reverse=$rev_src)",
      "return sorted(pairs, reverse=$rev_src)",
      lambda r, p: ([[r.randint(0, 5), r.randint(0, 5)] for _ in range(r.randint(0, 6))],), grid=ORDERS),
    F("sort_by_letter_count", "sorting_keys", 3, "(words: list[str]) -> list[str]",
      "Return the words sorted by how many times the letter '$c' occurs in them (fewest first); words with "
      "the same count are in alphabetical order.",
      "return sorted(words, key=lambda w: (w.count($c), w))", "return sorted(words, key=lambda w: w.count($c))",
      lambda r, p: (words(r, 0, 7),), grid=tuple({"c": c} for c in "aeiort")),
    F("evens_then_odds", "sorting_keys", 2, "(nums: list[int]) -> list[int]",
      "Return the numbers with all $first numbers first, then the others; each group sorted in ascending order.",
      "return sorted(nums, key=lambda x: (x % 2 != $rem, x))", "return sorted(nums, key=lambda x: x % 2 != $rem)",
      _nums, grid=({"first": "even", "rem": 0}, {"first": "odd", "rem": 1}), entry="${first}_first"),
)  # fmt: skip

TWO_POINTERS: tuple[F, ...] = (
    F("has_pair_sum", "two_pointers", 2, "(nums: list[int]) -> bool",
      "Return True if two elements at different positions of `nums` add up to $t, otherwise False.",
      "seen = set()\nfor x in nums:\n    if $t - x in seen:\n        return True\n    seen.add(x)\nreturn False",
      "return any(x + y == $t for x in nums for y in nums)",
      lambda r, p: (int_list(r, -5, 20, 0, 6),), grid=tuple({"t": t} for t in range(0, 32, 2)),
      edges=lambda p: (([p["t"] // 2, 1000],),)),
    F("count_pairs_with_difference", "two_pointers", 3, "(nums: list[int]) -> int",
      "Return how many index pairs i < j have |nums[i] - nums[j]| equal to $k.",
      "n = len(nums)\nreturn sum(1 for i in range(n) for j in range(i + 1, n) if abs(nums[i] - nums[j]) == $k)",
      "n = len(nums)\nreturn sum(1 for i in range(n) for j in range(i + 1, n) if nums[j] - nums[i] == $k)",
      lambda r, p: (int_list(r, 0, 12, 0, 8),), grid=tuple({"k": k} for k in range(1, 11)),
      edges=lambda p: (([p["k"], 0],),)),
    F("merge_sorted", "two_pointers", 2, "(a: list[int], b: list[int]) -> list[int]",
      "Both lists are sorted in $order order. Merge them into one list sorted in $order order without "
      "calling sort.",
      "out = []\ni = j = 0\nwhile i < len(a) and j < len(b):\n"
      "    if (a[i] <= b[j]) != $rev_src:\n        out.append(a[i])\n        i += 1\n"
      "    else:\n        out.append(b[j])\n        j += 1\nreturn out + a[i:] + b[j:]",
      "out = []\ni = j = 0\nwhile i < len(a) and j < len(b):\n"
      "    if (a[i] <= b[j]) != $rev_src:\n        out.append(a[i])\n        i += 1\n"
      "    else:\n        out.append(b[j])\n        j += 1\nreturn out",
      lambda r, p: (sorted(int_list(r), reverse=p["order"] == "descending"),
                    sorted(int_list(r), reverse=p["order"] == "descending")),
      grid=ORDERS, entry="merge_sorted_$order"),
    F("longest_unique_substring", "two_pointers", 3, "(s: str) -> int",
      "Return the length of the longest substring of `s` in which no character repeats.",
      "best = start = 0\nlast = {}\nfor i, c in enumerate(s):\n    if last.get(c, -1) >= start:\n"
      "        start = last[c] + 1\n    last[c] = i\n    best = max(best, i - start + 1)\nreturn best",
      "return len(set(s))", lambda r, p: (letters(r, "abcd", 0, 12),)),
    F("shortest_subarray_at_least", "two_pointers", 3, "(nums: list[int]) -> int",
      "`nums` holds positive numbers. Return the length of the shortest contiguous run of elements whose "
      "sum is at least $t, or 0 if there is none.",
      "best = 0\ntotal = start = 0\nfor end, x in enumerate(nums):\n    total += x\n    while total >= $t:\n"
      "        if best == 0 or end - start + 1 < best:\n            best = end - start + 1\n"
      "        total -= nums[start]\n        start += 1\nreturn best",
      "total = 0\nfor end, x in enumerate(nums):\n    total += x\n    if total >= $t:\n        return end + 1\nreturn 0",
      _positive, grid=tuple({"t": t} for t in range(5, 21))),
    F("sorted_squares", "two_pointers", 2, "(nums: list[int]) -> list[int]",
      "`nums` is sorted in ascending order. Return the squares of its numbers, sorted in ascending order.",
      "return sorted(x * x for x in nums)", "return [x * x for x in nums]", lambda r, p: (sorted_ints(r),),
      edges=lambda p: (([-3, 1],),)),
    F("is_letter_palindrome", "two_pointers", 2, "(s: str) -> bool",
      "Return True if `s` reads the same forwards and backwards when only its letters are kept and upper "
      "and lower case are treated as equal.",
      "kept = [c.lower() for c in s if c.isalpha()]\nreturn kept == kept[::-1]",
      "kept = [c for c in s if c.isalpha()]\nreturn kept == kept[::-1]",
      lambda r, p: (r.choice([letters(r, "aAb ,", 0, 8), "Ab, a"]),), edges=lambda p: (("Aba",),)),
)  # fmt: skip

LIST_TEMPLATES: tuple[F, ...] = LIST_TRANSFORMS + LIST_STATISTICS + SORTING + TWO_POINTERS
