"""Small random-input helpers for the generators (plain ``random.Random``; no numpy)."""

from __future__ import annotations

import random

WORDS: tuple[str, ...] = (
    "apple", "river", "stone", "cloud", "tiger", "lemon", "piano", "ocean", "maple", "quick",
    "brave", "sun", "moon", "sky", "red", "blue", "cat", "dog", "tree", "house", "light", "zebra",
    "echo", "delta", "kiwi", "mango", "orbit", "pixel", "quartz", "violet", "Anna", "Bob", "Eve",
    "Oscar", "Ida", "Uma", "level", "noon", "bee", "see", "a", "I", "to", "be", "elephant", "computer", "mountain", "keyboard",
    "strawberry", "butterfly", "rainbow", "lantern",
)  # fmt: skip
NAMES: tuple[str, ...] = (
    "Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Gita", "Hugo", "Ines", "Jonas", "Kofi",
    "Lena", "Mateo", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tara", "Umar", "Vera",
)  # fmt: skip
CITIES: tuple[str, ...] = (
    "Lisbon", "Nairobi", "Oslo", "Lima", "Hanoi", "Quebec", "Porto", "Austin", "Kyoto", "Dakar",
    "Denver", "Turin", "Perth", "Cusco", "Bergen", "Accra",
)  # fmt: skip


def int_list(r: random.Random, lo: int = -9, hi: int = 9, min_len: int = 0, max_len: int = 8) -> list[int]:
    return [r.randint(lo, hi) for _ in range(r.randint(min_len, max_len))]


def word(r: random.Random) -> str:
    return r.choice(WORDS)


def words(r: random.Random, min_n: int = 0, max_n: int = 6) -> list[str]:
    return [word(r) for _ in range(r.randint(min_n, max_n))]


def sentence(r: random.Random, min_n: int = 0, max_n: int = 6) -> str:
    return " ".join(words(r, min_n, max_n))


def spaced(r: random.Random) -> str:
    """A sentence with irregular spacing (leading, trailing, doubled) to catch naive ``split(" ")``."""
    parts = words(r, 0, 5)
    text = "".join(w + " " * r.randint(1, 2) for w in parts)
    return " " * r.randint(0, 2) + text


def letters(r: random.Random, alphabet: str = "abcde", min_len: int = 0, max_len: int = 10) -> str:
    return "".join(r.choice(alphabet) for _ in range(r.randint(min_len, max_len)))


def sorted_ints(r: random.Random, lo: int = -9, hi: int = 9, min_len: int = 0, max_len: int = 8) -> list[int]:
    return sorted(int_list(r, lo, hi, min_len, max_len))
