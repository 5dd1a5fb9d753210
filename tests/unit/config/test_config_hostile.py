"""Hostile config values fail at load, naming the key; the resolved config.toml round-trips any Unicode.

Regressions (issue 14): an emoji in ``run.name`` was written to config.toml as a JSON surrogate-pair
escape that TOML rejects, so ``--resume`` failed (class 7); an invalid webhook URL, an infinite timeout,
a memory limit above the sandbox's maximum, a NaN penalty or an unknown suite passed ``--print-config``
and failed only after the model had loaded (class 8).
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import execrl
from execrl.config import ConfigError, load_config, to_toml, validate_config

SRC = str(Path(execrl.__file__).resolve().parents[1])  # the execrl under test, for subprocesses


def _every_code_point() -> list[str]:
    """All of Unicode except the surrogates (not text), in 1,000-character strings."""
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    return ["".join(chars[i : i + 1000]) for i in range(0, len(chars), 1000)]


def test_resolved_config_round_trips_every_code_point() -> None:
    chunks = _every_code_point()
    verifiers = {f"k{i}{chunk[:50]}": chunk for i, chunk in enumerate(chunks)}
    config = validate_config(
        {"run": {"name": 'grpo 🚀 naïve "q" \\ é\t中文'}, "reward": {"verifiers": verifiers}}
    )
    text = to_toml(config)
    assert "\\ud83d" not in text  # no JSON surrogate-pair escapes
    assert validate_config(tomllib.loads(text)) == config


def test_resume_reads_back_a_run_named_with_an_emoji(tmp_path: Path) -> None:
    """The real command: ``execrl train --resume RUN_DIR --print-config`` reads the run's config.toml."""
    config = load_config(None, ['run.name="grpo-🚀-run"'])
    (tmp_path / "config.toml").write_text(to_toml(config), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "execrl.cli", "train", "--resume", str(tmp_path), "--print-config"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert 'name = "grpo-🚀-run"' in proc.stdout


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ('telemetry.webhook_url="ftp://host/hook"', "telemetry.webhook_url"),
        ('telemetry.webhook_url="not a url"', "telemetry.webhook_url"),
        ("sandbox.timeout_s=inf", "sandbox.timeout_s"),
        ("sandbox.timeout_s=1e9", "sandbox.timeout_s"),
        ("sandbox.memory_mb=1000000", "sandbox.memory_mb"),
        ("reward.no_code_penalty=nan", "reward.no_code_penalty"),
        ("optim.learning_rate=inf", "optim.learning_rate"),
        ("tasks.suites={nosuch=1.0}", "tasks.suites"),
        ('tasks.eval_suites=["nosuch"]', "tasks.eval_suites"),
        ("tasks.suites={humaneval=1.0}", "tasks.suites"),  # eval-only: no train split
        ('sandbox.backend="dockr"', "sandbox.backend"),
        ('run.name="../escape"', "run.name"),
        ('run.name=""', "run.name"),
        ('telemetry.alarms=[{name="x", kind="bogus", metric="loss/*", threshold=1}]', "telemetry.alarms"),
        (
            'telemetry.alarms=[{name="x", kind="nonfinite", metric="loss/*", action="webhook"}]',
            "telemetry.alarms",
        ),
    ],
)
def test_bad_values_fail_at_load_naming_the_key(override: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    message = str(info.value)
    assert f"{key}: " in message and f"set it as {key}=VALUE" in message
    assert "\n" not in message  # one problem, one line


def test_print_config_refuses_before_any_model_loads() -> None:
    """``--print-config`` is where a user checks a config: it must exit 2 on the bad value, one line."""
    proc = subprocess.run(
        [sys.executable, "-m", "execrl.cli", "train", "--print-config", "sandbox.memory_mb=1000000"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "sandbox.memory_mb" in proc.stderr


def test_registered_task_file_paths_are_not_suite_names(tmp_path: Path) -> None:
    config = load_config(None, [f'tasks.suites={{"{tmp_path}/tasks.jsonl"=1.0}}'])
    assert list(config.tasks.suites) == [f"{tmp_path}/tasks.jsonl"]
