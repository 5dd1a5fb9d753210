"""``sandbox.urls``: validated in the config, and it switches the recipe's sandbox to the replica client."""

from __future__ import annotations

import pytest

from execrl.components.setup import build_sandbox
from execrl.config import ConfigError, load_config
from execrl.sandbox.service.client import ServiceClient


def test_urls_build_a_client_with_the_configured_retry_policy() -> None:
    config = load_config(
        None,
        [
            'sandbox.urls=["http://10.0.0.5:8080", "http://10.0.0.6:8080/"]',
            "sandbox.max_attempts=3",
            "sandbox.max_in_flight_per_replica=5",
        ],
    )
    sandbox = build_sandbox(config)
    assert isinstance(sandbox, ServiceClient)
    assert sandbox.config.urls == ("http://10.0.0.5:8080", "http://10.0.0.6:8080")
    assert (sandbox.config.max_attempts, sandbox.config.max_in_flight_per_replica) == (3, 5)


def test_a_malformed_url_names_the_key_and_the_url() -> None:
    with pytest.raises(ConfigError, match=r"sandbox.*'10.0.0.5:8080' is not http"):
        load_config(None, ['sandbox.urls=["10.0.0.5:8080"]'])


def test_a_replica_listed_twice_is_refused() -> None:
    with pytest.raises(ConfigError, match="twice"):
        load_config(None, ['sandbox.urls=["http://a:1", "http://a:1/"]'])
