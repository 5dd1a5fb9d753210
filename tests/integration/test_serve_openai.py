"""``execrl serve`` answers the official ``openai`` client: completions, n, stop, seed, streaming, usage,
OpenAI-shaped errors, and concurrent requests batched into fewer generations."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import pytest
from service_server import wait_for_url

from execrl.rollout.engine import create_engine
from execrl.rollout.models import load_model_and_tokenizer
from execrl.rollout.prompts import encode_prompts
from execrl.serve.background import serve_in_thread
from execrl.serve.server import ServeConfig, build_app

NAME = "tiny"
MESSAGES = [{"role": "user", "content": "Write a function that adds two numbers."}]


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path) -> Iterator[tuple[str, object]]:
    model, tokenizer = load_model_and_tokenizer(tiny_model_dir)
    engine = create_engine("hf", model=model, tokenizer=tokenizer)
    with serve_in_thread(build_app(engine, ServeConfig(model_name=NAME, default_max_tokens=8))) as url:
        yield url, tokenizer


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def test_completion_n_usage_and_models(server: tuple[str, object]) -> None:
    url, tokenizer = server
    client = _client(url)
    assert [m.id for m in client.models.list().data] == [NAME]
    reply = client.chat.completions.create(
        model=NAME,
        messages=MESSAGES,
        n=3,
        max_tokens=6,
        temperature=1.0,  # type: ignore[arg-type]
    )
    assert len(reply.choices) == 3 and [c.index for c in reply.choices] == [0, 1, 2]
    assert all(c.finish_reason in ("stop", "length") for c in reply.choices)
    assert reply.usage is not None
    assert reply.usage.prompt_tokens == len(encode_prompts(tokenizer, [MESSAGES])[0])  # type: ignore[arg-type]
    assert 3 <= reply.usage.completion_tokens <= 18
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_seed_reproducible_and_stream_equals_plain(server: tuple[str, object]) -> None:
    client = _client(server[0])
    opts = {"model": NAME, "messages": MESSAGES, "max_tokens": 8, "temperature": 1.0, "seed": 7}
    a = client.chat.completions.create(**opts)  # type: ignore[call-overload]
    b = client.chat.completions.create(**opts)  # type: ignore[call-overload]
    assert a.choices[0].message.content == b.choices[0].message.content
    chunks = list(client.chat.completions.create(**opts, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == a.choices[0].message.content
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == a.usage.completion_tokens
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == a.choices[0].finish_reason


def test_stop_string_is_cut_and_reported(server: tuple[str, object]) -> None:
    client = _client(server[0])
    full = client.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=8, seed=3)  # type: ignore[arg-type]
    text = full.choices[0].message.content or ""
    assert len(text) >= 4, text
    stop = text[2:4]
    cut = client.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=8, seed=3, stop=[stop])  # type: ignore[arg-type]
    assert cut.choices[0].message.content == text[: text.find(stop)]
    assert cut.choices[0].finish_reason == "stop"


def test_bad_requests_get_openai_errors(server: tuple[str, object]) -> None:
    client = _client(server[0])
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model=NAME, messages=MESSAGES, temperature=5.0)  # type: ignore[arg-type]
    assert bad.value.status_code == 400 and "temperature" in bad.value.message
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="gpt-4", messages=MESSAGES)  # type: ignore[arg-type]
    assert "gpt-4" in missing.value.message
    with pytest.raises(openai.BadRequestError) as tools:
        client.chat.completions.create(
            model=NAME,
            messages=MESSAGES,
            tools=[{"type": "function", "function": {"name": "f"}}],  # type: ignore[arg-type,list-item]
            stream=True,
        )
    assert tools.value.param == "stream" and "tools" in tools.value.message
    with pytest.raises(openai.BadRequestError) as long:
        client.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=2040)  # type: ignore[arg-type]
    assert "context length" in long.value.message  # the tiny model's context is 2048 tokens
    with pytest.raises(openai.BadRequestError) as capped:
        client.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=10**6)  # type: ignore[arg-type]
    assert "--max-request-tokens" in capped.value.message


def _raw(url: str, data: bytes) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_malformed_bodies_and_unknown_routes(server: tuple[str, object]) -> None:
    url = server[0]
    for body in (
        b"{not json",
        b"[1, 2]",
        b'{"model": "tiny"}',
        b'{"model": "tiny", "messages": [{"role": "x"}]}',
    ):
        status, payload = _raw(f"{url}/v1/chat/completions", body)
        assert status == 400, body
        error = payload["error"]
        assert isinstance(error, dict) and error["type"] == "invalid_request_error" and error["message"]
    status, payload = _raw(f"{url}/v1/nothing", b"{}")
    assert status == 404 and "error" in payload
    with urllib.request.urlopen(f"{url}/health", timeout=30) as response:
        assert json.loads(response.read())["status"] == "ok"


def test_concurrent_requests_share_generations(server: tuple[str, object]) -> None:
    url = server[0]
    client = _client(url)
    with urllib.request.urlopen(f"{url}/health", timeout=30) as response:
        before = json.loads(response.read())

    def one(i: int) -> str:
        messages = [{"role": "user", "content": f"Request number {i}."}]
        reply = client.chat.completions.create(model=NAME, messages=messages, max_tokens=8)  # type: ignore[arg-type]
        return reply.choices[0].message.content or ""

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(one, range(8)))
    with urllib.request.urlopen(f"{url}/health", timeout=30) as response:
        after = json.loads(response.read())
    assert len(answers) == 8
    assert after["prompts"] - before["prompts"] == 8
    assert after["batches"] - before["batches"] < 8, (before, after)


@pytest.mark.slow
def test_cli_serve_answers_openai_client(tiny_model_dir: Path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "execrl.cli",
            "serve",
            "--model",
            str(tiny_model_dir),
            "--port",
            "0",
            "--served-model-name",
            NAME,
            "--threads",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = wait_for_url(proc)
        reply = _client(url).chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=4)  # type: ignore[arg-type]
        assert reply.choices[0].finish_reason in ("stop", "length")
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert proc.returncode == 0, "SIGTERM must stop the server cleanly"


@pytest.mark.slow
def test_bench_serve_writes_ratio_json(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The benchmark runs end to end and its JSON carries the headline ratio (value not asserted: CPU load)."""
    out = tmp_path / "serve.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "execrl.cli",
            "bench",
            "serve",
            "--model",
            str(tiny_model_dir),
            "--concurrency",
            "1,16",
            "--requests-per-client",
            "1",
            "--max-tokens",
            "8",
            "--threads",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["ratio_vs_naive_at_16"] > 0
    assert report["sides"]["execrl"]["16"]["requests"] == 16
    assert report["sides"]["naive"]["16"]["completion_tokens"] > 0
