"""Hand big freed tensors back to the operating system at once (glibc ``mallopt``).

Why: CPU tensors are ``malloc``'d. glibc serves requests below its *mmap threshold* from the process heap,
and that threshold is dynamic: every time a large ``mmap``'d block is freed it rises to that block's size (up
to 32 MiB on 64-bit Linux). After a few steps of training, the activations of a long prompt (a 4,096-token
layer's MLP output is 4,096 x 1,536 x 4 B = 25 MiB) are all heap blocks, and freed heap blocks stay resident
(fragmentation stops the heap's top from being trimmed). The process's resident memory then holds the peak of
every phase at once: the rollout's prefill, the trainer's forward and its backward (a phase-labelled RSS probe
at 4,096 tokens: the prefill left +843 MB resident after it returned, the backward added +1.1 GB on top).

What execrl does, measured with ``execrl bench long-context`` (SmolLM2-135M, one 4,096-token prompt, 4
samples, 64 new tokens, float32, 2 threads) and ``execrl bench train`` (4 prompts x 4 samples x 64 tokens),
one machine, one run after the other:

| glibc setting | 4,096: step | 4,096: peak RSS | bench train: execrl step |
|---|---|---|---|
| glibc's own (as ``EXECRL_MALLOC=default`` leaves it) | 64.0 s | 5,283 MB | 14.4 s |
| mmap threshold 16 MiB, trim 32 MiB | 68.3 s | 4,160 MB | 14.8 s |
| mmap threshold 8 MiB, trim 32 MiB (the default here) | 70.1 s | 3,722 MB | 15.3 s |
| mmap and trim thresholds 1 MiB (``EXECRL_MALLOC=eager``) | 75.6 s | 3,651 MB | 19.9 s |

- ``configure_allocator()``, called by the CLI first thing, fixes glibc's mmap threshold at 8 MiB (which
  also turns the dynamic rise off) and its trim threshold at 32 MiB: a long prompt's activations (a
  4,096-token layer's hidden states are 9.4 MiB, its MLP's 25 MiB) are their own mappings, unmapped when
  torch frees them, while the many smaller blocks of a short step and of every decode step (16 rows of
  logits: 3 MiB) stay heap blocks that glibc reuses without page faults. ``EXECRL_MALLOC=eager`` lowers
  both to 1 MiB: the lowest peak, but a page fault per fresh page of every block of 1 MiB or more, which
  short steps pay for (every decode step's logits become a fresh mapping).

The 4,096 column was measured with a ``malloc_trim(0)`` after every rollout and update, since removed: it
did not lower the peak (first row: 5,283 MB, against 5,254 MB without it in an earlier run on a loaded
machine), and it changed a LoRA rollout's log-probs against the merged model's by 1.8e-4
(``tests/unit/trainer/test_lora.py::test_rollout_samples_and_scores_with_the_adapters``, both runs; under
its 1e-4 bound without it, under the 8 MiB and the 1 MiB thresholds alike). Float results should not
depend on where memory comes from: that points at a cache keyed by tensor address or at a read of memory
never written, not yet found.

Limits: glibc only (musl, macOS: nothing happens, reported by the return values). ``EXECRL_MALLOC=default``
leaves the allocator alone altogether; a user who set glibc's own ``MALLOC_MMAP_THRESHOLD_`` or
``MALLOC_TRIM_THRESHOLD_`` keeps them (the thresholds are then not set). Python-API users
who do not go through the CLI call ``configure_allocator()`` themselves, before their first tensor. It
changes only this process; child processes the CLI starts call it again.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["configure_allocator", "return_freed_memory_to_os"]

MMAP_THRESHOLD_BYTES = 8 << 20  # 8 MiB: a 4,096-token layer's hidden states (9.4 MiB) are their own mapping
TRIM_THRESHOLD_BYTES = 32 << 20  # the heap's top goes back once 32 MiB of it are free
EAGER_THRESHOLD_BYTES = 1 << 20  # EXECRL_MALLOC=eager: every tensor of 256k float32 values or more
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # from glibc's malloc.h
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


_MODES = ("", "default", "eager")  # EXECRL_MALLOC: unset (8 MiB), leave the allocator alone, 1 MiB


def _mode() -> str:
    mode = os.environ.get("EXECRL_MALLOC", "")
    if mode not in _MODES:
        raise ValueError(f"EXECRL_MALLOC={mode!r}: expected 'default' or 'eager' (or unset)")
    return mode


def _glibc() -> ctypes.CDLL | None:
    libc = ctypes.CDLL(None)  # the symbols already loaded in this process, the C library's among them
    return libc if hasattr(libc, "gnu_get_libc_version") else None


def configure_allocator() -> bool:
    """The CLI's start-up call: glibc's mmap/trim thresholds at 8/32 MiB, 1 MiB with ``EXECRL_MALLOC=eager``.

    True if they were set; False with ``EXECRL_MALLOC=default``, the user's own glibc variables, off glibc."""
    if _mode() == "eager":
        return return_freed_memory_to_os(EAGER_THRESHOLD_BYTES, EAGER_THRESHOLD_BYTES)
    return return_freed_memory_to_os()


def return_freed_memory_to_os(
    mmap_threshold_bytes: int = MMAP_THRESHOLD_BYTES, trim_threshold_bytes: int = TRIM_THRESHOLD_BYTES
) -> bool:
    """Set glibc's mmap and trim thresholds (``mallopt``); True if they were set.

    False (and nothing changed) off glibc, with ``EXECRL_MALLOC=default``, or when the user set glibc's own
    environment variables for either threshold.
    """
    if _mode() == "default" or any(name in os.environ for name in _USER_SETTINGS):
        return False
    libc = _glibc()
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold_bytes)) and bool(
        mallopt(_M_TRIM_THRESHOLD, trim_threshold_bytes)
    )
