"""Number templates: number theory, bit manipulation and date/time arithmetic without imports."""

from __future__ import annotations

import random

from execrl.tasks.suites._fn_core import FunctionTemplate as F
from execrl.tasks.suites._fn_core import Params
from execrl.tasks.suites._gen import int_list


def _n(r: random.Random, p: Params) -> tuple[int]:
    return (r.randint(1, 300),)


def _bits(r: random.Random, p: Params) -> tuple[int]:
    return (r.choice([r.randint(0, 255), 2 ** r.randint(0, 9), r.randint(256, 5000)]),)


NUMBER_THEORY: tuple[F, ...] = (
    F("digit_sum_in_base", "number_theory", 2, "(n: int) -> int",
      "Return the sum of the digits of the non-negative integer `n` when it is written in base $b.",
      "total = 0\nwhile n > 0:\n    total += n % $b\n    n //= $b\nreturn total",
      "total = 0\nwhile n >= $b:\n    total += n % $b\n    n //= $b\nreturn total",
      lambda r, p: (r.randint(0, 5000),), grid=tuple({"b": b} for b in range(2, 17))),
    F("digital_root", "number_theory", 2, "(n: int) -> int",
      "Repeatedly replace the non-negative integer `n` by the sum of its decimal digits until it has a single "
      "digit, and return that digit.",
      "while n >= 10:\n    n = sum(int(d) for d in str(n))\nreturn n",
      "return sum(int(d) for d in str(n))", lambda r, p: (r.randint(0, 99999),)),
    F("count_divisors_above", "number_theory", 2, "(n: int) -> int",
      "Return how many positive divisors of the positive integer `n` are greater than $k (n itself counts).",
      "return sum(1 for d in range(1, n + 1) if n % d == 0 and d > $k)",
      "return sum(1 for d in range(1, n) if n % d == 0 and d > $k)", _n, grid=tuple({"k": k} for k in range(10))),
    F("sum_proper_divisors", "number_theory", 2, "(n: int) -> int",
      "Return the sum of the proper divisors of the positive integer `n` (all divisors except `n` itself).",
      "return sum(d for d in range(1, n) if n % d == 0)", "return sum(d for d in range(1, n + 1) if n % d == 0)", _n),
    F("count_primes_up_to", "number_theory", 2, "(n: int) -> int",
      "Return how many prime numbers are less than or equal to `n`.",
      "return sum(1 for k in range(2, n + 1) if all(k % d for d in range(2, int(k ** 0.5) + 1)))",
      "return sum(1 for k in range(2, n) if all(k % d for d in range(2, int(k ** 0.5) + 1)))",
      lambda r, p: (r.randint(0, 200),), edges=lambda p: ((7,),)),
    F("sum_primes_below", "number_theory", 3, "(n: int) -> int",
      "Return the sum of all prime numbers strictly less than `n`.",
      "return sum(k for k in range(2, n) if all(k % d for d in range(2, int(k ** 0.5) + 1)))",
      "return sum(k for k in range(1, n) if all(k % d for d in range(2, int(k ** 0.5) + 1)))",
      lambda r, p: (r.randint(0, 200),)),
    F("lcm_of_list", "number_theory", 3, "(nums: list[int]) -> int",
      "Return the least common multiple of the positive integers in the non-empty list `nums`. Do not import "
      "anything.",
      "def gcd(a, b):\n    while b:\n        a, b = b, a % b\n    return a\n\nresult = 1\nfor x in nums:\n"
      "    result = result * x // gcd(result, x)\nreturn result",
      "result = 1\nfor x in nums:\n    result *= x\nreturn result", lambda r, p: (int_list(r, 1, 12, 1, 4),)),
    F("gcd_of_list", "number_theory", 2, "(nums: list[int]) -> int",
      "Return the greatest common divisor of the positive integers in the non-empty list `nums`. Do not "
      "import anything.",
      "result = 0\nfor x in nums:\n    a, b = result, x\n    while b:\n        a, b = b, a % b\n    result = a\nreturn result",
      "return min(nums)", lambda r, p: ([r.randint(1, 6) * r.choice([2, 3, 6]) for _ in range(r.randint(1, 4))],)),
    F("collatz_steps", "number_theory", 2, "(n: int) -> int",
      "Starting from the positive integer `n`, repeatedly halve it when even or replace it with 3 * n + 1 "
      "when odd. Return how many steps it takes to reach 1 (0 if `n` is 1).",
      "steps = 0\nwhile n != 1:\n    n = n // 2 if n % 2 == 0 else 3 * n + 1\n    steps += 1\nreturn steps",
      "steps = 1\nwhile n != 1:\n    n = n // 2 if n % 2 == 0 else 3 * n + 1\n    steps += 1\nreturn steps", _n),
    F("count_divisible_by_either", "number_theory", 2, "(n: int) -> int",
      "Return how many integers from 1 to `n` (inclusive) are divisible by $a or by $b (or both).",
      "return sum(1 for k in range(1, n + 1) if k % $a == 0 or k % $b == 0)",
      "return n // $a + n // $b", lambda r, p: (r.randint(0, 200),),
      grid=tuple({"a": a, "b": b} for a, b in ((2, 3), (3, 5), (2, 5), (4, 6), (3, 7), (5, 7), (2, 7),
                                                (6, 9), (4, 10), (3, 4), (5, 8), (2, 9)))),
    F("factorial_trailing_zeros", "number_theory", 3, "(n: int) -> int",
      "Return how many zeros the decimal representation of n! (the factorial of the non-negative integer "
      "`n`) ends with.",
      "count = 0\nwhile n:\n    n //= 5\n    count += n\nreturn count", "return n // 5", lambda r, p: (r.randint(0, 400),)),
    F("is_perfect_square", "number_theory", 2, "(n: int) -> bool",
      "Return True if the integer `n` is the square of an integer (negative numbers never are).",
      "if n < 0:\n    return False\nr = 0\nwhile r * r < n:\n    r += 1\nreturn r * r == n",
      "r = 1\nwhile r * r < n:\n    r += 1\nreturn r * r == n",
      lambda r, p: (r.choice([r.randint(-50, 200), r.randint(0, 14) ** 2]),), edges=lambda p: ((-4,), (0,))),
    F("sum_multiples_below", "number_theory", 2, "(n: int) -> int",
      "Return the sum of all positive multiples of $k that are strictly less than `n`.",
      "return sum(range($k, n, $k))", "return sum(range($k, n + 1, $k))",
      lambda r, p: (r.choice([r.randint(0, 300), p["k"] * r.randint(1, 20)]),), grid=tuple({"k": k} for k in range(2, 13)),
      edges=lambda p: ((p["k"] * 3,),)),
)  # fmt: skip

BITS: tuple[F, ...] = (
    F("popcount", "bits", 2, "(n: int) -> int",
      "Return the number of 1 bits in the binary representation of the non-negative integer `n`.",
      "count = 0\nwhile n:\n    count += n & 1\n    n >>= 1\nreturn count",
      "count = 0\nwhile n > 1:\n    count += n & 1\n    n >>= 1\nreturn count", _bits),
    F("is_power_of_two", "bits", 2, "(n: int) -> bool",
      "Return True if the integer `n` is a power of two (1, 2, 4, 8, ...), otherwise False.",
      "return n > 0 and n & (n - 1) == 0", "return n & (n - 1) == 0", _bits, edges=lambda p: ((0,),)),
    F("bit_at", "bits", 2, "(n: int) -> int",
      "Return bit number $k (0 is the least significant bit) of the non-negative integer `n`, as 0 or 1.",
      "return (n >> $k) & 1", "return (n >> ($k + 1)) & 1", _bits, grid=tuple({"k": k} for k in range(8))),
    F("toggle_bit", "bits", 2, "(n: int) -> int",
      "Return `n` with bit number $k (0 is the least significant bit) flipped: 0 becomes 1 and 1 becomes 0.",
      "return n ^ (1 << $k)", "return n | (1 << $k)", _bits, grid=tuple({"k": k} for k in range(8)),
      edges=lambda p: ((1 << p["k"],),)),
    F("trailing_zero_bits", "bits", 2, "(n: int) -> int",
      "Return how many 0 bits the binary representation of the positive integer `n` ends with.",
      "count = 0\nwhile n % 2 == 0:\n    n //= 2\n    count += 1\nreturn count", "return bin(n).count('0') - 1",
      lambda r, p: (r.randint(1, 50) * 2 ** r.randint(0, 5),)),
    F("hamming_distance", "bits", 2, "(a: int, b: int) -> int",
      "Return the number of bit positions in which the non-negative integers `a` and `b` differ.",
      "return bin(a ^ b).count('1')",
      "return sum(1 for x, y in zip(bin(a)[2:], bin(b)[2:]) if x != y)",
      lambda r, p: (r.randint(0, 300), r.randint(0, 300))),
    F("reverse_bits", "bits", 3, "(n: int) -> int",
      "Write the non-negative integer `n` (which is below 2**$w) as exactly $w bits, reverse the order of "
      "those bits and return the resulting integer.",
      "out = 0\nfor _ in range($w):\n    out = (out << 1) | (n & 1)\n    n >>= 1\nreturn out",
      "return int(bin(n)[2:][::-1], 2)", lambda r, p: (r.randrange(2 ** p["w"]),),
      grid=tuple({"w": w} for w in (4, 6, 8, 10, 12, 16))),
    F("bit_parity", "bits", 2, "(n: int) -> int",
      "Return 1 if the non-negative integer `n` has an odd number of 1 bits, otherwise 0.",
      "return bin(n).count('1') % 2", "return n % 2", _bits),
    F("highest_bit_index", "bits", 2, "(n: int) -> int",
      "Return the index of the highest 1 bit of the positive integer `n` (the least significant bit has "
      "index 0).",
      "return n.bit_length() - 1", "return n.bit_length()", lambda r, p: (r.randint(1, 5000),)),
)  # fmt: skip

_DATE_HELPERS = (
    "def leap(y):\n    return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)\n\n"
    "def month_days(y):\n    return [31, 29 if leap(y) else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]\n\n"
    "def ordinal(text):\n    y, m, d = (int(x) for x in text.split('-'))\n"
    "    days = sum(366 if leap(k) else 365 for k in range(1, y))\n    return days + sum(month_days(y)[:m - 1]) + d\n\n"
)
_WRONG_LEAP = _DATE_HELPERS.replace("y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)", "y % 4 == 0")


def _date(r: random.Random, p: Params) -> str:
    y = r.choice([1900, 2000, 2023, 2024, 2100, r.randint(1950, 2050)])
    m = r.randint(1, 12)
    return f"{y:04d}-{m:02d}-{r.randint(1, 28 if m == 2 else 30):02d}"


def _clock(r: random.Random) -> str:
    return f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}"


WEEKDAYS = "['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday']"

DATES: tuple[F, ...] = (
    F("is_leap_year", "dates", 2, "(year: int) -> bool",
      "Return True if `year` is a Gregorian leap year: divisible by 4, except years divisible by 100 that are "
      "not divisible by 400.",
      "return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)", "return year % 4 == 0",
      lambda r, p: (r.choice([r.randint(1800, 2400), 100 * r.randint(15, 25)]),), edges=lambda p: ((1900,),)),
    F("day_of_year", "dates", 3, "(date: str) -> int",
      "`date` is 'YYYY-MM-DD'. Return its day number within its year (January 1st is 1), taking leap years "
      "into account. Do not import anything.",
      _DATE_HELPERS + "return ordinal(date) - ordinal(date[:4] + '-01-01') + 1",
      _WRONG_LEAP + "return ordinal(date) - ordinal(date[:4] + '-01-01') + 1",
      lambda r, p: (_date(r, p),), edges=lambda p: (("1900-03-01",),)),
    F("days_between", "dates", 3, "(a: str, b: str) -> int",
      "`a` and `b` are dates 'YYYY-MM-DD'. Return the number of days from `a` to `b` (negative if `b` is "
      "earlier). Do not import anything.",
      _DATE_HELPERS + "return ordinal(b) - ordinal(a)",
      "ya, ma, da = (int(x) for x in a.split('-'))\nyb, mb, db = (int(x) for x in b.split('-'))\n"
      "return (yb - ya) * 365 + (mb - ma) * 30 + (db - da)", lambda r, p: (_date(r, p), _date(r, p))),
    F("add_days", "dates", 3, "(date: str) -> str",
      "`date` is 'YYYY-MM-DD'. Return the date $n days later in the same format, taking month lengths and "
      "leap years into account. Do not import anything.",
      _DATE_HELPERS + "y, m, d = (int(x) for x in date.split('-'))\nfor _ in range($n):\n    d += 1\n"
      "    if d > month_days(y)[m - 1]:\n        d, m = 1, m + 1\n        if m > 12:\n            m, y = 1, y + 1\n"
      "return f'{y:04d}-{m:02d}-{d:02d}'",
      _WRONG_LEAP + "y, m, d = (int(x) for x in date.split('-'))\nfor _ in range($n):\n    d += 1\n"
      "    if d > month_days(y)[m - 1]:\n        d, m = 1, m + 1\n        if m > 12:\n            m, y = 1, y + 1\n"
      "return f'{y:04d}-{m:02d}-{d:02d}'",
      lambda r, p: (_date(r, p),), grid=tuple({"n": n} for n in (1, 2, 7, 10, 14, 30, 31, 45, 60, 90, 100, 365)),
      edges=lambda p: (("1900-02-28",), ("2100-02-20",))),
    F("add_minutes", "dates", 2, "(time: str) -> str",
      "`time` is a 24-hour clock time 'HH:MM'. Return the clock time $m minutes later in the same format "
      "(after 23:59 comes 00:00).",
      "h, m = (int(x) for x in time.split(':'))\ntotal = (h * 60 + m + $m) % (24 * 60)\n"
      "return f'{total // 60:02d}:{total % 60:02d}'",
      "h, m = (int(x) for x in time.split(':'))\ntotal = h * 60 + m + $m\nreturn f'{total // 60:02d}:{total % 60:02d}'",
      lambda r, p: (_clock(r),), grid=tuple({"m": m} for m in (5, 15, 30, 45, 61, 90, 150, 240, 600, 720, 1000, 1439)),
      edges=lambda p: (("23:59",),)),
    F("minutes_until", "dates", 2, "(start: str, end: str) -> int",
      "`start` and `end` are 24-hour clock times 'HH:MM'. Return how many minutes pass from `start` until "
      "the clock next shows `end` (0 if they are equal; if `end` is earlier, it is on the next day).",
      "a = int(start[:2]) * 60 + int(start[3:])\nb = int(end[:2]) * 60 + int(end[3:])\nreturn (b - a) % 1440",
      "a = int(start[:2]) * 60 + int(start[3:])\nb = int(end[:2]) * 60 + int(end[3:])\nreturn abs(b - a)",
      lambda r, p: (_clock(r), _clock(r))),
    F("format_duration", "dates", 2, "(seconds: int) -> str",
      "Format the non-negative number of seconds as $fmt, with minutes and seconds always written with two digits.",
      "$body_src", "$wrong_src", lambda r, p: (r.choice([r.randint(0, 100), r.randint(0, 40000)]),),
      grid=({"fmt": "'H:MM:SS' (hours may have several digits)", "short": "hms",
             "body_src": "return f'{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}'",
             "wrong_src": "return f'{seconds // 3600}:{seconds // 60 % 60}:{seconds % 60}'"},
            {"fmt": "'M:SS' (minutes may exceed 59)", "short": "ms",
             "body_src": "return f'{seconds // 60}:{seconds % 60:02d}'",
             "wrong_src": "return f'{seconds // 60 % 60}:{seconds % 60:02d}'"}),
      entry="format_duration_$short", edges=lambda p: ((3725,),)),
    F("weekday_of", "dates", 3, "(date: str) -> str",
      "`date` is 'YYYY-MM-DD' (year 1900 or later). Return its weekday name in English, e.g. 'Monday'; "
      "1900-01-01 was a Monday. Do not import anything.",
      _DATE_HELPERS + f"return {WEEKDAYS}[(ordinal(date) - ordinal('1900-01-01')) % 7]",
      _WRONG_LEAP + f"return {WEEKDAYS}[(ordinal(date) - ordinal('1900-01-01')) % 7]",
      lambda r, p: (_date(r, p),), edges=lambda p: (("1900-03-01",),)),
)  # fmt: skip

NUMBER_TEMPLATES: tuple[F, ...] = NUMBER_THEORY + BITS + DATES
