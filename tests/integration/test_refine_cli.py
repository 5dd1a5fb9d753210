"""``execrl refine`` end to end against a real ``execrl serve`` (OpenAI backend), then ``refine show``.

A tiny random model writes no valid code, so every problem with visible tests is repaired up to the
round limit: this checks the plumbing (server, backend, sandbox, trace, report), not the model.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from execrl.rollout.engine import create_engine
from execrl.rollout.models import load_model_and_tokenizer
from execrl.serve.background import serve_in_thread
from execrl.serve.server import ServeConfig, build_app
from execrl.tasks import load_suite


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "execrl.cli", *args], capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow
def test_refine_cli_against_real_server(tiny_model_dir: Path, tmp_path: Path) -> None:
    model, tokenizer = load_model_and_tokenizer(tiny_model_dir)
    engine = create_engine("hf", model=model, tokenizer=tokenizer)
    out = tmp_path / "refine.json"
    with serve_in_thread(build_app(engine, ServeConfig(model_name="tiny"))) as url:  # type: ignore[arg-type]
        done = _cli(
            "refine",
            "--base-url",
            f"{url}/v1",
            "--model",
            "tiny",
            "--suite",
            "humaneval",
            "--limit",
            "3",
            "--rounds",
            "2",
            "--max-new-tokens",
            "8",
            "--temperature",
            "1.0",
            "--json",
            str(out),
        )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(out.read_text())
    assert summary["problems"] == 3 and summary["backend"].startswith("openai:tiny@")
    assert set(summary["conditions"]) == {"refine", "random_feedback", "resample"}
    assert len(summary["deltas"]["refine_minus_resample"]) == 2
    rows = [json.loads(line) for line in out.with_suffix(".trace.jsonl").read_text().splitlines()]
    tasks = {t.id: t for t in load_suite("humaneval", split="test")[:3]}
    refine_turns = {r["task_id"]: r["turn"] for r in rows if r["condition"] == "refine"}
    assert len(tasks) == 3  # the loop below must check something
    for task_id, task in tasks.items():
        assert refine_turns[task_id] == (2 if task.visible_tests else 1)
    second = [r for r in rows if r["turn"] == 2 and r["condition"] == "refine"]
    assert second and all(r["messages"][-1]["role"] == "user" for r in second)
    hidden = [h.code for t in tasks.values() for h in t.hidden_tests]
    for row in rows:
        for message in row["messages"]:
            assert "def check(candidate)" not in message["content"]
            assert not any(code.strip() in message["content"] for code in hidden)
    shown = _cli("refine", "show", str(out.with_suffix(".trace.jsonl")), "--condition", "refine")
    assert shown.returncode == 0 and "=== HumanEval/0  [refine]" in shown.stdout
    assert "--- turn 1: visible FAIL" in shown.stdout


def test_refine_show_rejects_a_file_that_is_not_a_trace(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"condition": "refine"}\nnot json\n')
    shown = _cli("refine", "show", str(bad))
    assert shown.returncode == 2 and "bad.jsonl:1" in shown.stderr and "missing" in shown.stderr


def test_refine_rejects_a_negative_kv_cache_before_loading_anything() -> None:
    done = _cli("refine", "--model", "no-such-model", "--kv-cache-mb", "-1")
    assert done.returncode == 2 and "--kv-cache-mb must be >= 0, got -1" in done.stderr


def test_refine_kv_cache_flag_sizes_the_local_engines_prefix_cache(tiny_model_dir: Path) -> None:
    from execrl.cli import build_parser
    from execrl.refine.cli import _backend

    args = build_parser().parse_args(["refine", "--model", str(tiny_model_dir), "--kv-cache-mb", "3"])
    backend, _ = _backend(args)
    with backend.session(2):  # the refine run holds one session around its conditions (evaluate.py)
        assert backend.engine.prefix_cache.max_bytes == 3 << 20
    off = build_parser().parse_args(["refine", "--model", str(tiny_model_dir), "--kv-cache-mb", "0"])
    backend, _ = _backend(off)
    with backend.session(2):
        assert backend.engine.prefix_cache is None


@pytest.mark.slow
def test_refine_records_an_endpoint_error_and_goes_on(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Regression (issue 24, class 3): one context-length 400 from the OpenAI-compatible endpoint lost the
    whole run (no summary, an empty trace). The model here has a 210-token context: the first turns of
    HumanEval/0-2 fit (153-197 prompt tokens), a repair turn does not; each such 400 is recorded in the
    trace and the summary, and the run finishes."""
    import shutil

    short = tmp_path / "short-context"
    shutil.copytree(tiny_model_dir, short)
    config = json.loads((short / "config.json").read_text())
    (short / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 210}))
    model, tokenizer = load_model_and_tokenizer(short)
    engine = create_engine("hf", model=model, tokenizer=tokenizer)
    out = tmp_path / "refine.json"
    with serve_in_thread(build_app(engine, ServeConfig(model_name="tiny"))) as url:  # type: ignore[arg-type]
        done = _cli(
            *("refine", "--base-url", f"{url}/v1", "--model", "tiny", "--suite", "humaneval"),
            *("--limit", "3", "--rounds", "2", "--max-new-tokens", "8", "--temperature", "1.0"),
            *("--conditions", "refine", "--json", str(out)),
        )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(out.read_text())
    assert summary["conditions"]["refine"]["endpoint_errors"] == 3
    assert all("HTTP 400" in e["error"] and e["turn"] == 2 for e in summary["endpoint_errors"])
    assert "endpoint errors" in done.stdout
    rows = [json.loads(line) for line in out.with_suffix(".trace.jsonl").read_text().splitlines()]
    assert sorted((r["task_id"], r["turn"], r["error"] is not None) for r in rows) == [
        (f"HumanEval/{i}", turn, turn == 2) for i in range(3) for turn in (1, 2)
    ]
