"""Refusals at the start of ``execrl train`` (and ``bench``): one ``error:`` line naming the key or file,
exit 2, no run directory left behind, the run to resume untouched (issue 35, class 12).

Regressions, each a traceback before: resuming a LoRA run with another ``lora.rank`` or with LoRA switched
off, from a checkpoint missing ``rng.pt`` or with a damaged ``trainer_state.pt`` or ``optimizer.pt``; a
``rollout.max_prompt_tokens`` no task fits, a ``rollout.max_new_tokens`` past the model's context and
length stages out of order (each also left a run directory behind: it was created first); an override
nested 3,000 deep (``RecursionError``). And 60,000 unknown keys printed 60,000 lines; ``bench ... --json
DIR`` failed after the benchmark had run.

Commands run in this process (``execrl.cli.main``) on the tiny model and the toy tasks of ``conftest.py``.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from toy_domain import toy_overrides

from execrl.cli import main

FAST = [
    "run.total_steps=1",
    "eval.enabled=false",
    "rollout.prompts_per_step=2",
    "rollout.samples_per_prompt=2",
]
LORA = ["lora.enabled=true", "lora.rank=4", "lora.alpha=8"]


def _one_error_line(capsys: pytest.CaptureFixture[str], *named: str) -> str:
    """The one line on stderr (transformers' own progress bar of loading the model aside)."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("Loading weights")]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert all(name in lines[0] for name in named), (named, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def lora_run(tiny_model_dir: Path, toy_tasks_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-step LoRA run with its checkpoint (the run every resume case starts from, copied)."""
    out = tmp_path_factory.mktemp("lora-run")
    assert (
        main(["train", "--no-progress", *toy_overrides(tiny_model_dir, toy_tasks_file, out), *FAST, *LORA])
        == 0
    )
    [run_dir] = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


def _garbage(name: str) -> Callable[[Path], None]:
    return lambda checkpoint: (checkpoint / name).write_bytes(b"not a torch file")


RESUMES: dict[str, tuple[list[str], Callable[[Path], None] | None, tuple[str, ...]]] = {
    # name -> (overrides, damage to the checkpoint, what the error line names)
    "other-rank": (["lora.rank=8"], None, ("adapter_model.safetensors", "lora.rank=4")),
    "lora-off": (["lora.enabled=false"], None, ("no model.safetensors", "lora.enabled=true")),
    "no-rng": ([], lambda c: (c / "rng.pt").unlink(), ("rng.pt", "missing")),
    "trainer-state": ([], _garbage("trainer_state.pt"), ("trainer_state.pt", "damaged")),
    "optimizer": ([], _garbage("optimizer.pt"), ("optimizer.pt", "damaged")),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(RESUMES))
def test_a_resume_that_cannot_continue_the_run_is_one_error_line(
    case: str, lora_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overrides, damage, named = RESUMES[case]
    run_dir = tmp_path / lora_run.name
    shutil.copytree(lora_run, run_dir)
    [checkpoint] = sorted((run_dir / "checkpoints").iterdir())
    if damage is not None:
        damage(checkpoint)
    before = sorted(p.relative_to(run_dir) for p in run_dir.rglob("*"))
    assert main(["train", "--no-progress", "--resume", str(run_dir), "run.total_steps=2", *overrides]) == 2
    _one_error_line(capsys, *named)
    assert sorted(p.relative_to(run_dir) for p in run_dir.rglob("*")) == before  # nothing written
    assert [p.name for p in tmp_path.iterdir()] == [run_dir.name]


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (["rollout.max_prompt_tokens=5"], ("at most 5 tokens", "rollout.max_prompt_tokens")),
        (["rollout.max_new_tokens=9000"], ("9000 new tokens", "rollout.max_new_tokens")),
        (["rollout.max_new_tokens_stages=[[5, 16], [2, 8]]"], ("rollout.max_new_tokens_stages", "increase")),
    ],
    ids=["prompt-cap-5", "max-new-tokens-9000", "stages-out-of-order"],
)
def test_a_refusal_at_start_leaves_no_run_directory(
    overrides: list[str],
    named: tuple[str, ...],
    tiny_model_dir: Path,
    toy_tasks_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "runs"
    argv = ["train", "--no-progress", *toy_overrides(tiny_model_dir, toy_tasks_file, out), *FAST, *overrides]
    assert main(argv) == 2
    _one_error_line(capsys, *named)
    assert not out.exists() or list(out.iterdir()) == [], list(out.iterdir())


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("a" + ".a" * 3000 + "=1", "3001 parts"),
        ("rollout.top_k=" + "[" * 3000 + "]" * 3000, "nests more than 32"),
        ("rollout.top_k=" + "[" * 500 + "]" * 500, "nests more than 32"),
    ],
    ids=["key-3000-deep", "value-3000-deep", "value-500-deep"],
)
def test_an_override_nested_deep_is_one_error_line(
    override: str, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", "--print-config", override]) == 2
    line = _one_error_line(capsys, named)
    assert len(line) < 400, line


def test_sixty_thousand_unknown_keys_are_listed_briefly(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--print-config", *[f"run.k{i}=1" for i in range(60_000)]]) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) <= 12 and "60000 problems" in lines[0] and "and 59990 more problems" in lines[-1], (
        lines[:3]
    )


def test_every_bench_checks_its_json_path_before_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--json DIR`` (and a path under a regular file) is refused before the benchmark runs, for every
    benchmark, by one check in ``bench/cli.py``. The benchmarks are replaced by a stand-in that records
    it was called, so the test never runs one."""
    import importlib

    from execrl.bench.cli import BENCHMARKS

    ran: list[str] = []

    def stand_in(name: str) -> Callable[[Any], int]:
        return lambda _args: ran.append(name) or 0

    for name, (module_name, _) in BENCHMARKS.items():
        monkeypatch.setattr(importlib.import_module(module_name), "run", stand_in(name))
    blocked = tmp_path / "file"
    blocked.write_text("x")
    for name in BENCHMARKS:
        for bad in (tmp_path, blocked / "out.json"):
            assert main(["bench", name, "--json", str(bad)]) == 2, name
            _one_error_line(capsys, str(bad))
    assert ran == []
    assert main(["bench", "scheduler", "--json", str(tmp_path / "new" / "out.json")]) == 0 and ran == [
        "scheduler"
    ]
