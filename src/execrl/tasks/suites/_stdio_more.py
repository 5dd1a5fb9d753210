"""Stdin/stdout problems over grids, clocks, queues and classic dynamic programming (difficulty 2-4)."""

from __future__ import annotations

import random

from execrl.tasks.suites._stdio_core import Params
from execrl.tasks.suites._stdio_core import StdioProblem as P


def _matrix(r: random.Random, p: Params) -> str:
    rows, cols = r.randint(1, 4), r.randint(1, 4)
    body = "\n".join(" ".join(str(r.randint(-5, 15)) for _ in range(cols)) for _ in range(rows))
    return f"{rows} {cols}\n{body}\n"


def _times(r: random.Random, p: Params) -> str:
    t = r.randint(1, 4)
    return (
        f"{t}\n"
        + "\n".join(f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}" for _ in range(t))
        + "\n"
    )


def _chart(r: random.Random, p: Params) -> str:
    rows, cols = r.randint(1, 5), r.randint(1, 6)
    return (
        f"{rows} {cols}\n"
        + "\n".join("".join(r.choice("..#") for _ in range(cols)) for _ in range(rows))
        + "\n"
    )


READ_MATRIX = "r, c = map(int, input().split())\nm = [list(map(int, input().split())) for _ in range(r)]\n"
MATRIX_OPS = (
    ("the sum of each row, one per line", "for row in m:\n    print(sum(row))", "for row in m:\n    print(sum(row[1:]))"),
    ("the sum of each column, separated by spaces", "print(*[sum(col) for col in zip(*m)])", "print(*[sum(row) for row in m])"),
    ("the transposed matrix (C lines of R numbers)", "for col in zip(*m):\n    print(*col)", "for row in m:\n    print(*row)"),
    ("the largest value of each row, one per line", "for row in m:\n    print(max(row))", "for row in m:\n    print(row[-1])"),
    ("the sum of the elements on the border of the matrix",
     "print(sum(m[i][j] for i in range(r) for j in range(c) if i in (0, r - 1) or j in (0, c - 1)))",
     "print(sum(m[0]) + sum(m[-1]) + sum(row[0] + row[-1] for row in m[1:-1]))"),
    ("the elements in clockwise spiral order from the top-left, separated by spaces",
     "out = []\nwhile m:\n    out += m[0]\n    m = [list(x) for x in zip(*m[1:])][::-1]\nprint(*out)",
     "out = []\nwhile m:\n    out += m[0]\n    m = [list(x) for x in zip(*m[1:])]\nprint(*out)"),
)  # fmt: skip

CLOCK_OPS = (
    ("for each time the number of seconds since midnight", "for h, m, s in ts:\n    print(h * 3600 + m * 60 + s)",
     "for h, m, s in ts:\n    print(h * 360 + m * 60 + s)"),
    ("the total of all times read as durations, formatted H:MM:SS (hours may exceed 23)",
     "t = sum(h * 3600 + m * 60 + s for h, m, s in ts)\nprint(f'{t // 3600}:{t // 60 % 60:02d}:{t % 60:02d}')",
     "t = sum(h * 3600 + m * 60 + s for h, m, s in ts)\nprint(f'{t // 3600 % 24}:{t // 60 % 60:02d}:{t % 60:02d}')"),
    ("the number of seconds from the earliest to the latest time",
     "v = [h * 3600 + m * 60 + s for h, m, s in ts]\nprint(max(v) - min(v))",
     "v = [h * 3600 + m * 60 + s for h, m, s in ts]\nprint(v[-1] - v[0])"),
)  # fmt: skip

GRAPH_SEARCH = (
    "r, c = map(int, input().split())\ng = [input().strip() for _ in range(r)]\nseen = set()\ncount = 0\n"
    "for i in range(r):\n    for j in range(c):\n        if g[i][j] == '#' and (i, j) not in seen:\n"
    "            count += 1\n            stack = [(i, j)]\n            seen.add((i, j))\n            while stack:\n"
    "                y, x = stack.pop()\n                for dy, dx in $dirs_src:\n"
    "                    ny, nx = y + dy, x + dx\n                    if 0 <= ny < r and 0 <= nx < c and g[ny][nx] == '#' and (ny, nx) not in seen:\n"
    "                        seen.add((ny, nx))\n                        stack.append((ny, nx))\nprint(count)"
)
FOUR = "((1, 0), (-1, 0), (0, 1), (0, -1))"
EIGHT = "((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (1, -1), (-1, 1), (-1, -1))"
BRACKET_SETS = (
    ("()[]", "round and square brackets"),
    ("()[]{}", "(), [] and {} brackets"),
    ("<>{}", "<> and {} brackets"),
)


def _brackets(r: random.Random, p: Params) -> str:
    t = r.randint(1, 4)
    chars = p["chars"]
    lines = []
    for _ in range(t):
        k = r.randrange(0, len(chars), 2)
        lines.append(
            r.choice(["", chars[k] + chars[k + 1]]) + "".join(r.choice(chars) for _ in range(r.randint(1, 6)))
        )
    return f"{t}\n" + "\n".join(lines) + "\n"


MORE_PROBLEMS: tuple[P, ...] = (
    P("matrix_report", "stdio_grids", 2, "Read an R x C matrix of integers and print $what.",
      "the first line holds R and C; each of the next R lines holds C integers.", "as described.",
      READ_MATRIX + "$body_src", READ_MATRIX + "$wrong_src", _matrix,
      grid=tuple({"what": w, "body_src": b, "wrong_src": x} for w, b, x in MATRIX_OPS)),
    P("clock_times", "stdio_simulation", 2, "Read T clock times HH:MM:SS and print $what.",
      "the first line holds T; each of the next T lines holds one time.", "as described.",
      "ts = [tuple(map(int, input().split(':'))) for _ in range(int(input()))]\n$body_src",
      "ts = [tuple(map(int, input().split(':'))) for _ in range(int(input()))]\n$wrong_src", _times,
      grid=tuple({"what": w, "body_src": b, "wrong_src": x} for w, b, x in CLOCK_OPS)),
    P("count_shapes", "stdio_grids", 3, "A map of R rows and C columns shows land '#' and water '.'. Count the "
      "islands: groups of land cells connected $how.",
      "the first line holds R and C; each of the next R lines holds C characters.", "one integer.",
      GRAPH_SEARCH, GRAPH_SEARCH.replace("$dirs_src", "$wrong_src"), _chart,
      grid=({"how": "horizontally or vertically (not diagonally)", "dirs_src": FOUR, "wrong_src": EIGHT},
            {"how": "horizontally, vertically or diagonally", "dirs_src": EIGHT, "wrong_src": FOUR}),
      edges=("2 2\n#.\n.#\n",)),
    P("bracket_check", "stdio_strings", 2, "For each of T lines made of $what, print YES if the brackets are "
      "balanced and correctly nested, otherwise NO.", "the first line holds T; then T lines of brackets.", "T lines.",
      "pairs = {$pairs_src}\nfor _ in range(int(input())):\n    stack = []\n    ok = True\n    for ch in input().strip():\n"
      "        if ch in pairs:\n            stack.append(pairs[ch])\n        elif not stack or stack.pop() != ch:\n"
      "            ok = False\n            break\n    print('YES' if ok and not stack else 'NO')",
      "pairs = {$pairs_src}\nfor _ in range(int(input())):\n    depth = 0\n    ok = True\n    for ch in input().strip():\n"
      "        depth += 1 if ch in pairs else -1\n        ok = ok and depth >= 0\n    print('YES' if ok and depth == 0 else 'NO')",
      _brackets, grid=tuple({"what": w, "chars": c, "pairs_src": ", ".join(f"'{c[i]}': '{c[i + 1]}'" for i in range(0, len(c), 2))}
                            for c, w in BRACKET_SETS)),
    P("to_base", "stdio_numbers", 2, "For each of T non-negative integers print it written in base $b$note.",
      "the first line holds T; each of the next T lines holds one integer.", "T lines.",
      "for _ in range(int(input())):\n    n = int(input())\n    digits = ''\n    while True:\n"
      "        digits = '0123456789ABCDEF'[n % $b] + digits\n        n //= $b\n        if n == 0:\n            break\n    print(digits)",
      "for _ in range(int(input())):\n    n = int(input())\n    digits = ''\n    while n > 0:\n"
      "        digits += '0123456789ABCDEF'[n % $b]\n        n //= $b\n    print(digits or '0')",
      lambda r, p: f"{(t := r.randint(1, 4))}\n" + "\n".join(str(r.randint(0, 5000)) for _ in range(t)) + "\n",
      grid=tuple({"b": b, "note": " (digits above 9 are the capital letters A-F)" if b > 10 else ""} for b in (2, 3, 4, 5, 6, 7, 8, 9, 12, 16))),
    P("fewest_coins", "stdio_dp", 3, "Coins of the N given values are available in unlimited supply. Print the "
      "smallest number of coins that pay exactly S, or -1 if that is impossible.",
      "the first line holds N and S; the second line holds the N coin values.", "one integer.",
      "n, s = map(int, input().split())\ncoins = list(map(int, input().split()))\nbest = [0] + [-1] * s\n"
      "for a in range(1, s + 1):\n    opts = [best[a - c] + 1 for c in coins if c <= a and best[a - c] >= 0]\n"
      "    best[a] = min(opts) if opts else -1\nprint(best[s])",
      "n, s = map(int, input().split())\ncoins = list(map(int, input().split()))\ncount = 0\n"
      "for c in sorted(coins, reverse=True):\n    count += s // c\n    s %= c\nprint(count if s == 0 else -1)",
      lambda r, p: (lambda cs: f"{len(cs)} {r.randint(0, 40)}\n{' '.join(map(str, cs))}\n")(r.choice([[1, 3, 4], [2, 5], [4, 5, 9], [1, 6, 10], [3, 7]]))),
    P("knapsack", "stdio_dp", 4, "There are N items, each with a weight and a value, and a bag that holds total "
      "weight at most W. Each item can be taken once. Print the largest total value that fits.",
      "the first line holds N and W; each of the next N lines holds a weight and a value.", "one integer.",
      "n, w = map(int, input().split())\nbest = [0] * (w + 1)\nfor _ in range(n):\n    wt, val = map(int, input().split())\n"
      "    for cap in range(w, wt - 1, -1):\n        best[cap] = max(best[cap], best[cap - wt] + val)\nprint(best[w])",
      "n, w = map(int, input().split())\nbest = [0] * (w + 1)\nfor _ in range(n):\n    wt, val = map(int, input().split())\n"
      "    for cap in range(wt, w + 1):\n        best[cap] = max(best[cap], best[cap - wt] + val)\nprint(best[w])",
      lambda r, p: (lambda n: f"{n} {r.randint(1, 20)}\n" + "\n".join(f"{r.randint(1, 8)} {r.randint(1, 30)}" for _ in range(n)) + "\n")(r.randint(1, 5))),
    P("stairs_ways", "stdio_dp", 3, "A staircase has N steps and each move climbs one of the K given step sizes. "
      "Print the number of different move sequences that reach exactly step N, modulo 1000000007.",
      "the first line holds N and K; the second line holds the K step sizes.", "one integer.",
      "n, k = map(int, input().split())\nsteps = list(map(int, input().split()))\nways = [1] + [0] * n\n"
      "for i in range(1, n + 1):\n    ways[i] = sum(ways[i - s] for s in steps if s <= i) % 1000000007\nprint(ways[n])",
      "n, k = map(int, input().split())\nsteps = list(map(int, input().split()))\nways = [1] + [0] * n\n"
      "for i in range(1, n + 1):\n    ways[i] = sum(ways[i - s] for s in steps if s < i) % 1000000007\nprint(ways[n])",
      lambda r, p: (lambda st: f"{r.randint(0, 60)} {len(st)}\n{' '.join(map(str, st))}\n")(sorted(r.sample(range(1, 6), r.randint(1, 3))))),
    P("longest_subsequence", "stdio_dp", 3, "Read N integers and print the length of the longest strictly increasing "
      "subsequence (not necessarily contiguous).", "the first line holds N; the second line holds N integers.",
      "one integer.",
      "n = int(input())\na = list(map(int, input().split()))\nbest = []\nfor i, x in enumerate(a):\n"
      "    best.append(1 + max([best[j] for j in range(i) if a[j] < x], default=0))\nprint(max(best))",
      "n = int(input())\na = list(map(int, input().split()))\nprint(len(set(a)))",
      lambda r, p: (lambda a: f"{len(a)}\n{' '.join(map(str, a))}\n")([r.randint(0, 9) for _ in range(r.randint(1, 9))])),
    P("queue_wait", "stdio_simulation", 3, "Customers arrive at a single counter at the given (non-decreasing) times "
      "and each needs the given service time; they are served in arrival order. Print $what.",
      "the first line holds N; each of the next N lines holds an arrival time and a service time.", "$out",
      "free = 0\nwaits = []\nfor _ in range(int(input())):\n    a, s = map(int, input().split())\n    start = max(free, a)\n"
      "    waits.append(start - a)\n    free = start + s\nprint($expr_src)",
      "free = 0\nwaits = []\nfor _ in range(int(input())):\n    a, s = map(int, input().split())\n    start = free\n"
      "    waits.append(start - a)\n    free = start + s\nprint($expr_src)",
      lambda r, p: (lambda ts: f"{len(ts)}\n" + "\n".join(f"{t} {r.randint(1, 6)}" for t in ts) + "\n")(sorted(r.randint(0, 20) for _ in range(r.randint(1, 6)))),
      grid=({"what": "the longest time any customer waits before being served", "out": "one integer.", "expr_src": "max(waits)"},
            {"what": "the total waiting time of all customers", "out": "one integer.", "expr_src": "sum(waits)"}),
      edges=("2\n5 1\n9 2\n",)),
    P("dedupe_lines", "stdio_strings", 1, "Read N words, one per line, and print each distinct word once, in the "
      "order of its first appearance.", "the first line holds N; then N lines with one word each.", "one word per line.",
      "seen = []\nfor _ in range(int(input())):\n    w = input().strip()\n    if w not in seen:\n        seen.append(w)\nprint('\\n'.join(seen))",
      "words = [input().strip() for _ in range(int(input()))]\nprint('\\n'.join(sorted(set(words))))",
      lambda r, p: (lambda ws: f"{len(ws)}\n" + "\n".join(ws) + "\n")([r.choice(["pear", "fig", "apple", "kiwi"]) for _ in range(r.randint(1, 7))])),
)  # fmt: skip
