"""Stdin/stdout problems over lists of numbers (difficulty 1-3), several with float answers."""

from __future__ import annotations

import random

from execrl.tasks.suites._stdio_core import Params
from execrl.tasks.suites._stdio_core import StdioProblem as P


def _array(r: random.Random, p: Params, lo: int = -20, hi: int = 50, min_n: int = 1) -> str:
    values = [r.randint(lo, hi) for _ in range(r.randint(min_n, 8))]
    return f"{len(values)}\n{' '.join(map(str, values))}\n"


def _array_k(r: random.Random, p: Params) -> str:
    values = [r.randint(-5, 15) for _ in range(r.randint(1, 8))]
    k = r.choice(values + [r.randint(-5, 15)])
    return f"{len(values)} {k}\n{' '.join(map(str, values))}\n"


def _positive(r: random.Random, p: Params) -> str:
    return _array(r, p, 1, 40)


READ_ARRAY = (
    "import sys\ndata = sys.stdin.read().split()\nn = int(data[0])\na = [int(x) for x in data[1:1 + n]]\n"
)
READ_ARRAY_WRONG = (
    "import sys\ndata = sys.stdin.read().split()\nn = int(data[0])\na = [int(x) for x in data[1:n]]\n"
)

AGGREGATES = (
    ("the sum of the numbers", "sum(a)"),
    ("the sum of the squares of the numbers", "sum(x * x for x in a)"),
    ("the largest number minus the smallest number", "max(a) - min(a)"),
    ("how many of the numbers are positive", "sum(1 for x in a if x > 0)"),
    ("how many different values occur", "len(set(a))"),
    ("the sum of the numbers at odd positions (the 1st, 3rd, 5th, ...)", "sum(a[0::2])"),
    ("the largest absolute value among the numbers", "max(abs(x) for x in a)"),
    ("the product of the numbers modulo 1000000007 (as a value from 0 to 1000000006)",
     "__import__('functools').reduce(lambda s, x: s * x % 1000000007, a, 1)"),
    ("the alternating sum a1 - a2 + a3 - a4 + ...", "sum(x if i % 2 == 0 else -x for i, x in enumerate(a))"),
    ("the sum of the even numbers", "sum(x for x in a if x % 2 == 0)"),
)  # fmt: skip

COMPARISONS = (
    ("at least K", ">= k", "> k"), ("greater than K", "> k", ">= k"), ("at most K", "<= k", "< k"),
    ("less than K", "< k", "<= k"), ("equal to K", "== k", "!= k"), ("different from K", "!= k", "== k"),
)  # fmt: skip

FLOAT_STATS = (
    ("the average of the numbers", "print(f'{sum(a) / n:.6f}')", "print(f'{sum(a) // n:.6f}')"),
    ("the population standard deviation of the numbers",
     "m = sum(a) / n\nprint(f'{(sum((x - m) ** 2 for x in a) / n) ** 0.5:.6f}')",
     "m = sum(a) / n\nprint(f'{(sum((x - m) ** 2 for x in a) / max(n - 1, 1)) ** 0.5:.6f}')"),
    ("the median of the numbers (the average of the two middle values when N is even)",
     "b = sorted(a)\nprint(f'{(b[(n - 1) // 2] + b[n // 2]) / 2:.6f}')",
     "print(f'{(a[(n - 1) // 2] + a[n // 2]) / 2:.6f}')"),
    ("the average of the positive numbers (0 if there are none)",
     "pos = [x for x in a if x > 0]\nprint(f'{sum(pos) / len(pos) if pos else 0:.6f}')",
     "pos = [x for x in a if x > 0]\nprint(f'{sum(pos) / n:.6f}')", -20),
    ("the geometric mean of the numbers (the N-th root of their product)",
     "prod = 1.0\nfor x in a:\n    prod *= x\nprint(f'{prod ** (1 / n):.6f}')",
     "print(f'{sum(a) / n:.6f}')"),
)  # fmt: skip

QUERY_OPS = (("sum", "sum(a[l - 1:r])", "sum(a[l:r + 1])"), ("maximum", "max(a[l - 1:r])", "max(a[l:r])"),
             ("minimum", "min(a[l - 1:r])", "min(a[l - 1:r - 1] or a[l - 1:r])"))  # fmt: skip


def _queries(r: random.Random, p: Params) -> str:
    n = r.randint(1, 8)
    values = [r.randint(-9, 20) for _ in range(n)]
    lines = [f"{n} {(q := r.randint(1, 4))}", " ".join(map(str, values))]
    for _ in range(q):
        left = r.randint(1, n)
        lines.append(f"{left} {r.randint(left, n)}")
    return "\n".join(lines) + "\n"


ARRAY_PROBLEMS: tuple[P, ...] = (
    P("aggregate", "stdio_arrays", 1, "Read N integers and print $what.",
      "the first line holds N (1 <= N <= 100); the second line holds N integers.", "one integer.",
      READ_ARRAY + "print($expr_src)", READ_ARRAY_WRONG + "print($expr_src)", _array,
      grid=tuple({"what": w, "expr_src": e} for w, e in AGGREGATES)),
    P("count_compared", "stdio_arrays", 1, "Read N integers and a number K. Print how many of the integers are $what.",
      "the first line holds N and K; the second line holds N integers.", "one integer.",
      "n, k = map(int, input().split())\na = list(map(int, input().split()))\nprint(sum(1 for x in a if x $ok_src))",
      "n, k = map(int, input().split())\na = list(map(int, input().split()))\nprint(sum(1 for x in a if x $bad_src))",
      _array_k, grid=tuple({"what": w, "ok_src": o, "bad_src": b} for w, o, b in COMPARISONS)),
    P("float_statistic", "stdio_arrays", 2, "Read N integers and print $what.",
      "the first line holds N (1 <= N <= 100); the second line holds N integers.",
      "one number; answers within 1e-6 relative error are accepted.",
      READ_ARRAY + "$body_src", READ_ARRAY + "$wrong_src", lambda r, p: _array(r, p, p["lo"], 40), compare="float",
      grid=tuple({"what": w, "body_src": b, "wrong_src": x, "lo": lo} for w, b, x, *rest in FLOAT_STATS
                 for lo in (rest[0] if rest else 1,))),
    P("range_queries", "stdio_arrays", 2,
      "You are given N integers a1..aN and Q queries. For each query (l, r) print the $op of al..ar.",
      "the first line holds N and Q; the second line holds the N integers; each of the next Q lines holds l and "
      "r (1 <= l <= r <= N).", "Q lines, one integer each.",
      "n, q = map(int, input().split())\na = list(map(int, input().split()))\nfor _ in range(q):\n"
      "    l, r = map(int, input().split())\n    print($expr_src)",
      "n, q = map(int, input().split())\na = list(map(int, input().split()))\nfor _ in range(q):\n"
      "    l, r = map(int, input().split())\n    print($wrong_src)",
      _queries, grid=tuple({"op": o, "expr_src": e, "wrong_src": w} for o, e, w in QUERY_OPS)),
    P("sorted_output", "stdio_arrays", 1, "Read N integers and print them $how, separated by spaces.",
      "the first line holds N; the second line holds N integers.", "one line of integers.",
      READ_ARRAY + "print(*$expr_src)", READ_ARRAY + "print(*$wrong_src)", _array,
      grid=({"how": "in ascending order", "expr_src": "sorted(a)", "wrong_src": "sorted(a)[::-1]"},
            {"how": "in descending order", "expr_src": "sorted(a, reverse=True)", "wrong_src": "a[::-1]"},
            {"how": "in ascending order without repeating equal values", "expr_src": "sorted(set(a))",
             "wrong_src": "sorted(a)"},
            {"how": "ordered by absolute value, negative first on ties", "expr_src": "sorted(sorted(a), key=abs)",
             "wrong_src": "sorted(a, key=abs)"}),
      edges=("3\n5 -5 5\n",)),
    P("pair_count", "stdio_arrays", 2, "Read N integers and a number K. Print how many pairs of positions i < j "
      "satisfy $cond.", "the first line holds N and K; the second line holds N integers.", "one integer.",
      "n, k = map(int, input().split())\na = list(map(int, input().split()))\n"
      "print(sum(1 for i in range(n) for j in range(i + 1, n) if $expr_src))",
      "n, k = map(int, input().split())\na = list(map(int, input().split()))\n"
      "print(sum(1 for i in range(n) for j in range(n) if i != j and $expr_src))",
      _array_k, grid=({"cond": "a_i + a_j == K", "expr_src": "a[i] + a[j] == k"},
                      {"cond": "a_i + a_j <= K", "expr_src": "a[i] + a[j] <= k"},
                      {"cond": "|a_i - a_j| == K", "expr_src": "abs(a[i] - a[j]) == k"})),
    P("prefix_balance", "stdio_arrays", 2, "A bank account starts at 0 and receives N changes in order. Print $what.",
      "the first line holds N; the second line holds the N changes (integers).", "one integer.",
      READ_ARRAY + "bal = 0\nvals = []\nfor x in a:\n    bal += x\n    vals.append(bal)\nprint($expr_src)",
      READ_ARRAY + "bal = 0\nvals = [0]\nfor x in a[:-1]:\n    bal += x\n    vals.append(bal)\nprint($expr_src)",
      lambda r, p: _array(r, p, -30, 30),
      grid=({"what": "the lowest balance reached after any change", "expr_src": "min(vals)"},
            {"what": "how many changes leave the balance negative", "expr_src": "sum(1 for v in vals if v < 0)"},
            {"what": "the highest balance reached after any change", "expr_src": "max(vals)"})),
    P("max_subarray", "stdio_arrays", 3, "Read N integers and print the largest sum of a non-empty contiguous block "
      "of them.", "the first line holds N; the second line holds N integers.", "one integer.",
      READ_ARRAY + "best = cur = a[0]\nfor x in a[1:]:\n    cur = max(x, cur + x)\n    best = max(best, cur)\nprint(best)",
      READ_ARRAY + "best = cur = 0\nfor x in a:\n    cur = max(0, cur + x)\n    best = max(best, cur)\nprint(best)",
      _array, edges=("3\n-4 -2 -7\n",)),
    P("stock_profit", "stdio_arrays", 3, "The price of a stock on N consecutive days is given. $rule Print the "
      "largest total profit (0 if no profit is possible).",
      "the first line holds N; the second line holds N positive prices.", "one integer.",
      READ_ARRAY + "$body_src", READ_ARRAY + "$wrong_src", _positive,
      grid=({"rule": "You may buy once and later sell once.",
             "body_src": "best = 0\nlow = a[0]\nfor x in a:\n    low = min(low, x)\n    best = max(best, x - low)\nprint(best)",
             "wrong_src": "print(max(0, max(a) - min(a)))"},
            {"rule": "You may buy and sell as often as you like, holding at most one share at a time.",
             "body_src": "print(sum(max(0, a[i + 1] - a[i]) for i in range(n - 1)))",
             "wrong_src": "best = 0\nlow = a[0]\nfor x in a:\n    low = min(low, x)\n    best = max(best, x - low)\nprint(best)"})),
    P("longest_increasing_run", "stdio_arrays", 2, "Read N integers and print the length of the longest block of "
      "consecutive elements that is $order.", "the first line holds N; the second line holds N integers.",
      "one integer.",
      READ_ARRAY + "best = cur = 1\nfor i in range(1, n):\n    cur = cur + 1 if a[i - 1] $cmp_src a[i] else 1\n"
      "    best = max(best, cur)\nprint(best)",
      READ_ARRAY + "best = cur = 1\nfor i in range(1, n):\n    if a[i - 1] $cmp_src a[i]:\n        cur += 1\n"
      "        best = max(best, cur)\nprint(best + (1 if n > 1 and best == 1 else 0))",
      lambda r, p: _array(r, p, 0, 6),
      grid=({"order": "strictly increasing", "cmp_src": "<"}, {"order": "non-increasing", "cmp_src": ">="}),
      edges=("2\n5 1\n",)),
    P("inversions", "stdio_arrays", 3, "Read N integers and print how many pairs of positions i < j have a_i > a_j.",
      "the first line holds N (N <= 1000); the second line holds N integers.", "one integer.",
      READ_ARRAY + "print(sum(1 for i in range(n) for j in range(i + 1, n) if a[i] > a[j]))",
      READ_ARRAY + "print(sum(1 for i in range(n - 1) if a[i] > a[i + 1]))", _array),
)  # fmt: skip
