"""Property-based fuzzing of everything that reads candidate bytes (issue 9): >= 10,000 examples in all.

Guards against: a record, value or request that makes the record parser, the harness's record checker,
the verdict judge or the HTTP endpoints raise (a crashed caller, a ``sandbox_error`` the candidate chose,
a batch that lost its other results). Properties: no exception escapes; every request gets an answer;
every answer is a verdict (or, for a body that is not a valid request, a JSON 4xx naming the problem).
In-process targets take the volume; the HTTP endpoints take fewer examples through a real sandbox.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from execrl.sandbox import CallTest, CodeTest, ExecutionRequest, IOTest, Limits, Sandbox, Verdict
from execrl.sandbox.host.runner import RunState
from execrl.sandbox.judge.verdicts import assemble
from execrl.sandbox.service.serialize import request_to_dict, result_to_dict
from execrl.sandbox.zygote import records, testgroups

pytestmark = pytest.mark.slow
COUNTS: dict[str, int] = {}


def examples(count: int) -> settings:
    return settings(max_examples=count, deadline=None, database=None, suppress_health_check=list(HealthCheck))


STATUSES = ["ok", "value", "probed", "error", "unserializable", "too_large", "died", "skipped", "output"]

KINDS = ["loaded", "program_error", "test", "done", "compile", "run", "harness_error"]
KEYS = ["kind", "i", "status", "value", "cpu_s", "wall_s", "signal", "exit_code", "message", "type", "tb"]
KEYS += ["error", "stdout", "ok", "output", "output_limit", "wall_limit", "protocol_violation"]
NESTED: Any = []
for _ in range(150):
    NESTED = [NESTED]
ADVERSARIAL: list[Any] = [
    None, True, False, 0, 1, -1, 2, 3, 9, 24, 1.5, float("inf"), float("-inf"), float("nan"), 10**400,
    "", "x", "[[[", "\ud800", [], [1], ["ok"], {}, {"type": ["x"]}, {"message": 10**400}, NESTED,
    {"t": [1, 2]}, {"u": "Eq"}, '{"d": [[1, 2]]}', "[" * 2000, "[1, 2, 3]", '[{"t": [0, 1]}]', "[2]", "[0.5, false]",
]  # fmt: skip
scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
values = st.sampled_from(ADVERSARIAL) | st.sampled_from(KINDS + STATUSES) | scalars
record = st.dictionaries(st.sampled_from(KEYS), values, max_size=7)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
deep = st.integers(50, 20000).map(lambda n: "[" * n + "]" * (n % 2) * n)


def _dumps(value: Any) -> bytes:
    try:
        return json.dumps(value).encode()
    except ValueError:  # an int past the str-conversion limit
        return b'{"i": 1' + b"0" * 5000 + b"}"


lines = st.one_of(
    record.map(_dumps), st.binary(max_size=80), deep.map(str.encode), st.text(max_size=40).map(str.encode)
)


def _count(name: str) -> None:
    COUNTS[name] = COUNTS.get(name, 0) + 1


@examples(4000)
@given(line=lines)
def test_the_record_parser_never_raises(line: bytes) -> None:
    _count("parser")
    parsed = records.parse_record(line)
    assert parsed is None or (isinstance(parsed, dict) and type(parsed.get("i", 0)) is int)
    if parsed is not None:
        cleaned = records.clean_error(parsed)
        assert all(isinstance(v, str | float) for v in cleaned.values())


@examples(3000)
@given(stream=st.lists(lines, max_size=6), cut=st.integers(1, 64))
def test_the_harness_record_checker_relays_only_wellformed_records(stream: list[bytes], cut: int) -> None:
    _count("group")
    sent: list[dict[str, Any]] = []
    relay = SimpleNamespace(max_output=1 << 16, send=sent.append)  # stands in for the harness
    group = testgroups.GroupState(relay, [0, 1, 2])  # type: ignore[arg-type]
    data = b"".join(line + b"\n" for line in stream)
    for start in range(0, len(data), cut * 97):
        if not group.feed(data[start : start + cut * 97]):
            break
    assert [r["i"] for r in sent] == [0, 1, 2][: len(sent)]
    for relayed in sent:
        assert relayed["status"] in records.TEST_STATUSES
        assert all(isinstance(relayed[k], str | float) for k in relayed if k not in ("kind", "i", "status"))


tests = st.lists(
    st.sampled_from(
        [
            CodeTest("c", "assert f(1) == 2"),
            CodeTest(
                "h", "def check(c):\n    assert abs(c(1) - 0.5) < 1e-6\n    assert not c(2)\ncheck(f)\n"
            ),
            CodeTest("r", "import random\nassert f(random.random())\n"),
            CallTest("k", "f", (1,), expected=[1, (2, 3)]),
            IOTest("o", "1\n", "2\n"),
        ]
    ),
    min_size=0,
    max_size=3,
    unique_by=lambda t: t.name,
)


@examples(2400)
@given(
    request_tests=tests,
    got=st.lists(record, max_size=6),
    reason=st.sampled_from([None, "wall", "cpu", "output", "stop", "protocol"]),
    done=st.booleans(),
)
def test_the_judge_gives_every_test_a_verdict(
    request_tests: list[Any], got: list[dict[str, Any]], reason: str | None, done: bool
) -> None:
    _count("judge")
    request = ExecutionRequest("python", "def f(x):\n    return x\n", tuple(request_tests))
    state = RunState(
        records=[{"kind": "test", **r} if "kind" not in r else r for r in got], kill_reason=reason
    )
    state.done = done
    result = assemble(request, state, None)
    assert isinstance(result.verdict, Verdict)
    if reason != "stop":
        assert len(result.tests) == len(request.tests)
    json.dumps(result_to_dict(result))


def _program(payload: bytes, value: str) -> str:
    return (
        f"import os\nfor fd in range(3, 20):\n    try:\n        os.write(fd, {payload!r})\n"
        f"    except OSError:\n        pass\ndef f(x):\n    return {value}\n"
    )


def _request(payload: bytes, value: str, request_tests: list[Any]) -> dict[str, Any]:
    limits = Limits(timeout_s=5.0, cpu_time_s=1.0, memory_mb=128)
    program = _program(payload, value)
    return request_to_dict(ExecutionRequest("python", program, tuple(request_tests), limits=limits))


returned = st.sampled_from(["x", "[[[[x]]]]", "10 ** 5000", "float('inf')", "object()", "(x, {x})", "{1: x}"])
http_requests = st.lists(
    st.tuples(
        st.lists(lines, max_size=3).map(lambda ls: b"".join(line + b"\n" for line in ls)),
        returned,
        tests.filter(bool),
    ),
    min_size=1,
    max_size=3,
)
bodies = st.one_of(json_values.map(_dumps), st.binary(max_size=60), deep.map(str.encode))


def _client(sandbox: Sandbox) -> tuple[asyncio.AbstractEventLoop, Any]:
    from aiohttp.test_utils import TestClient, TestServer

    from execrl.sandbox.service.server import create_app

    loop = asyncio.new_event_loop()
    client = TestClient(TestServer(create_app(sandbox)), loop=loop)
    loop.run_until_complete(client.start_server())
    return loop, client


def _post(loop: asyncio.AbstractEventLoop, client: Any, path: str, data: bytes) -> tuple[int, Any]:
    async def go() -> tuple[int, Any]:
        response = await client.post(path, data=data, headers={"Content-Type": "application/json"})
        return response.status, await response.json()

    result: tuple[int, Any] = loop.run_until_complete(go())
    return result


def test_the_http_endpoints_answer_every_request(sandbox: Sandbox) -> None:
    loop, client = _client(sandbox)
    post: Callable[[str, bytes], tuple[int, Any]] = lambda path, data: _post(loop, client, path, data)  # noqa: E731

    @examples(400)
    @given(batch=http_requests)
    def batches(batch: list[tuple[bytes, str, Any]]) -> None:
        _count("http_batch")
        items = [_request(*item) for item in batch]
        status, body = post("/v1/execute_batch", json.dumps({"requests": items}).encode())
        assert status == 200, body
        assert len(body["results"]) == len(items)
        assert all(r["verdict"] in {v.value for v in Verdict} - {"sandbox_error"} for r in body["results"])

    @examples(400)
    @given(body=bodies, path=st.sampled_from(["/v1/execute", "/v1/execute_batch", "/run_code"]))
    def garbage(body: bytes, path: str) -> None:
        _count("http_body")
        status, answer = post(path, body)
        assert status in (200, 413, 422), (status, answer)
        assert isinstance(answer, dict)

    try:
        batches()
        garbage()
    finally:
        loop.run_until_complete(client.close())
        loop.close()


def test_the_fuzzing_ran_at_least_ten_thousand_examples() -> None:
    """Runs last in this module: the examples the other tests ran (no shrinking or early stops hid any)."""
    assert sum(COUNTS.values()) >= 10_000, COUNTS
