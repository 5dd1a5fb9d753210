"""Stdin/stdout problems over text, simulations, number queries and geometry (difficulty 1-3)."""

from __future__ import annotations

import random

from execrl.tasks.suites._gen import NAMES, sentence, word
from execrl.tasks.suites._stdio_core import Params
from execrl.tasks.suites._stdio_core import StdioProblem as P


def _line(r: random.Random, p: Params) -> str:
    return sentence(r, 1, 7) + "\n"


def _cases(r: random.Random, p: Params, lo: int = 1, hi: int = 60, per_line: int = 2) -> str:
    t = r.randint(1, 5)
    rows = [" ".join(str(r.randint(lo, hi)) for _ in range(per_line)) for _ in range(t)]
    return f"{t}\n" + "\n".join(rows) + "\n"


def _moves(r: random.Random, p: Params) -> str:
    return "".join(r.choice("UDLR") for _ in range(r.randint(1, 14))) + "\n"


STRING_OPS = (
    ("the words in reverse order, separated by single spaces", "print(' '.join(s.split()[::-1]))",
     "print(' '.join(w[::-1] for w in s.split()))"),
    ("how many vowels (a, e, i, o, u, in either case) the line contains",
     "print(sum(1 for c in s if c.lower() in 'aeiou'))", "print(sum(1 for c in s if c in 'aeiou'))"),
    ("the longest word (the first one if several are equally long)", "print(max(s.split(), key=len))",
     "print(sorted(s.split(), key=len)[-1])"),
    ("YES if the line reads the same backwards when spaces are removed and case is ignored, otherwise NO",
     "t = s.replace(' ', '').lower()\nprint('YES' if t == t[::-1] else 'NO')",
     "print('YES' if s == s[::-1] else 'NO')"),
    ("every word with its first letter in upper case and the rest in lower case",
     "print(' '.join(w.capitalize() for w in s.split()))", "print(' '.join(w[0].upper() + w[1:] for w in s.split()))"),
    ("the number of distinct words, ignoring case", "print(len({w.lower() for w in s.split()}))",
     "print(len(set(s.split())))"),
)  # fmt: skip

TEXT_PROBLEMS: tuple[P, ...] = (
    P("line_transform", "stdio_strings", 1, "Read one line of words separated by spaces and print $what.",
      "one line of words separated by single spaces.", "one line.",
      "s = input().strip()\n$body_src", "s = input().strip()\n$wrong_src",
      lambda r, p: r.choice([_line(r, p), "Level noon Level\n", "Anna saw Anna\n", "bee Bee sun\n"]),
      grid=tuple({"what": w, "body_src": b, "wrong_src": x} for w, b, x in STRING_OPS),
      edges=("Top spot\n", "ab abc abd\n", "mIxEd CaSe\n")),
    P("word_frequency", "stdio_strings", 2, "Read a line of words and print each distinct word with how often it "
      "occurs, one 'word count' pair per line, $order.", "one line of words separated by spaces.",
      "one line per distinct word.",
      "words = input().split()\ncounts = {}\nfor w in words:\n    counts[w] = counts.get(w, 0) + 1\n"
      "for w in $order_src:\n    print(w, counts[w])",
      "words = input().split()\ncounts = {}\nfor w in words:\n    counts[w] = counts.get(w, 0) + 1\n"
      "for w in counts:\n    print(w, counts[w])",
      lambda r, p: " ".join(r.choice(["b", "a", "c", "b", "dd"]) for _ in range(r.randint(1, 9))) + "\n",
      grid=({"order": "in alphabetical order", "order_src": "sorted(counts)"},
            {"order": "most frequent first, ties in alphabetical order",
             "order_src": "sorted(counts, key=lambda w: (-counts[w], w))"})),
    P("caesar_lines", "stdio_strings", 2, "Read a shift K and a line of lower-case text. Print the line with every "
      "letter moved $dir by K places in the alphabet (wrapping around); other characters stay.",
      "the first line holds K (0 <= K <= 25); the second line holds the text.", "one line.",
      "k = int(input())\ns = input()\nprint(''.join(chr((ord(c) - 97 $sign_src k) % 26 + 97) if c.islower() else c for c in s))",
      "k = int(input())\ns = input()\nprint(''.join(chr(ord(c) $sign_src k) if c.islower() else c for c in s))",
      lambda r, p: f"{r.randint(0, 25)}\n{sentence(r, 1, 5).lower()}\n",
      grid=({"dir": "forward", "sign_src": "+"}, {"dir": "backward", "sign_src": "-"})),
    P("robot_walk", "stdio_simulation", 2, "A robot starts at (0, 0) and follows a string of moves: U (y + 1), "
      "D (y - 1), L (x - 1), R (x + 1). Print $what.", "one line with the moves.", "$out.",
      "x = y = 0\nseen = {(0, 0)}\nback = 0\nfor c in input().strip():\n"
      "    dx, dy = {'U': (0, 1), 'D': (0, -1), 'L': (-1, 0), 'R': (1, 0)}[c]\n    x, y = x + dx, y + dy\n"
      "    seen.add((x, y))\n    back += (x, y) == (0, 0)\nprint($expr_src)",
      "x = y = 0\nseen = set()\nback = 0\nfor c in input().strip():\n"
      "    dx, dy = {'U': (0, 1), 'D': (0, 1), 'L': (-1, 0), 'R': (1, 0)}[c]\n    x, y = x + dx, y + dy\n"
      "    seen.add((x, y))\n    back += (x, y) == (0, 0)\nprint($expr_src)",
      _moves, grid=({"what": "its final position", "out": "two integers x and y", "expr_src": "x, y"},
                    {"what": "its final Manhattan distance from the start", "out": "one integer", "expr_src": "abs(x) + abs(y)"},
                    {"what": "how many different cells it visited, the start included", "out": "one integer",
                     "expr_src": "len(seen)"}),
      edges=("LR\n", "UDUD\n")),
    P("bank_account", "stdio_simulation", 2, "An account starts with balance 0. Process N operations 'deposit X' or "
      "'withdraw X'. $rule Print the final balance.",
      "the first line holds N; each of the next N lines holds one operation.", "one integer.",
      "bal = 0\nfor _ in range(int(input())):\n    op, x = input().split()\n    x = int(x)\n    if op == 'deposit':\n"
      "        bal += x\n    $withdraw_src\nprint(bal)",
      "bal = 0\nfor _ in range(int(input())):\n    op, x = input().split()\n    x = int(x)\n    if op == 'deposit':\n"
      "        bal += x\n    else:\n        bal -= x\nprint(bal)",
      lambda r, p: (lambda ops: f"{len(ops)}\n" + "\n".join(ops) + "\n")(
          [f"{r.choice(['deposit', 'withdraw'])} {r.randint(1, 50)}" for _ in range(r.randint(1, 7))]),
      grid=({"rule": "A withdrawal larger than the balance is refused (nothing happens).",
             "withdraw_src": "elif x <= bal:\n        bal -= x"},
            {"rule": "A withdrawal larger than the balance is allowed but costs an extra fee of 5.",
             "withdraw_src": "else:\n        bal -= x + (5 if x > bal else 0)"}),
      edges=("1\nwithdraw 10\n",)),
    P("passing_students", "stdio_simulation", 2, "Read N students with their scores. Print the names of the students "
      "with a score of at least $p, highest score first; equal scores in alphabetical order of name.",
      "the first line holds N; each of the next N lines holds a name and an integer score.",
      "one name per line (nothing if nobody passes).",
      "rows = [input().split() for _ in range(int(input()))]\n"
      "for name, score in sorted(rows, key=lambda t: (-int(t[1]), t[0])):\n    if int(score) >= $p:\n        print(name)",
      "rows = [input().split() for _ in range(int(input()))]\n"
      "for name, score in sorted(rows, key=lambda t: -int(t[1])):\n    if int(score) > $p:\n        print(name)",
      lambda r, p: (lambda rows: f"{len(rows)}\n" + "\n".join(rows) + "\n")(
          [f"{n} {r.choice([p['p'], r.randint(30, 100)])}" for n in r.sample(NAMES, r.randint(1, 6))]),
      grid=tuple({"p": p} for p in (50, 60, 70, 75, 80))),
    P("fizz_words", "stdio_simulation", 1, "Read N and print the numbers from 1 to N, one per line, but print "
      "'$w1' instead of multiples of $a, '$w2' instead of multiples of $b, and '$w1$w2' instead of multiples of both.",
      "one integer N.", "N lines.",
      "for i in range(1, int(input()) + 1):\n    s = ($w1 if i % $a == 0 else '') + ($w2 if i % $b == 0 else '')\n"
      "    print(s or i)",
      "for i in range(1, int(input()) + 1):\n    if i % $a == 0:\n        print($w1)\n    elif i % $b == 0:\n"
      "        print($w2)\n    else:\n        print(i)",
      lambda r, p: f"{r.randint(1, 40)}\n",
      grid=tuple({"a": a, "b": b, "w1": w1, "w2": w2} for a, b, w1, w2 in
                 ((3, 5, "Fizz", "Buzz"), (2, 7, "Ping", "Pong"), (4, 6, "Tik", "Tok"), (3, 4, "Foo", "Bar"),
                  (5, 7, "Zig", "Zag"), (2, 3, "Hip", "Hop"), (3, 7, "Fee", "Fum"), (6, 10, "Uno", "Dos"))),
      edges=("45\n",)),
    P("pair_gcd", "stdio_numbers", 2, "For each of T test cases read two positive integers and print $what. Do not "
      "use math.gcd.", "the first line holds T; each of the next T lines holds two integers.", "T lines.",
      "def gcd(a, b):\n    while b:\n        a, b = b, a % b\n    return a\n\nfor _ in range(int(input())):\n"
      "    a, b = map(int, input().split())\n    print($expr_src)",
      "def gcd(a, b):\n    while b:\n        a, b = b, a % b\n    return a\n\nfor _ in range(int(input())):\n"
      "    a, b = map(int, input().split())\n    print($wrong_src)",
      _cases, grid=({"what": "their greatest common divisor", "expr_src": "gcd(a, b)", "wrong_src": "min(a, b) if max(a, b) % min(a, b) == 0 else 1"},
                    {"what": "their least common multiple", "expr_src": "a * b // gcd(a, b)", "wrong_src": "a * b"},
                    {"what": "their greatest common divisor and least common multiple", "expr_src": "gcd(a, b), a * b // gcd(a, b)",
                     "wrong_src": "gcd(a, b), a * b"})),
    P("prime_ranges", "stdio_numbers", 2, "For each of T queries read a and b (a <= b) and print $what of the "
      "primes p with a <= p <= b.", "the first line holds T; each of the next T lines holds a and b.", "T lines.",
      "def prime(n):\n    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))\n\n"
      "def count(xs):\n    return sum(1 for _ in xs)\n\n"
      "for _ in range(int(input())):\n    a, b = map(int, input().split())\n    print($agg_src(p for p in range(a, b + 1) if prime(p)))",
      "def prime(n):\n    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))\n\n"
      "def count(xs):\n    return sum(1 for _ in xs)\n\n"
      "for _ in range(int(input())):\n    a, b = map(int, input().split())\n    print($agg_src(p for p in range(a, b) if prime(p)))",
      lambda r, p: (lambda t: f"{t}\n" + "\n".join(f"{a} {a + r.randint(0, 40)}" for a in (r.randint(0, 60) for _ in range(t))) + "\n")(r.randint(1, 4)),
      grid=({"what": "the count", "agg_src": "count"}, {"what": "the sum", "agg_src": "sum"}),
      edges=("1\n7 7\n",)),
    P("digit_facts", "stdio_numbers", 1, "For each of T non-negative integers print $what.",
      "the first line holds T; each of the next T lines holds one integer.", "T lines.",
      "for _ in range(int(input())):\n    s = input().strip()\n    print($expr_src)",
      "for _ in range(int(input())):\n    s = input().strip()\n    print($wrong_src)",
      lambda r, p: _cases(r, p, 0, 100000, 1),
      grid=({"what": "the sum of its digits", "expr_src": "sum(map(int, s))", "wrong_src": "sum(map(int, s[1:]))"},
            {"what": "the number with its digits reversed (without leading zeros)", "expr_src": "int(s[::-1])",
             "wrong_src": "s[::-1]"},
            {"what": "how many of its digits are even", "expr_src": "sum(1 for c in s if int(c) % 2 == 0)",
             "wrong_src": "sum(1 for c in s if int(c) % 2 == 0 and c != '0')"},
            {"what": "its binary representation", "expr_src": "bin(int(s))[2:]", "wrong_src": "bin(int(s))[3:] or '0'"}),
      edges=("2\n120\n0\n",)),
    P("leap_years", "stdio_numbers", 1, "For each of T years print $what (Gregorian calendar: a year is a leap year "
      "if it is divisible by 4, except years divisible by 100 but not by 400).",
      "the first line holds T; each of the next T lines holds a year.", "T lines.",
      "for _ in range(int(input())):\n    y = int(input())\n    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)\n    print($expr_src)",
      "for _ in range(int(input())):\n    y = int(input())\n    leap = y % 4 == 0\n    print($expr_src)",
      lambda r, p: _cases(r, p, 1800, 2400, 1),
      grid=({"what": "YES if it is a leap year, otherwise NO", "expr_src": "'YES' if leap else 'NO'"},
            {"what": "the number of days in it", "expr_src": "366 if leap else 365"}),
      edges=("2\n1900\n2000\n",)),
    P("triangle_kind", "stdio_numbers", 2, "For each of T triples of side lengths print $what.",
      "the first line holds T; each of the next T lines holds three positive integers.", "T lines.",
      "for _ in range(int(input())):\n    a, b, c = sorted(map(int, input().split()))\n    $body_src",
      "for _ in range(int(input())):\n    a, b, c = map(int, input().split())\n    $body_src",
      lambda r, p: r.choice([_cases(r, p, 1, 12, 3), "2\n4 3 5\n5 13 12\n"]),
      grid=({"what": "'invalid' if they cannot form a triangle, otherwise 'equilateral', 'isosceles' or 'scalene'",
             "body_src": "print('invalid' if a + b <= c else 'equilateral' if a == c else 'isosceles' if a == b or b == c else 'scalene')"},
            {"what": "YES if they form a right triangle, otherwise NO",
             "body_src": "print('YES' if a * a + b * b == c * c else 'NO')"}),
      edges=("1\n9 2 3\n", "1\n5 4 3\n")),
)  # fmt: skip


def _points(r: random.Random, p: Params) -> str:
    n = r.randint(3, 6)
    return f"{n}\n" + "\n".join(f"{r.randint(-9, 9)} {r.randint(-9, 9)}" for _ in range(n)) + "\n"


READ_POINTS = "n = int(input())\npts = [tuple(map(int, input().split())) for _ in range(n)]\n"
CONVERSIONS = (("kilometres", "miles", 0.621371), ("kilograms", "pounds", 2.20462), ("litres", "US gallons", 0.264172),
               ("metres", "feet", 3.28084), ("hectares", "acres", 2.47105), ("centimetres", "inches", 0.393701),
               ("grams", "ounces", 0.035274), ("nautical miles", "kilometres", 1.852))  # fmt: skip

FLOAT_PROBLEMS: tuple[P, ...] = (
    P("polygon_measure", "stdio_geometry", 2, "Read the N corners of a polygon in order and print $what.",
      "the first line holds N; each of the next N lines holds integer coordinates x and y.",
      "one number; answers within 1e-6 relative error are accepted.",
      READ_POINTS + "$body_src", READ_POINTS + "$wrong_src", _points, compare="float",
      grid=({"what": "its perimeter (the last corner connects back to the first)",
             "body_src": "print(sum(((pts[i][0] - pts[i - 1][0]) ** 2 + (pts[i][1] - pts[i - 1][1]) ** 2) ** 0.5 for i in range(n)))",
             "wrong_src": "print(sum(((pts[i][0] - pts[i - 1][0]) ** 2 + (pts[i][1] - pts[i - 1][1]) ** 2) ** 0.5 for i in range(1, n)))"},
            {"what": "its area (shoelace formula; always print a non-negative value)",
             "body_src": "print(abs(sum(pts[i - 1][0] * pts[i][1] - pts[i][0] * pts[i - 1][1] for i in range(n))) / 2)",
             "wrong_src": "print(sum(pts[i - 1][0] * pts[i][1] - pts[i][0] * pts[i - 1][1] for i in range(n)) / 2)"},
            {"what": "the largest distance of a corner from the origin",
             "body_src": "print(max((x * x + y * y) ** 0.5 for x, y in pts))",
             "wrong_src": "print(max(abs(x) + abs(y) for x, y in pts))"},
            {"what": "the largest distance between two corners",
             "body_src": "print(max(((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2) ** 0.5 for a in pts for b in pts))",
             "wrong_src": "print(max(((pts[i][0] - pts[i - 1][0]) ** 2 + (pts[i][1] - pts[i - 1][1]) ** 2) ** 0.5 for i in range(n)))"})),
    P("compound_interest", "stdio_geometry", 2, "A deposit P earns R percent interest per year for Y years, $how. "
      "Print the final amount.", "one line with P, R and Y (integers).",
      "one number; answers within 1e-6 relative error are accepted.",
      "p, r, y = map(int, input().split())\nprint($expr_src)", "p, r, y = map(int, input().split())\nprint($wrong_src)",
      lambda r, p: f"{r.randint(100, 5000)} {r.randint(1, 12)} {r.randint(1, 10)}\n", compare="float",
      grid=({"how": "compounded once a year", "expr_src": "p * (1 + r / 100) ** y", "wrong_src": "p * (1 + r / 100 * y)"},
            {"how": "compounded monthly (R / 12 percent each month)", "expr_src": "p * (1 + r / 1200) ** (12 * y)",
             "wrong_src": "p * (1 + r / 100) ** y"},
            {"how": "as simple interest (R percent of P each year, never compounded)", "expr_src": "p * (1 + r / 100 * y)",
             "wrong_src": "p * (1 + r / 100) ** y"})),
    P("unit_conversion", "stdio_geometry", 1, "Convert each of N amounts from $src to $dst (1 of them is $f $dst).",
      "the first line holds N; each of the next N lines holds one amount.",
      "N numbers, one per line; answers within 1e-6 relative error are accepted.",
      "for _ in range(int(input())):\n    print(float(input()) * $f)",
      "for _ in range(int(input())):\n    print(float(input()) / $f)",
      lambda r, p: _cases(r, p, 0, 500, 1), compare="float",
      grid=tuple({"src": a, "dst": b, "f": f} for a, b, f in CONVERSIONS)),
    P("average_speed", "stdio_geometry", 2, "A trip has N legs, each with a distance in km and a time in hours. "
      "Print the average speed of the whole trip in km per hour.",
      "the first line holds N; each of the next N lines holds a distance and a time (positive integers).",
      "one number; answers within 1e-6 relative error are accepted.",
      "legs = [tuple(map(int, input().split())) for _ in range(int(input()))]\n"
      "print(sum(d for d, t in legs) / sum(t for d, t in legs))",
      "legs = [tuple(map(int, input().split())) for _ in range(int(input()))]\n"
      "print(sum(d / t for d, t in legs) / len(legs))",
      lambda r, p: _cases(r, p, 1, 9, 2), compare="float"),
)  # fmt: skip

TEXT_AND_FLOAT_PROBLEMS: tuple[P, ...] = TEXT_PROBLEMS + FLOAT_PROBLEMS
_ = word  # re-exported helper kept for generators that pick single words
