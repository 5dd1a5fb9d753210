"""Recursion and dynamic-programming templates (difficulty 3-4): stairs with step sets, coins, subsequences."""

from __future__ import annotations

import random
from typing import Any

from execrl.tasks.suites._fn_core import FunctionTemplate as F
from execrl.tasks.suites._gen import int_list, letters

STEP_SETS = ((1, 2), (1, 3), (2, 3), (1, 2, 3), (1, 4), (1, 2, 5), (2, 5), (1, 3, 5), (3, 4), (1, 5),
             (2, 3, 4), (1, 2, 4), (1, 6), (2, 7))  # fmt: skip
COIN_SETS = ((1, 3, 4), (2, 5), (1, 5, 6, 9), (3, 7), (1, 7, 10), (4, 5, 9), (2, 3, 7), (5, 6), (1, 4, 6),
             (3, 5, 11), (1, 6, 10), (2, 9), (4, 7), (1, 8, 11), (3, 8))  # fmt: skip


def _grid(r: random.Random) -> list[list[int]]:
    cols = r.randint(1, 4)
    return [[int(r.random() < 0.25) for _ in range(cols)] for _ in range(r.randint(1, 4))]


def _nested(r: random.Random, depth: int) -> list[Any]:
    """A random list nested at most ``depth`` levels below the top."""
    return [
        _nested(r, depth - 1) if depth and r.random() < 0.5 else r.randint(0, 9)
        for _ in range(r.randint(0, 3))
    ]


def _show(values: tuple[int, ...]) -> str:
    return ", ".join(map(str, values))


DYNAMIC: tuple[F, ...] = (
    F("climb_ways", "dynamic_programming", 3, "(n: int) -> int",
      "You climb a staircase of `n` steps; each move climbs one of these numbers of steps: $shown. Return the "
      "number of different move sequences that reach exactly step `n` (1 for n = 0).",
      "ways = [1] + [0] * n\nfor i in range(1, n + 1):\n    ways[i] = sum(ways[i - s] for s in $steps if s <= i)\nreturn ways[n]",
      "ways = [1] + [0] * n\nfor i in range(1, n + 1):\n    ways[i] = sum(ways[i - s] for s in $steps if s < i)\nreturn ways[n]",
      lambda r, p: (r.randint(0, 25),), grid=tuple({"steps": s, "shown": _show(s)} for s in STEP_SETS),
      edges=lambda p: ((max(p["steps"]),),)),
    F("min_coins", "dynamic_programming", 3, "(amount: int) -> int",
      "Coins have the values $shown (unlimited supply). Return the smallest number of coins that add up to "
      "exactly `amount`, or -1 if it cannot be done (0 for amount 0).",
      "best = [0] + [-1] * amount\nfor a in range(1, amount + 1):\n"
      "    options = [best[a - c] + 1 for c in $coins if c <= a and best[a - c] >= 0]\n"
      "    best[a] = min(options) if options else -1\nreturn best[amount]",
      "count = 0\nfor c in sorted($coins, reverse=True):\n    count += amount // c\n    amount %= c\n"
      "return count if amount == 0 else -1",
      lambda r, p: (r.randint(0, 40),), grid=tuple({"coins": c, "shown": _show(c)} for c in COIN_SETS)),
    F("coin_combinations", "dynamic_programming", 3, "(amount: int) -> int",
      "Coins have the values $shown (unlimited supply). Return in how many ways `amount` can be paid, where "
      "the order of the coins does not matter (1 way for amount 0).",
      "ways = [1] + [0] * amount\nfor c in $coins:\n    for a in range(c, amount + 1):\n        ways[a] += ways[a - c]\nreturn ways[amount]",
      "ways = [1] + [0] * amount\nfor a in range(1, amount + 1):\n    for c in $coins:\n        if c <= a:\n"
      "            ways[a] += ways[a - c]\nreturn ways[amount]",
      lambda r, p: (r.randint(0, 40),), grid=tuple({"coins": c, "shown": _show(c)} for c in STEP_SETS)),
    F("longest_increasing_subsequence", "dynamic_programming", 4, "(nums: list[int]) -> int",
      "Return the length of the longest subsequence of `nums` (not necessarily contiguous) whose elements are "
      "$order.",
      "best = []\nfor i, x in enumerate(nums):\n    best.append(1 + max([best[j] for j in range(i) if nums[j] $cmp_src x], default=0))\n"
      "return max(best, default=0)",
      "best = cur = 0\nfor i, x in enumerate(nums):\n    cur = cur + 1 if i > 0 and nums[i - 1] $cmp_src x else 1\n"
      "    best = max(best, cur)\nreturn best",
      lambda r, p: (int_list(r, 0, 9, 0, 9),),
      grid=({"order": "strictly increasing", "cmp_src": "<", "s": "increasing"},
            {"order": "non-decreasing (each at least the previous one)", "cmp_src": "<=", "s": "non_decreasing"}),
      entry="longest_${s}_subsequence"),
    F("max_subarray_sum", "dynamic_programming", 3, "(nums: list[int]) -> int",
      "Return the largest sum of a non-empty contiguous run of elements of the non-empty list `nums`.",
      "best = cur = nums[0]\nfor x in nums[1:]:\n    cur = max(x, cur + x)\n    best = max(best, cur)\nreturn best",
      "best = cur = 0\nfor x in nums:\n    cur = max(0, cur + x)\n    best = max(best, cur)\nreturn best",
      lambda r, p: (int_list(r, -9, 9, 1, 8),), edges=lambda p: (([-3, -1, -2],),)),
    F("max_spaced_sum", "dynamic_programming", 4, "(nums: list[int]) -> int",
      "`nums` holds non-negative numbers. Choose elements so that any two chosen elements have at least $g "
      "other elements between them, and return the largest possible sum of the chosen elements.",
      "best = []\nfor i, x in enumerate(nums):\n    take = x + (best[i - $g - 1] if i - $g - 1 >= 0 else 0)\n"
      "    best.append(max(take, best[i - 1] if i else 0))\nreturn best[-1] if best else 0",
      "best = []\nfor i, x in enumerate(nums):\n    take = x + (best[i - $g] if i - $g >= 0 else 0)\n"
      "    best.append(max(take, best[i - 1] if i else 0))\nreturn best[-1] if best else 0",
      lambda r, p: (int_list(r, 0, 9, 0, 9),), grid=tuple({"g": g} for g in (1, 2, 3)),
      edges=lambda p: (([5] * (p["g"] + 2),),)),
    F("edit_distance", "dynamic_programming", 4, "(a: str, b: str) -> int",
      "Return the smallest total cost of turning `a` into `b`, where inserting or deleting a character "
      "costs 1 and replacing one character by another costs $sub.",
      "prev = list(range(len(b) + 1))\nfor i, x in enumerate(a, start=1):\n    cur = [i]\n"
      "    for j, y in enumerate(b, start=1):\n        cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (0 if x == y else $sub)))\n"
      "    prev = cur\nreturn prev[-1]",
      "prev = list(range(len(b) + 1))\nfor i, x in enumerate(a, start=1):\n    cur = [i]\n"
      "    for j, y in enumerate(b, start=1):\n        cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (0 if x == y else 2)))\n"
      "    prev = cur\nreturn prev[-1]",
      lambda r, p: (letters(r, "abc", 0, 6), letters(r, "abc", 0, 6)), grid=({"sub": 1},), edges=lambda p: (("a", "b"),)),
    F("grid_paths", "dynamic_programming", 3, "(grid: list[list[int]]) -> int",
      "`grid` is a rectangle of 0 (free) and 1 (blocked) cells. Count the paths from the top-left to the "
      "bottom-right cell that move only right or down through free cells (0 if either end is blocked).",
      "rows, cols = len(grid), len(grid[0])\nways = [[0] * cols for _ in range(rows)]\nfor i in range(rows):\n"
      "    for j in range(cols):\n        if grid[i][j] == 1:\n            continue\n        if i == 0 and j == 0:\n"
      "            ways[i][j] = 1\n        else:\n            ways[i][j] = (ways[i - 1][j] if i else 0) + (ways[i][j - 1] if j else 0)\n"
      "return ways[-1][-1]",
      "rows, cols = len(grid), len(grid[0])\nways = [[1] * cols for _ in range(rows)]\nfor i in range(1, rows):\n"
      "    for j in range(1, cols):\n        ways[i][j] = 0 if grid[i][j] == 1 else ways[i - 1][j] + ways[i][j - 1]\n"
      "return ways[-1][-1]",
      lambda r, p: (_grid(r),),
      edges=lambda p: (([[0, 1], [0, 0]],),)),
    F("lagged_sequence", "dynamic_programming", 3, "(n: int) -> int",
      "A sequence starts with $k ones: a(0) = ... = a($km1) = 1, and continues with a(i) = a(i - 1) + "
      "a(i - $k). Return a(n).",
      "a = [1] * $k\nwhile len(a) <= n:\n    a.append(a[-1] + a[-$k])\nreturn a[n]",
      "a = [1] * $k\nwhile len(a) <= n:\n    a.append(a[-1] + a[-$k + 1])\nreturn a[n]",
      lambda r, p: (r.randint(0, 30),), grid=tuple({"k": k, "km1": k - 1} for k in range(2, 9)),
      edges=lambda p: ((p["k"] + 3,),)),
)  # fmt: skip

BRACKETS = (("()[]", "round and square brackets"), ("()[]{}", "(), [] and {} brackets"),
            ("<>()", "angle and round brackets"), ("{}[]", "curly and square brackets"))  # fmt: skip

RECURSION: tuple[F, ...] = (
    F("flatten_nested", "recursion", 3, "(items: list) -> list[int]",
      "`items` is a list whose elements are integers or lists of the same kind, nested to any depth. Return "
      "all integers in one flat list, in order.",
      "out = []\nfor x in items:\n    out.extend(flatten_nested(x) if isinstance(x, list) else [x])\nreturn out",
      "out = []\nfor x in items:\n    out.extend(x if isinstance(x, list) else [x])\nreturn out",
      lambda r, p: ([1, [2, [3, [4]]], r.randint(0, 9)][: r.randint(1, 3)],),
      edges=lambda p: (([[1, [2]], 3],),)),
    F("nesting_depth", "recursion", 3, "(items: list) -> int",
      "`items` is a list whose elements are integers or lists of the same kind. Return its nesting depth: "
      "1 for a list of integers (or an empty list), 2 if it contains a list of integers, and so on.",
      "return 1 + max((nesting_depth(x) for x in items if isinstance(x, list)), default=0)",
      "return 1 + sum(1 for x in items if isinstance(x, list))",
      lambda r, p: (_nested(r, r.randint(0, 4)),), edges=lambda p: (([[1], [2]],),)),
    F("depth_weighted_sum", "recursion", 3, "(items: list) -> int",
      "`items` is a list whose elements are integers or lists of the same kind. Return the sum of all integers, "
      "each multiplied by its depth (integers directly in `items` have depth $base).",
      "def walk(xs, depth):\n    return sum(walk(x, depth + 1) if isinstance(x, list) else x * depth for x in xs)\n\n"
      "return walk(items, $base)",
      "def walk(xs, depth):\n    return sum(walk(x, depth) if isinstance(x, list) else x * depth for x in xs)\n\n"
      "return walk(items, $base)",
      lambda r, p: ([r.randint(1, 5), [r.randint(1, 5), [r.randint(1, 5)]]],), grid=({"base": 1}, {"base": 0})),
    F("subsets_of_size", "recursion", 3, "(items: list[int]) -> list[list[int]]",
      "`items` holds distinct integers in ascending order. Return every subset of exactly $k elements as an "
      "ascending list, with the subsets in lexicographic order.",
      "if $k == 0:\n    return [[]]\nout = []\ndef go(start, chosen):\n    if len(chosen) == $k:\n"
      "        out.append(chosen)\n        return\n    for i in range(start, len(items)):\n        go(i + 1, chosen + [items[i]])\n"
      "go(0, [])\nreturn out",
      "out = []\ndef go(start, chosen):\n    if len(chosen) == $k:\n        out.append(chosen)\n        return\n"
      "    for i in range(start, len(items)):\n        go(i, chosen + [items[i]])\ngo(0, [])\nreturn out",
      lambda r, p: (sorted(r.sample(range(10), r.randint(0, 5))),), grid=tuple({"k": k} for k in (2, 3, 4))),
    F("count_binary_strings", "recursion", 3, "(n: int) -> int",
      "Return how many strings of length `n` made of the characters '0' and '1' contain no two '$c' "
      "characters next to each other (1 for n = 0).",
      "a, b = 1, 1\nfor _ in range(n):\n    a, b = a + b, a\nreturn a",
      "a, b = 1, 1\nfor _ in range(n - 1):\n    a, b = a + b, a\nreturn a",
      lambda r, p: (r.randint(0, 25),), grid=({"c": "1"}, {"c": "0"})),
    F("balanced_brackets", "recursion", 3, "(s: str) -> bool",
      "`s` consists only of $what. Return True if every opening bracket is closed by the matching closing "
      "bracket in the right order.",
      "pairs = {$pairs_src}\nstack = []\nfor c in s:\n    if c in pairs:\n        stack.append(pairs[c])\n"
      "    elif not stack or stack.pop() != c:\n        return False\nreturn not stack",
      "pairs = {$pairs_src}\ndepth = 0\nfor c in s:\n    depth += 1 if c in pairs else -1\n    if depth < 0:\n"
      "        return False\nreturn depth == 0",
      lambda r, p: (letters(r, p["chars"], 0, 8),),
      grid=tuple({"what": w, "chars": c, "pairs_src": ", ".join(f"'{c[i]}': '{c[i + 1]}'" for i in range(0, len(c), 2))}
                 for c, w in BRACKETS), edges=lambda p: ((p["chars"][0] + p["chars"][-1],),)),
)  # fmt: skip

RECURSIVE_TEMPLATES: tuple[F, ...] = DYNAMIC + RECURSION
