"""``execrl sft`` as a user runs it, on a tiny random model: bad rows named by file and line, unreadable
input refused before anything is written, SIGKILL then ``--resume`` equal to the uninterrupted run bit for
bit, and the run directory, report and held-out evaluation of ``execrl train``."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_train_cli import EXECRL, _env, _wait_for_checkpoint
from toy_domain import toy_overrides


def _rows(n: int) -> list[dict[str, object]]:
    """Small conversations: plain chats, and tool episodes in the Hermes format (python calls)."""
    tools = [{"type": "function", "function": {"name": "python", "description": "run code",
                                               "parameters": {"type": "object", "properties": {"code": {"type": "string"}},
                                                              "required": ["code"]}}}]  # fmt: skip
    out: list[dict[str, object]] = []
    for i in range(n):
        if i % 2:
            call = {
                "type": "function",
                "function": {"name": "python", "arguments": {"code": f"print({i} * 3)"}},
            }
            messages = [{"role": "user", "content": f"What is {i} * 3?"},
                        {"role": "assistant", "content": None, "tool_calls": [call]},
                        {"role": "tool", "content": str(i * 3)},
                        {"role": "assistant", "content": f"The answer is {i * 3}."}]  # fmt: skip
            out.append({"messages": messages, "tools": tools})
        else:
            out.append({"messages": [{"role": "user", "content": f"Repeat {i}."},
                                     {"role": "assistant", "content": f"{i} {i} {i}"}]})  # fmt: skip
    return out


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _common(model_dir: Path, rows: Path, out: Path) -> list[str]:
    return [f"model.path={model_dir}", f'data.train_files=["{rows}"]', f"run.output_dir={out}", "run.name=sft",
            "optim.tokens_per_row=512", "optim.rows_per_step=2", "optim.learning_rate=1e-3",
            "eval.enabled=false", "telemetry.tensorboard=false", "data.heldout_share=0.1"]  # fmt: skip


def _sft(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXECRL, "sft", "--no-progress", *args], env=_env(), capture_output=True, text=True,
                          timeout=600)  # fmt: skip


def _metric_rows(run_dir: Path) -> list[dict[str, float]]:
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return [
        {k: v for k, v in r.items() if not k.startswith(("perf/", "time_s"))} for r in rows if "loss/sft" in r
    ]


@pytest.mark.slow
def test_bad_rows_are_named_by_file_and_line_and_refused_or_counted(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    bad = ['{"messages": [{"role": "user", "content": "hi"}]}', "{not json",
           {"messages": [{"role": "wizard", "content": "x"}, {"role": "assistant", "content": "y"}]},
           {"messages": [{"role": "user", "content": "x"},
                         {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": 3}}]},
                         {"role": "tool", "content": "1"}, {"role": "assistant", "content": "z"}]},
           {"messages": [{"role": "user", "content": "long " * 600}, {"role": "assistant", "content": "y"}]}]  # fmt: skip
    rows = _write(tmp_path / "rows.jsonl", [*_rows(6), *bad])
    out = tmp_path / "out"
    refused = _sft(*_common(tiny_model_dir, rows, out))
    assert refused.returncode == 2 and not out.exists()
    [line] = refused.stderr.strip().splitlines()[-1:]
    assert line.startswith("error: 5 of 11 training rows are bad") and f"{rows}:7: " in line
    assert "no assistant turn" in line and f"{rows}:8: invalid JSON" in line and "(and 2 more)" in line
    done = _sft(*_common(tiny_model_dir, rows, out), "data.max_bad_share=0.5", "run.total_steps=2")
    assert done.returncode == 0, done.stdout + done.stderr
    [run_dir] = out.iterdir()
    report = json.loads((run_dir / "data.json").read_text())
    assert [b.split(": ", 1)[0] for b in report["bad_rows"]] == [f"{rows}:{n}" for n in range(7, 12)]
    reasons = " ".join(report["bad_rows"])
    for reason in (
        "unknown role 'wizard'",
        "malformed tool_calls: no function name",
        "more than a packed row",
    ):
        assert reason in reasons
    assert _metric_rows(run_dir)[0]["train/bad_rows"] == 5.0


def test_unreadable_input_is_one_error_line_and_nothing_written(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """In process: the rows are read before the model loads, so this costs no training."""
    from execrl.cli import main

    binary = tmp_path / "rows.jsonl"
    binary.write_bytes(b'{"messages": []}\n\x00\x01\x02\n')
    for path, message in ((tmp_path / "missing.jsonl", "not found"), (binary, "binary data")):
        out = tmp_path / f"out-{path.stem}"
        assert main(["sft", "--no-progress", *_common(tiny_model_dir, path, out)]) == 2 and not out.exists()
        [line] = capsys.readouterr().err.strip().splitlines()
        assert line.startswith(f"error: {path}") and message in line


@pytest.mark.slow
def test_sigkill_then_resume_equals_the_uninterrupted_run(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Guards the resume path of the real CLI: weights, AdamW moments, the LR schedule, the RNG and the
    data position (which packed rows the next step takes) all come back from the checkpoint."""
    rows = _write(tmp_path / "rows.jsonl", _rows(24))
    common = [*_common(tiny_model_dir, rows, tmp_path), "run.total_steps=5", "checkpoint.every_steps=1",
              "checkpoint.keep_last=6", "optim.warmup_steps=1"]  # fmt: skip
    straight = _sft(*common[:-3], f"run.output_dir={tmp_path / 'straight'}", *common[-3:])
    assert straight.returncode == 0, straight.stdout + straight.stderr
    killed_out = tmp_path / "killed"
    proc = subprocess.Popen([*EXECRL, "sft", "--no-progress", *common, f"run.output_dir={killed_out}"],
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    while not killed_out.exists() or not any(killed_out.iterdir()):
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.1)
    [killed_dir] = killed_out.iterdir()
    _wait_for_checkpoint(killed_dir, 1, proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    resumed = _sft("--resume", str(killed_dir))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    [straight_dir] = (tmp_path / "straight").iterdir()
    last = Path("checkpoints") / "step_000004" / "model.safetensors"
    a, b = load_file(straight_dir / last), load_file(killed_dir / last)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    rows_a, rows_b = _metric_rows(straight_dir), _metric_rows(killed_dir)
    assert [r["step"] for r in rows_b] == list(range(5)) and rows_a == rows_b
    assert rows_a[-1]["loss/sft"] < rows_a[0]["loss/sft"]


@pytest.mark.slow
def test_a_run_evaluates_before_and_after_and_reports(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    """The run directory of execrl train: config.toml, metrics.jsonl, checkpoints, the held-out loss with
    its paired interval, the suite evaluation before and after, report.md."""
    rows = _write(tmp_path / "rows.jsonl", _rows(12))
    toy = [o for o in toy_overrides(tiny_model_dir, toy_tasks_file, tmp_path)
           if o.split("=")[0] in ("tasks.eval_suites", "tasks.eval_tasks_per_suite", "reward.verifiers",
                                  "rollout.eval_max_new_tokens")]  # fmt: skip
    args = [o for o in _common(tiny_model_dir, rows, tmp_path / "out") if o != "eval.enabled=false"]
    done = _sft(*args, *toy, "run.total_steps=2", "eval.samples_per_task=2", "data.heldout_share=0.25")
    assert done.returncode == 0, done.stdout + done.stderr
    [run_dir] = (tmp_path / "out").iterdir()
    for name in ("config.toml", "metrics.jsonl", "data.json", "report.md", "eval/base.json", "eval/trained.json",
                 "eval/comparison.json", "eval/heldout_comparison.json", "checkpoints/step_000001"):  # fmt: skip
        assert (run_dir / name).exists(), name
    heldout = json.loads((run_dir / "eval" / "heldout_comparison.json").read_text())["heldout"]
    assert heldout["n_tasks"] == 3 and heldout["delta"]["loss"]["value"] < 0
    report = (run_dir / "report.md").read_text()
    assert "heldout" in report and "toy" in report
    from execrl.serve.export import resolve_model_source  # eval, export and serve take the run directory

    source = resolve_model_source(str(run_dir))
    assert source.checkpoint == run_dir / "checkpoints" / "step_000001" and source.base_dir == tiny_model_dir


@pytest.mark.slow
def test_tool_transcripts_train_and_evaluate_with_tool_episodes(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The path of the staged tools run: ``execrl tasks transcripts`` rows (python_block calls at render
    time), trained by ``execrl sft``, the held-out evaluation run as tool episodes (``eval/tools_*``)."""
    from execrl.tasks import load_suite, save_tasks

    rows = tmp_path / "tools-train.jsonl"
    made = subprocess.run([*EXECRL, "tasks", "transcripts", "tools", "--split", "train", "--limit", "6",
                           "--out", str(rows)], env=_env(), capture_output=True, text=True, timeout=600)  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    held_out = tmp_path / "held_out.jsonl"
    save_tasks(load_suite("tools", "test")[:2], str(held_out))
    args = [a for a in _common(tiny_model_dir, rows, tmp_path / "out") if a != "eval.enabled=false"]
    done = _sft(*args, "run.total_steps=1", "tools.enabled=true", "tools.call_format=python_block",
                f'tasks.eval_suites=["{held_out}"]', "eval.samples_per_task=2", "tools.max_turn_tokens=8",
                "tools.max_episode_tokens=24", "tools.max_tool_calls=2")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    [run_dir] = (tmp_path / "out").iterdir()
    comparison = json.loads((run_dir / "eval" / "tools_comparison.json").read_text())
    [suite] = comparison
    assert comparison[suite]["n_tasks"] == 2 and "hidden_pass_rate" in comparison[suite]["delta"]
    assert json.loads((run_dir / "data.json").read_text())["train_rows"] == 5  # one of six held out
