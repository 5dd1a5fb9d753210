"""``execrl tools run`` against ``execrl serve`` with a tiny random model: the command runs the suite's
tool episodes through the real server, prints a line per task and the summary, and writes the report.
(A random model never emits a call; the scripted call sequences are in tests/unit/tools/test_tools_remote.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from execrl.cli import main
from execrl.rollout.engine import create_engine
from execrl.rollout.models import load_model_and_tokenizer
from execrl.serve.background import serve_in_thread
from execrl.serve.server import ServeConfig, build_app
from execrl.tasks import load_suite


def test_tools_run_against_execrl_serve(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, tokenizer = load_model_and_tokenizer(tiny_model_dir)
    engine = create_engine("hf", model=model, tokenizer=tokenizer)
    report = tmp_path / "tools.json"
    with serve_in_thread(build_app(engine, ServeConfig(model_name="tiny", default_max_tokens=8))) as url:
        rc = main([
            "tools", "run", "--url", f"{url}/v1", "--model", "tiny", "--limit", "2", "--json", str(report),
            "--max-turn-tokens", "8", "--seed", "1", "--tokenizer", str(tiny_model_dir),
        ])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0, out
    data = json.loads(report.read_text())
    tasks = load_suite("tools", split="test")[:2]
    assert [e["task_id"] for e in data["episodes"]] == [t.id for t in tasks]
    for e in data["episodes"]:
        assert (
            e["turns"] >= 1 and e["stop"] in ("answer", "max_tool_calls", "episode_tokens") and not e["error"]
        )
        assert e["messages"][0]["role"] == "user" and e["tokens_used"] >= 1
    assert data["summary"]["episodes"] == 2 and 0.0 <= data["summary"]["pass_rate"] <= 1.0
    assert "2 episodes: pass rate" in out and out.count(" stop ") == 2
