"""Seeds of independent random streams, derived by hashing a key (NumPy's ``SeedSequence``).

Why a hash and not arithmetic: the old rollout seed ``seed * 1_000_003 + step * 101 + round`` collided once
``round`` reached 101 (step s, round 101 == step s+1, round 0). ``SeedSequence`` mixes every word of the key
(its entropy pool hash, O'Neill's design), so distinct keys give unrelated seeds; a string tag keeps
the streams of different users (rollout, scheduler, ...) of the same (seed, step, round) apart.
"""

from __future__ import annotations

import zlib

import numpy as np


def _sequence(seed: int, tag: str, key: tuple[int, ...]) -> np.random.SeedSequence:
    if any(k < 0 for k in key):
        raise ValueError(f"key parts (step, round, ...) must be >= 0, got {key}")
    # a negative run seed is allowed (the config accepts any int): its 64-bit two's complement is the word
    return np.random.SeedSequence([seed % 2**64, zlib.crc32(tag.encode("utf-8")), *key])


def stream_seed(seed: int, tag: str, *key: int) -> int:
    """A 63-bit seed for the stream ``tag`` at ``key`` (e.g. step, round); a pure function of its inputs."""
    state = _sequence(seed, tag, key).generate_state(2, dtype=np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


def stream_rng(seed: int, tag: str, *key: int) -> np.random.Generator:
    """A NumPy generator for the stream ``tag`` at ``key``."""
    return np.random.default_rng(_sequence(seed, tag, key))
