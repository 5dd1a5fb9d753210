"""The uid block choice (``uids.uid_block``, ``uids.uid_range``): hand-checkable properties."""

from __future__ import annotations

import pytest

from execrl.sandbox.host.uids import UID_BLOCKS, UIDS_PER_POOL, uid_block, uid_range


def test_pid_1_of_nearby_namespaces_never_share_a_block() -> None:
    """The stride's promise for the default range: pid 1 of namespaces whose ids differ by up to 4096,
    with up to 64 pools each, never land in one block (the host's own formula, namespace 0, as before)."""
    blocks = {uid_block(ns, 1, pool, UID_BLOCKS) for ns in range(4097) for pool in range(64)}
    assert len(blocks) == 4097 * 64
    assert uid_block(0, 1234, 3, UID_BLOCKS) == (1234 * 64 + 3) % UID_BLOCKS


def test_a_configured_range_is_honoured_and_checked() -> None:
    assert uid_range("100000-165535") == (100000, 65536 // UIDS_PER_POOL)
    for bad in ("100-200", "x-y", "5", "0-99999", "1-4294967295"):
        with pytest.raises(ValueError, match="EXECRL_SANDBOX_UIDS"):
            uid_range(bad)
