"""Templates over small structures: intervals, matrices, grouping into dicts (difficulty 2-3)."""

from __future__ import annotations

import random

from execrl.tasks.suites._fn_core import FunctionTemplate as F
from execrl.tasks.suites._fn_core import Params
from execrl.tasks.suites._gen import int_list, sentence, words


def _intervals(r: random.Random, p: Params) -> tuple[list[list[int]]]:
    out = []
    for _ in range(r.randint(0, 5)):
        a = r.randint(0, 15)
        out.append([a, a + r.randint(0, 5)])
    return (out,)


def _matrix(r: random.Random, p: Params) -> tuple[list[list[int]]]:
    rows, cols = r.randint(1, 4), r.randint(1, 4)
    return ([[r.randint(-5, 12) for _ in range(cols)] for _ in range(rows)],)


def _square(r: random.Random, p: Params) -> tuple[list[list[int]]]:
    n = r.randint(1, 4)
    return ([[r.randint(-5, 9) for _ in range(n)] for _ in range(n)],)


MERGE_BODY = (
    "out = []\nfor a, b in sorted(intervals):\n    if out and a $cmp_src out[-1][1]:\n"
    "        out[-1][1] = max(out[-1][1], b)\n    else:\n        out.append([a, b])\nreturn out"
)
TOUCH = ({"touch": "also merge intervals that only touch (like [1, 3] and [3, 5])", "cmp_src": "<=", "kind": "closed"},
         {"touch": "do not merge intervals that only touch (like [1, 3] and [3, 5])", "cmp_src": "<", "kind": "open"})  # fmt: skip

INTERVALS: tuple[F, ...] = (
    F("merge_intervals", "intervals", 3, "(intervals: list[list[int]]) -> list[list[int]]",
      "Each interval is [start, end] with start <= end. Merge overlapping intervals and return them sorted by "
      "start; $touch.",
      MERGE_BODY, MERGE_BODY.replace("sorted(intervals)", "intervals"), _intervals, grid=TOUCH,
      entry="merge_intervals_$kind", edges=lambda p: (([[1, 3], [3, 5]],), ([[5, 6], [1, 2], [2, 5]],))),
    F("covered_length", "intervals", 3, "(intervals: list[list[int]]) -> int",
      "Each interval [start, end] covers the points from start to end (length end - start). Return the total "
      "length of the number line covered by at least one interval.",
      "total = 0\nreach = None\nfor a, b in sorted(intervals):\n    if reach is None or a > reach:\n"
      "        total += b - a\n        reach = b\n    elif b > reach:\n        total += b - reach\n        reach = b\n"
      "return total", "return sum(b - a for a, b in intervals)", _intervals),
    F("max_overlap", "intervals", 3, "(intervals: list[list[int]]) -> int",
      "Each interval is [start, end] and contains both ends. Return the largest number of intervals that "
      "contain one common point (0 for no intervals).",
      "events = sorted([(a, 0) for a, b in intervals] + [(b, 1) for a, b in intervals])\nbest = cur = 0\n"
      "for _, kind in events:\n    cur += 1 if kind == 0 else -1\n    best = max(best, cur)\nreturn best",
      "events = sorted([(a, 1) for a, b in intervals] + [(b, 0) for a, b in intervals])\nbest = cur = 0\n"
      "for _, kind in events:\n    cur += 1 if kind == 1 else -1\n    best = max(best, cur)\nreturn best",
      _intervals, edges=lambda p: (([[1, 3], [3, 4]],),)),
    F("any_overlap", "intervals", 2, "(intervals: list[list[int]]) -> bool",
      "Each interval is [start, end]. Return True if any two intervals overlap; intervals that only share an "
      "end point $share.",
      "ordered = sorted(intervals)\nreturn any(ordered[i + 1][0] $cmp_src ordered[i][1] for i in range(len(ordered) - 1))",
      "return any(intervals[i + 1][0] $cmp_src intervals[i][1] for i in range(len(intervals) - 1))", _intervals,
      grid=({"share": "count as overlapping", "cmp_src": "<=", "kind": "closed"},
            {"share": "do not count as overlapping", "cmp_src": "<", "kind": "open"}),
      entry="any_overlap_$kind", edges=lambda p: (([[5, 9], [1, 2], [4, 6]],),)),
    F("free_slots", "intervals", 3, "(busy: list[list[int]]) -> list[list[int]]",
      "`busy` holds [start, end] intervals inside the day [0, $end] (they may overlap and are not sorted). "
      "Return the free intervals of the day, sorted, as [start, end] pairs with start < end.",
      "free = []\nt = 0\nfor a, b in sorted(busy):\n    if a > t:\n        free.append([t, a])\n    t = max(t, b)\n"
      "if t < $end:\n    free.append([t, $end])\nreturn free",
      "free = []\nt = 0\nfor a, b in sorted(busy):\n    if a > t:\n        free.append([t, a])\n    t = b\n"
      "if t < $end:\n    free.append([t, $end])\nreturn free",
      lambda r, p: ([[a, min(p["end"], a + r.randint(1, 6))] for a in (r.randint(0, p["end"] - 1) for _ in range(r.randint(0, 4)))],),
      grid=tuple({"end": e} for e in (8, 10, 12, 16, 20, 24)), edges=lambda p: (([[0, 6], [1, 2]],),)),
)  # fmt: skip

MATRIX: tuple[F, ...] = (
    F("transpose", "matrix", 2, "(m: list[list[int]]) -> list[list[int]]",
      "Return the transpose of the rectangular matrix `m` (rows become columns).",
      "return [list(col) for col in zip(*m)]", "return [[m[i][j] for j in range(len(m))] for i in range(len(m))]", _matrix),
    F("row_sums", "matrix", 1, "(m: list[list[int]]) -> list[int]",
      "Return the list of the sums of each row of the matrix `m`.",
      "return [sum(row) for row in m]", "return [sum(row[1:]) for row in m]", _matrix),
    F("column_sums", "matrix", 2, "(m: list[list[int]]) -> list[int]",
      "Return the list of the sums of each column of the rectangular matrix `m`.",
      "return [sum(col) for col in zip(*m)]", "return [sum(row) for row in m]", _matrix),
    F("diagonal_sum", "matrix", 2, "(m: list[list[int]]) -> int",
      "Return the sum of the $which diagonal of the square matrix `m`.",
      "n = len(m)\nreturn sum(m[i][$col_src] for i in range(n))", "n = len(m)\nreturn sum(m[i][$col_src] for i in range(n - 1))",
      _square, grid=({"which": "main (top-left to bottom-right)", "col_src": "i", "short": "main"},
                     {"which": "anti (top-right to bottom-left)", "col_src": "n - 1 - i", "short": "anti"}),
      entry="${short}_diagonal_sum"),
    F("rotate_matrix", "matrix", 3, "(m: list[list[int]]) -> list[list[int]]",
      "Return the rectangular matrix `m` rotated 90 degrees $dir.",
      "$body_src", "return [list(row) for row in zip(*m)]", _matrix,
      grid=({"dir": "clockwise", "short": "clockwise", "body_src": "return [list(row) for row in zip(*m[::-1])]"},
            {"dir": "counter-clockwise", "short": "counter_clockwise",
             "body_src": "return [list(row) for row in zip(*m)][::-1]"}),
      entry="rotate_$short"),
    F("flatten_matrix", "matrix", 2, "(m: list[list[int]]) -> list[int]",
      "Return all elements of the rectangular matrix `m` in one list, reading $order.",
      "$body_src", "return [x for row in m for x in row[::-1]]", _matrix,
      grid=({"order": "row by row (left to right, top to bottom)", "short": "rows",
             "body_src": "return [x for row in m for x in row]"},
            {"order": "column by column (top to bottom, left to right)", "short": "columns",
             "body_src": "return [x for col in zip(*m) for x in col]"}),
      entry="flatten_by_$short"),
    F("count_above_in_matrix", "matrix", 1, "(m: list[list[int]]) -> int",
      "Return how many elements of the matrix `m` are greater than $t.",
      "return sum(1 for row in m for x in row if x > $t)", "return sum(1 for row in m if max(row) > $t)",
      _matrix, grid=tuple({"t": t} for t in range(0, 11))),
    F("scale_matrix", "matrix", 1, "(m: list[list[int]]) -> list[list[int]]",
      "Return a new matrix with every element of `m` multiplied by $k.",
      "return [[x * $k for x in row] for row in m]", "return [[x * $k for x in row] for row in m[:1]]",
      _matrix, grid=tuple({"k": k} for k in range(2, 10))),
    F("is_identity", "matrix", 2, "(m: list[list[int]]) -> bool",
      "Return True if the square matrix `m` is an identity matrix (1 on the main diagonal, 0 elsewhere).",
      "n = len(m)\nreturn all(m[i][j] == (1 if i == j else 0) for i in range(n) for j in range(n))",
      "return all(m[i][i] == 1 for i in range(len(m)))",
      lambda r, p: r.choice([_square(r, p), ([[int(i == j) for j in range(3)] for i in range(3)],)]),
      edges=lambda p: (([[1, 2], [0, 1]],),)),
    F("spiral_order", "matrix", 3, "(m: list[list[int]]) -> list[int]",
      "Return the elements of the rectangular matrix `m` in clockwise spiral order starting at the top-left.",
      "out = []\nwhile m:\n    out += m[0]\n    m = [list(row) for row in zip(*m[1:])][::-1]\nreturn out",
      "out = []\nwhile m:\n    out += m[0]\n    m = [list(row) for row in zip(*m[1:])]\nreturn out", _matrix),
    F("matrix_product", "matrix", 3, "(a: list[list[int]], b: list[list[int]]) -> list[list[int]]",
      "Return the matrix product of `a` and `b` (the number of columns of `a` equals the number of rows of `b`).",
      "return [[sum(x * y for x, y in zip(row, col)) for col in zip(*b)] for row in a]",
      "return [[x * y for x, y in zip(row, col)] for row, col in zip(a, b)]",
      lambda r, p: (lambda n, k, q: ([[r.randint(-3, 5) for _ in range(k)] for _ in range(n)],
                                     [[r.randint(-3, 5) for _ in range(q)] for _ in range(k)]))(
          r.randint(1, 3), r.randint(1, 3), r.randint(1, 3))),
)  # fmt: skip

GROUPING: tuple[F, ...] = (
    F("group_by_first_letter", "grouping", 2, "(words: list[str]) -> dict[str, list[str]]",
      "Return a dict mapping each first letter (lower-cased) to the list of words of `words` starting with it, "
      "in their original order.",
      "out = {}\nfor w in words:\n    out.setdefault(w[0].lower(), []).append(w)\nreturn out",
      "out = {}\nfor w in words:\n    out[w[0].lower()] = [w]\nreturn out", lambda r, p: (words(r, 0, 8),)),
    F("word_counts", "grouping", 2, "(text: str) -> dict[str, int]",
      "Return a dict mapping each word of `text` (words are separated by spaces) to how many times it occurs; "
      "$case.",
      "out = {}\nfor w in text.split():\n    w = $norm_src\n    out[w] = out.get(w, 0) + 1\nreturn out",
      "out = {}\nfor w in text.split():\n    out[w] = out.get(w, 0) + 1\nreturn out",
      lambda r, p: (sentence(r, 0, 8) + " Sun sun",),
      grid=({"case": "treat upper and lower case as the same and use lower-case keys", "norm_src": "w.lower()",
             "short": "ignoring_case"},
            {"case": "strip the characters '.,!?' from both ends of each word first", "norm_src": "w.strip('.,!?')",
             "short": "ignoring_punctuation"}),
      entry="word_counts_$short", edges=lambda p: (("Hi hi. hi!",),)),
    F("group_by_remainder", "grouping", 2, "(nums: list[int]) -> list[list[int]]",
      "Return a list of $k lists: list r holds the numbers of `nums` whose remainder modulo $k is r (as Python's "
      "% operator computes it, so -1 % $k == ${km1}), in their original order.",
      "out = [[] for _ in range($k)]\nfor x in nums:\n    out[x % $k].append(x)\nreturn out",
      "out = [[] for _ in range($k)]\nfor x in nums:\n    out[abs(x) % $k].append(x)\nreturn out",
      lambda r, p: (int_list(r, -12, 12, 0, 8),), grid=tuple({"k": k, "km1": k - 1} for k in range(3, 9)),
      edges=lambda p: (([-1],),)),
    F("invert_mapping", "grouping", 2, "(mapping: dict[str, str]) -> dict[str, str]",
      "Return a dict that maps each value of `mapping` to its key. When several keys share a value, keep the "
      "key that comes $which in the dict's order.",
      "$body_src", "$wrong_src",
      lambda r, p: ({w.lower(): r.choice("xyz") for w in words(r, 0, 6)},),
      grid=({"which": "first", "body_src": "out = {}\nfor k, v in mapping.items():\n    out.setdefault(v, k)\nreturn out",
             "wrong_src": "return {v: k for k, v in mapping.items()}"},
            {"which": "last", "body_src": "return {v: k for k, v in mapping.items()}",
             "wrong_src": "out = {}\nfor k, v in mapping.items():\n    out.setdefault(v, k)\nreturn out"}),
      entry="invert_keep_$which", edges=lambda p: (({"a": "x", "b": "x"},),)),
    F("anagram_groups", "grouping", 3, "(words: list[str]) -> list[list[str]]",
      "Group the words that are anagrams of each other (same letters, same counts). Sort each group "
      "alphabetically and return the groups sorted by their first word.",
      "groups = {}\nfor w in words:\n    groups.setdefault(''.join(sorted(w)), []).append(w)\n"
      "return sorted(sorted(g) for g in groups.values())",
      "groups = {}\nfor w in words:\n    groups.setdefault(''.join(sorted(set(w))), []).append(w)\n"
      "return sorted(sorted(g) for g in groups.values())",
      lambda r, p: ([r.choice(["ab", "ba", "aab", "aba", "abb", "cat", "act", "tac"]) for _ in range(r.randint(0, 6))],)),
    F("letter_frequency", "grouping", 2, "(text: str) -> dict[str, int]",
      "Return a dict from each letter in `text` to how often it occurs; $case. Ignore characters that are "
      "not letters.",
      "out = {}\nfor c in text:\n    if c.isalpha():\n        c = $norm_src\n        out[c] = out.get(c, 0) + 1\nreturn out",
      "out = {}\nfor c in text:\n    c = $norm_src\n    out[c] = out.get(c, 0) + 1\nreturn out",
      lambda r, p: (sentence(r, 1, 4),),
      grid=({"case": "upper and lower case count as the same lower-case letter", "norm_src": "c.lower()", "s": "any_case"},
            {"case": "upper and lower case letters are different", "norm_src": "c", "s": "case_sensitive"}),
      entry="letter_frequency_$s"),
    F("words_by_length", "grouping", 2, "(words: list[str]) -> list[list]",
      "Group the words by length. Return a list of [length, words] pairs sorted by length, where words keeps "
      "the original order.",
      "groups = {}\nfor w in words:\n    groups.setdefault(len(w), []).append(w)\nreturn [[n, groups[n]] for n in sorted(groups)]",
      "groups = {}\nfor w in words:\n    groups.setdefault(len(w), []).append(w)\nreturn [[n, g] for n, g in groups.items()]",
      lambda r, p: (words(r, 0, 7),)),
    F("parity_counts", "grouping", 1, "(nums: list[int]) -> dict[str, int]",
      "Return a dict {'even': E, 'odd': O} with how many numbers of `nums` are even and odd (0 is even).",
      "even = sum(1 for x in nums if x % 2 == 0)\nreturn {'even': even, 'odd': len(nums) - even}",
      "even = sum(1 for x in nums if x % 2 == 0 and x != 0)\nreturn {'even': even, 'odd': len(nums) - even}",
      lambda r, p: (int_list(r, -4, 4, 0, 8),), edges=lambda p: (([0],),)),
    F("top_words", "grouping", 3, "(text: str) -> list[str]",
      "Return the $n most frequent words of `text` (split on spaces), most frequent first; break ties "
      "alphabetically.",
      "counts = {}\nfor w in text.split():\n    counts[w] = counts.get(w, 0) + 1\n"
      "return sorted(counts, key=lambda w: (-counts[w], w))[:$n]",
      "counts = {}\nfor w in text.split():\n    counts[w] = counts.get(w, 0) + 1\n"
      "return sorted(counts, key=lambda w: -counts[w])[:$n]",
      lambda r, p: (" ".join(r.choice(["b", "a", "c", "dd", "e"]) for _ in range(r.randint(0, 9))),),
      grid=tuple({"n": n} for n in range(1, 5))),
)  # fmt: skip

STRUCTURE_TEMPLATES: tuple[F, ...] = INTERVALS + MATRIX + GROUPING
