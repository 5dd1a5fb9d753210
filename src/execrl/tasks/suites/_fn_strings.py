"""String templates: transforms, run-length encoding and parsing simple formats (difficulty 2-3)."""

from __future__ import annotations

import random

from execrl.tasks.suites._fn_core import FunctionTemplate as F
from execrl.tasks.suites._fn_core import Params
from execrl.tasks.suites._gen import letters, sentence, word


def _text(r: random.Random, p: Params) -> tuple[str]:
    return (letters(r, "abcdefxyz", 0, 10),)


def _runs(r: random.Random, p: Params) -> tuple[str]:
    return ("".join(r.choice("abc") * r.randint(1, 4) for _ in range(r.randint(0, 5))),)


STRING_TRANSFORMS: tuple[F, ...] = (
    F("rotate_string_left", "string_transforms", 2, "(s: str) -> str",
      "Return `s` rotated left by $k characters: the first $k characters move to the end (rotating by the "
      "length of the string gives the same string).",
      "if not s:\n    return s\nk = $k % len(s)\nreturn s[k:] + s[:k]",
      "if not s:\n    return s\nk = $k % len(s)\nreturn s[-k:] + s[:-k]", _text, grid=tuple({"k": k} for k in range(1, 9))),
    F("rotate_string_right", "string_transforms", 2, "(s: str) -> str",
      "Return `s` rotated right by $k characters: the last $k characters move to the front (rotating by the "
      "length of the string gives the same string).",
      "if not s:\n    return s\nk = $k % len(s)\nreturn s[len(s) - k:] + s[:len(s) - k]",
      "if not s:\n    return s\nk = $k % len(s)\nreturn s[k:] + s[:k]", _text, grid=tuple({"k": k} for k in range(1, 9))),
    F("caesar_shift", "string_transforms", 2, "(s: str) -> str",
      "Shift every lower-case letter of `s` forward by $k places in the alphabet, wrapping from 'z' back to "
      "'a'; leave every other character unchanged.",
      "out = []\nfor c in s:\n    if 'a' <= c <= 'z':\n        c = chr((ord(c) - ord('a') + $k) % 26 + ord('a'))\n"
      "    out.append(c)\nreturn ''.join(out)",
      "return ''.join(chr(ord(c) + $k) if 'a' <= c <= 'z' else c for c in s)",
      lambda r, p: (letters(r, "abcxyz Q!", 0, 10),), grid=tuple({"k": k} for k in range(1, 26)),
      edges=lambda p: (("z",),)),
    F("alternate_case", "string_transforms", 2, "(s: str) -> str",
      "Return `s` with characters at even indices in $even case and characters at odd indices in $odd case.",
      "return ''.join(c.$even_src() if i % 2 == 0 else c.$odd_src() for i, c in enumerate(s))",
      "return ''.join(c.$even_src() if s.index(c) % 2 == 0 else c.$odd_src() for c in s)",
      lambda r, p: (letters(r, "abAB", 0, 9),),
      grid=({"even": "upper", "odd": "lower", "even_src": "upper", "odd_src": "lower"},
            {"even": "lower", "odd": "upper", "even_src": "lower", "odd_src": "upper"}),
      entry="alternate_case_${even}_first"),
    F("drop_every_kth_char", "string_transforms", 2, "(s: str) -> str",
      "Return `s` without its $k-th, $k2-th, ... characters (counting from 1): every $k-th character is removed.",
      "return ''.join(c for i, c in enumerate(s, start=1) if i % $k != 0)",
      "return ''.join(c for i, c in enumerate(s) if i % $k != 0)",
      lambda r, p: (letters(r, "abcdefgh", 0, 12),), grid=tuple({"k": k, "k2": 2 * k} for k in range(2, 8))),
    F("group_characters", "string_transforms", 2, "(s: str) -> str",
      "Split `s` into groups of $k characters from the left (the last group may be shorter) and join the "
      "groups with '$sep'.",
      "return $sep.join(s[i:i + $k] for i in range(0, len(s), $k))",
      "return $sep.join(s[i:i + $k] for i in range(0, len(s) - 1, $k))",
      lambda r, p: (letters(r, "abcdefgh123", 0, 13),),
      grid=tuple({"k": k, "sep": sep} for k in range(2, 6) for sep in ("-", " ", "."))),
    F("strip_set", "string_transforms", 2, "(s: str) -> str",
      "Return `s` with every one of the characters in '$chars' removed, wherever it appears.",
      "return ''.join(c for c in s if c not in $chars)", "return s.strip($chars)",
      lambda r, p: (letters(r, p["chars"] + "abcd ", 0, 12),),
      grid=tuple({"chars": c} for c in ("0123456789", ".,!?", "xyz", "-_", "aeiou", "#@$"))),
    F("capitalize_long_words", "string_transforms", 2, "(s: str) -> str",
      "Words of `s` are separated by single spaces. Capitalise (first letter upper case, rest lower case) "
      "every word longer than $n letters, write the other words in lower case, and join them with spaces.",
      "return ' '.join(w.capitalize() if len(w) > $n else w.lower() for w in s.split(' '))",
      "return ' '.join(w.capitalize() if len(w) >= $n else w.lower() for w in s.split(' '))",
      lambda r, p: (sentence(r, 1, 6),), grid=tuple({"n": n} for n in range(1, 7))),
)  # fmt: skip

RLE_FORMATS = (
    {"fmt": "character first, then the count", "piece_src": "ch + str(n)", "style": "a3b1", "short": "char_count"},
    {"fmt": "count first, then the character", "piece_src": "str(n) + ch", "style": "3a1b", "short": "count_char"},
    {"fmt": "character first, count only when it is more than 1", "piece_src": "ch + (str(n) if n > 1 else '')",
     "style": "a3b", "short": "char_count_short"},
)  # fmt: skip

RUN_LENGTH: tuple[F, ...] = (
    F("rle_encode", "run_length", 3, "(s: str) -> str",
      "Run-length encode `s`: each run of equal characters becomes one piece written $fmt (e.g. 'aaab' -> "
      "'$style').",
      "out = []\ni = 0\nwhile i < len(s):\n    j = i\n    while j < len(s) and s[j] == s[i]:\n        j += 1\n"
      "    ch, n = s[i], j - i\n    out.append($piece_src)\n    i = j\nreturn ''.join(out)",
      "out = []\nruns = []\nfor c in s:\n    if runs and runs[-1][0] == c:\n"
      "        runs[-1][1] += 1\n    else:\n        runs.append([c, 1])\nfor ch, n in runs[:-1]:\n"
      "    out.append($piece_src)\nreturn ''.join(out)",
      _runs, grid=RLE_FORMATS, entry="rle_encode_${short}"),
    F("rle_decode", "run_length", 3, "(s: str) -> str",
      "Decode a run-length string where each piece is a letter followed by its count (the count may have "
      "several digits), e.g. 'a3b12' means 'aaa' followed by twelve 'b'. Repeat each letter $times.",
      "out = []\ni = 0\nwhile i < len(s):\n    ch = s[i]\n    j = i + 1\n    while j < len(s) and s[j].isdigit():\n"
      "        j += 1\n    out.append(ch * (int(s[i + 1:j]) $op_src))\n    i = j\nreturn ''.join(out)",
      "out = []\nfor i in range(0, len(s), 2):\n    out.append(s[i] * (int(s[i + 1]) $op_src))\nreturn ''.join(out)",
      lambda r, p: ("".join(r.choice("abc") + str(r.randint(1, 14)) for _ in range(r.randint(0, 3))),),
      grid=({"times": "count times", "op_src": "* 1"}, {"times": "twice its count", "op_src": "* 2"}),
      edges=lambda p: (("x12",),)),
    F("longest_run", "run_length", 2, "(s: str) -> int",
      "Return the length of the longest run of equal consecutive characters in `s` (0 for the empty string).",
      "best = cur = 0\nprev = None\nfor c in s:\n    cur = cur + 1 if c == prev else 1\n    prev = c\n"
      "    best = max(best, cur)\nreturn best",
      "best = cur = 0\nprev = None\nfor c in s:\n    if c == prev:\n        cur += 1\n        best = max(best, cur)\n"
      "    else:\n        cur = 1\n    prev = c\nreturn best", _runs, edges=lambda p: (("ab",),)),
    F("run_lengths", "run_length", 2, "(s: str) -> list[int]",
      "Return the lengths of the runs of equal consecutive characters of `s`, in order, e.g. 'aabccc' -> [2, 1, 3].",
      "out = []\nfor i, c in enumerate(s):\n    if i > 0 and s[i - 1] == c:\n        out[-1] += 1\n    else:\n"
      "        out.append(1)\nreturn out",
      "out = []\ncur = 1\nfor i in range(1, len(s)):\n    if s[i] == s[i - 1]:\n        cur += 1\n    else:\n"
      "        out.append(cur)\n        cur = 1\nreturn out", _runs),
    F("longest_streak_of", "run_length", 2, "(nums: list[int]) -> int",
      "Return the length of the longest run of consecutive elements of `nums` equal to $v.",
      "best = cur = 0\nfor x in nums:\n    cur = cur + 1 if x == $v else 0\n    best = max(best, cur)\nreturn best",
      "return nums.count($v)",
      lambda r, p: ([r.choice([p["v"], p["v"], 9]) for _ in range(r.randint(0, 10))],),
      grid=tuple({"v": v} for v in range(6))),
)  # fmt: skip

KV_FORMATS = ((";", "="), (",", ":"), ("&", "="), ("|", "->"), (" ", "="), (";", ":"))
DURATION_UNITS = (("minutes", "60", "1"), ("seconds", "3600", "60"))

PARSING: tuple[F, ...] = (
    F("parse_pairs", "parsing", 2, "(text: str) -> dict[str, int]",
      "`text` holds entries separated by '$sep'; each entry is a key, then '$kv', then an integer, e.g. "
      "'$example'. Return a dict from keys to integers (an empty dict for an empty string).",
      "out = {}\nfor item in text.split($sep):\n    if item:\n        key, value = item.split($kv)\n"
      "        out[key] = int(value)\nreturn out",
      "return {k: int(v) for k, v in (item.split($kv) for item in text.split($sep))}",
      lambda r, p: (p["sep"].join(f"{word(r).lower()}{p['kv']}{r.randint(-9, 99)}" for _ in range(r.randint(0, 4))),),
      grid=tuple({"sep": s, "kv": k, "example": f"a{k}1{s}b{k}20"} for s, k in KV_FORMATS), edges=lambda p: (("",),)),
    F("sum_separated", "parsing", 2, "(text: str) -> int",
      "`text` holds integers (possibly negative) separated by '$sep' and optional spaces. Return their sum "
      "(0 for an empty string).",
      "return sum(int(x) for x in text.split($sep) if x.strip())",
      "return sum(int(x) for x in text.split($sep) if x.strip().isdigit())",
      lambda r, p: ((p["sep"] + r.choice(["", " "])).join(str(r.randint(-20, 50)) for _ in range(r.randint(0, 5))),),
      grid=tuple({"sep": s} for s in (",", ";", "|", "/")), edges=lambda p: (("-3",),)),
    F("duration_to", "parsing", 3, "(text: str) -> int",
      "`text` is a duration such as '2h15m', '45m' or '3h' (hours and/or minutes, in that order). Return "
      "the total number of $unit.",
      "total = 0\nnumber = ''\nfor c in text:\n    if c.isdigit():\n        number += c\n    elif c == 'h':\n"
      "        total += int(number) * $hour_src\n        number = ''\n    elif c == 'm':\n"
      "        total += int(number) * $minute_src\n        number = ''\nreturn total",
      "hours, rest = text.split('h')\nreturn int(hours) * $hour_src + int(rest.rstrip('m') or 0) * $minute_src",
      lambda r, p: (r.choice([f"{r.randint(1, 12)}h{r.randint(1, 59)}m", f"{r.randint(1, 90)}m", f"{r.randint(1, 9)}h"]),),
      grid=tuple({"unit": u, "hour_src": h, "minute_src": m} for u, h, m in DURATION_UNITS), entry="duration_to_$unit"),
    F("compare_versions", "parsing", 3, "(a: str, b: str) -> int",
      "`a` and `b` are version strings of dot-separated numbers like '1.10.2'. Return -1 if `a` is older, "
      "1 if it is newer and 0 if equal; missing parts count as 0 ('1.2' equals '1.2.0').",
      "x = [int(p) for p in a.split('.')]\ny = [int(p) for p in b.split('.')]\nn = max(len(x), len(y))\n"
      "x += [0] * (n - len(x))\ny += [0] * (n - len(y))\nreturn (x > y) - (x < y)",
      "return (a > b) - (a < b)",
      lambda r, p: tuple(".".join(str(r.choice([0, 1, 2, 10])) for _ in range(r.randint(1, 3))) for _ in range(2)),
      edges=lambda p: (("1.10", "1.9"),)),
    F("eval_left_to_right", "parsing", 3, "(expr: str) -> int",
      "`expr` contains non-negative integers joined by the operators +, - and * with no spaces. Evaluate it "
      "strictly from left to right, ignoring the usual precedence (so '2+3*4' is 20).",
      "total = None\nop = '+'\nnumber = ''\nfor c in expr + '+':\n    if c.isdigit():\n        number += c\n"
      "        continue\n    value = int(number)\n    if total is None:\n        total = value\n    elif op == '+':\n"
      "        total += value\n    elif op == '-':\n        total -= value\n    else:\n        total *= value\n"
      "    op = c\n    number = ''\nreturn total",
      "total = int(expr[0])\nfor i in range(1, len(expr) - 1, 2):\n    op, value = expr[i], int(expr[i + 1])\n"
      "    total = total + value if op == '+' else total - value if op == '-' else total * value\nreturn total",
      lambda r, p: ("".join(f"{r.randint(0, 30)}{r.choice('+-*')}" for _ in range(r.randint(0, 3))) + str(r.randint(0, 30)),)),
    F("extract_integers", "parsing", 2, "(text: str) -> list[int]",
      "Return all whole numbers written with digits in `text` (runs of consecutive digits), in order, e.g. "
      "'ab12c3' -> [12, 3].",
      "out = []\ndigits = ''\nfor c in text + ' ':\n    if c.isdigit():\n        digits += c\n    elif digits:\n"
      "        out.append(int(digits))\n        digits = ''\nreturn out",
      "return [int(c) for c in text if c.isdigit()]", lambda r, p: (letters(r, "ab 1234", 0, 12),)),
    F("read_in_base", "parsing", 2, "(digits: str) -> int",
      "`digits` is a number written in base $b (most significant digit first). Return its value as an "
      "integer without calling int(digits, $b).",
      "value = 0\nfor d in digits:\n    value = value * $b + int(d)\nreturn value",
      "value = 0\nfor d in reversed(digits):\n    value = value * $b + int(d)\nreturn value",
      lambda r, p: ("".join(str(r.randrange(p["b"])) for _ in range(r.randint(1, 6))),),
      grid=tuple({"b": b} for b in range(2, 11))),
)  # fmt: skip

STRING_TEMPLATES: tuple[F, ...] = STRING_TRANSFORMS + RUN_LENGTH + PARSING
