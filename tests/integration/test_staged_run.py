"""``execrl train`` on a config with ``[[stages]]`` (``recipes/stages.py``), on the tiny model: sft -> sample
-> sft on the sampled rows -> RL, each stage's model the next one's; SIGKILL inside the RL stage, then
``--resume`` continues that stage from its checkpoint without re-running the finished ones; a bad key in any
stage is one ``error:`` line naming it, exit 2, nothing written."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from test_sft_cli import _rows, _write
from test_train_cli import EXECRL, _env, _wait_for_checkpoint
from toy_domain import toy_overrides

from execrl.cli import main
from execrl.config import parse_override


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _stage(name: str, kind: str, overrides: list[str], **fields: Any) -> str:
    lines = ["[[stages]]", f'name = "{name}"', f'kind = "{kind}"']
    lines += [f"{key} = {_toml(value)}" for key, value in fields.items()]
    lines.append("[stages.config]")
    table: dict[str, Any] = {}
    for item in overrides:  # a later override of a key wins, as on the command line
        path, value = parse_override(item)
        if path[0] != "run" or path[1] not in ("output_dir", "name"):  # the staged run sets those
            table[".".join(path)] = value
    lines += [f"{key} = {_toml(value)}" for key, value in table.items()]
    return "\n".join(lines) + "\n"


def _config(tmp_path: Path, model: Path, tasks: Path, *, rl_key: str = "optim.learning_rate=1e-3") -> Path:
    rows = _write(tmp_path / "rows.jsonl", _rows(8))
    sft = [f"model.path={model}", f'data.train_files=["{rows}"]', "optim.tokens_per_row=512",
           "optim.rows_per_step=2", "run.total_steps=2", "optim.learning_rate=1e-6", "eval.enabled=false",
           "telemetry.tensorboard=false",
           "data.heldout_share=0.1"]  # fmt: skip
    toy = [o for o in toy_overrides(model, tasks, tmp_path) if not o.startswith("model.path")]
    rl = [*toy, rl_key, "run.total_steps=4", "checkpoint.every_steps=1", "eval.enabled=false"]
    text = (f'[run]\nname = "staged"\noutput_dir = "{tmp_path / "runs"}"\n\n'
            + _stage("sft", "sft", sft) + _stage("rows", "sample", toy, limit=4)
            + _stage("rft", "sft", [*sft[2:], "data.train_files=[]"], rows_from=["rows"])
            + _stage("rl", "train", rl))  # fmt: skip
    path = tmp_path / "staged.toml"
    path.write_text(text)
    return path


@pytest.mark.slow
def test_sigkill_in_a_stage_then_resume_continues_that_stage(
    caps_or_eos_model: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    config = _config(tmp_path, caps_or_eos_model, toy_tasks_file)
    proc = subprocess.Popen([*EXECRL, "train", "--no-progress", "--config", str(config)], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    runs = tmp_path / "runs"
    deadline = time.monotonic() + 600
    rl_dir = None
    while rl_dir is None:
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline
        found = list(runs.glob("staged-*/stages/3-rl/*/config.toml"))
        rl_dir = found[0].parent if found else None
        time.sleep(0.2)
    _wait_for_checkpoint(rl_dir, 1, proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    [staged_dir] = runs.iterdir()
    state = json.loads((staged_dir / "stages.json").read_text())["stages"]
    assert list(state) == ["sft", "rows", "rft"]  # the finished stages; rl was inside its steps
    before = {p: p.stat().st_mtime for p in (staged_dir / "stages").glob("[012]-*/**/*") if p.is_file()}
    resumed = subprocess.run([*EXECRL, "train", "--no-progress", "--resume", str(staged_dir)], env=_env(),
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = {p: p.stat().st_mtime for p in (staged_dir / "stages").glob("[012]-*/**/*") if p.is_file()}
    assert after == before  # the finished stages were not run again
    assert [p.parent for p in (staged_dir / "stages" / "3-rl").glob("*/config.toml")] == [rl_dir]  # resumed
    state = json.loads((staged_dir / "stages.json").read_text())["stages"]
    assert list(state) == ["sft", "rows", "rft", "rl"] and state["rl"]["run_dir"] == str(rl_dir)
    rft_config = (Path(state["rft"]["run_dir"]) / "config.toml").read_text()
    assert state["rows"]["rows"] in rft_config and state["sft"]["model"] in rft_config  # fed forward
    assert state["rft"]["model"] in (rl_dir / "config.toml").read_text()
    steps = [json.loads(x)["step"] for x in (rl_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    assert sorted(set(steps)) == [0, 1, 2, 3]
    report = (staged_dir / "report.md").read_text()
    assert all(f"({kind})" in report for kind in ("sft", "sample", "train"))


def test_a_bad_key_in_any_stage_is_one_error_line_and_nothing_written(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, tiny_model_dir, toy_tasks_file, rl_key="optim.nosuch=1")
    assert main(["train", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "stages[3] (rl).config" in err and "optim.nosuch" in err
    assert not (tmp_path / "runs").exists()
    config.write_text(config.read_text().replace('rows_from = ["rows"]', 'rows_from = ["sft"]'))
    assert main(["train", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "rows_from 'sft' is not an earlier sample stage" in err
    assert not (tmp_path / "runs").exists()
