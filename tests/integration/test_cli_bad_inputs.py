"""Every CLI command that reads a file or directory, given a missing, binary, empty, directory or deeply
nested input, exits 2 with one line naming the file (and the line where there is one): no traceback.

Regression (issue 14, class 9): non-UTF-8 files, deep nesting and directory paths gave tracebacks and
exit 1 in ``execrl tasks``, ``execrl rewards score`` (also ``--timeout-s 0``), config loading and
``execrl compare``; an empty task file "passed" ``tasks check`` with 0 tasks.

Commands run in-process through ``execrl.cli.main`` (a subprocess per case would cost a minute of CPU);
an exception escaping ``main`` fails the case with its traceback. For commands that take a directory
(``train --resume``, ``compare``, ``eval --model``, ``monitor``) the bad input is the file inside it
that the command reads (config.toml, metrics.jsonl, config.json), or the directory itself when missing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from execrl.cli import main

KINDS = ("missing", "binary", "empty", "directory", "nested")
BINARY = bytes(range(256)) * 4  # a NUL byte and invalid UTF-8 on line 1
NESTED = "[" * 100_000 + "]" * 100_000


def _bad_file(path: Path, kind: str, *, toml: bool = False) -> Path:
    """``path`` made into the bad input ``kind`` (a missing path is left absent)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "binary":
        path.write_bytes(BINARY)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "directory":
        path.mkdir()
    elif kind == "nested":
        path.write_text(f"a = {NESTED.replace('][', '],[')}\n" if toml else NESTED + "\n")
    return path


def _good_run(root: Path) -> Path:
    run = root / "good-run"
    run.mkdir(parents=True, exist_ok=True)
    (run / "metrics.jsonl").write_text(json.dumps({"step": 0, "time_s": 0.0, "reward/mean": 0.5}) + "\n")
    return run


def _completions(root: Path) -> Path:
    path = root / "completions.jsonl"
    path.write_text(json.dumps({"task_id": "x", "completion": "y"}) + "\n")
    return path


# name -> (build the bad input under tmp and return (argv, the path the error must name), kinds)
Case = Callable[[Path, str], tuple[list[str], Path]]


def _file_arg(template: list[str], suffix: str = ".jsonl") -> Case:
    def make(tmp: Path, kind: str) -> tuple[list[str], Path]:
        bad = _bad_file(tmp / f"input{suffix}", kind, toml=suffix == ".toml")
        return [a.replace("{bad}", str(bad)).replace("{tmp}", str(tmp)) for a in template], bad

    return make


def _dir_arg(template: list[str], inner: str, *, toml: bool = False) -> Case:
    """A directory argument whose ``inner`` file is the bad input (the directory is missing for 'missing')."""

    def make(tmp: Path, kind: str) -> tuple[list[str], Path]:
        run = tmp / "run-dir"
        named = run
        if kind != "missing":
            named = _bad_file(run / inner, kind, toml=toml)
        argv = [a.replace("{bad}", str(run)).replace("{good}", str(_good_run(tmp))) for a in template]
        return argv, named

    return make


def _completions_case(tmp: Path, kind: str) -> tuple[list[str], Path]:
    bad = _bad_file(tmp / "completions.jsonl", kind)
    return ["rewards", "score", "--suite", "functions", "--completions", str(bad)], bad


def _score_suite_file(tmp: Path, kind: str) -> tuple[list[str], Path]:
    bad = _bad_file(tmp / "tasks.jsonl", kind)
    return ["rewards", "score", "--suite", str(bad), "--completions", str(_completions(tmp))], bad


COMMANDS: dict[str, Case] = {
    "tasks check": _file_arg(["tasks", "check", "{bad}"]),
    "tasks check .json": _file_arg(["tasks", "check", "{bad}"], ".json"),
    "tasks check .jsonl.gz": _file_arg(["tasks", "check", "{bad}"], ".jsonl.gz"),
    "tasks overlap SUITE": _file_arg(["tasks", "overlap", "{bad}", "--against", "humaneval"]),
    "tasks overlap --against": _file_arg(["tasks", "overlap", "math", "--against", "{bad}"]),
    **{
        f"tasks import {fmt}": _file_arg(["tasks", "import", fmt, "{bad}", "{tmp}/out.jsonl"])
        for fmt in ("apps", "codecontests", "livecodebench", "mbpp", "mbpp_plus", "sandboxfusion")
    },
    "tasks import sandboxfusion .json": _file_arg(
        ["tasks", "import", "sandboxfusion", "{bad}", "{tmp}/out.jsonl"], ".json"
    ),
    "rewards score --completions": _completions_case,
    "rewards score --suite FILE": _score_suite_file,
    "train --config": _file_arg(["train", "--config", "{bad}", "--print-config"], ".toml"),
    "train --resume": _dir_arg(["train", "--resume", "{bad}", "--print-config"], "config.toml", toml=True),
    "compare RUN_A": _dir_arg(["compare", "{bad}", "{good}", "--out", "{good}/cmp"], "metrics.jsonl"),
    "compare RUN_B": _dir_arg(["compare", "{good}", "{bad}", "--out", "{good}/cmp"], "metrics.jsonl"),
    "eval --model": _dir_arg(["eval", "--model", "{bad}", "--suite", "functions"], "config.json"),
    "eval --as-run": _dir_arg(["eval", "--model", "m", "--as-run", "{bad}"], "config.toml", toml=True),
    "sandbox run PROGRAM": _file_arg(["sandbox", "run", "{bad}", "--language", "python"], ".py"),
    "sandbox run --stdin": _file_arg(["sandbox", "run", "{tmp}/ok.py", "--stdin", "{bad}"], ".txt"),
    "sandbox run --tests": _file_arg(["sandbox", "run", "{tmp}/ok.py", "--tests", "{bad}"], ".json"),
}

# src/execrl/sandbox/ belongs to the sandbox-server half of issue 14 (another branch): its CLI still
# runs an empty tests file as "no tests", and a deeply nested tests file raises RecursionError there.
SANDBOX_OWNED: dict[tuple[str, str], str] = {}  # cases known to fail, each with its reason (none left)
# A program and its stdin are the data under test, not structured input: empty or bracket-nested
# ones are run and get a verdict (exit 0 or 1), which is right.
NOT_INPUT_ERRORS = {("sandbox run PROGRAM", k) for k in ("empty", "nested")} | {
    ("sandbox run --stdin", k) for k in ("empty", "nested")
}


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


CASES = [(c, k) for c in COMMANDS for k in KINDS if (c, k) not in NOT_INPUT_ERRORS]


@pytest.mark.parametrize(("command", "kind"), CASES)
def test_bad_input_exits_2_with_one_line_naming_the_file(
    command: str,
    kind: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    if (command, kind) in SANDBOX_OWNED:
        request.applymarker(pytest.mark.xfail(reason=SANDBOX_OWNED[(command, kind)], strict=True))
    (tmp_path / "ok.py").write_text("print(1)\n")
    argv, named = COMMANDS[command](tmp_path, kind)
    code, err = _run(argv, capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(named) in lines[0] or os.path.basename(named) in lines[0], lines[0]
    if kind == "binary" and not command.startswith("sandbox"):
        assert f"{named}:1:" in lines[0]  # the line of the first bad byte


@pytest.mark.parametrize("kind", ["missing", "binary"])
def test_monitor_refuses_what_is_not_a_run_directory(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``monitor`` serves until stopped, so only the inputs it must refuse at once are walked: an empty
    run directory (or one whose files are bad) is served, showing skipped lines as the run writes."""
    bad = _bad_file(tmp_path / "run", kind)
    code, err = _run(["monitor", str(bad), "--port", "0"], capsys)
    assert code == 2 and str(bad) in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["rewards", "score", "--suite", "functions", "--completions", "c.jsonl", "--timeout-s", "0"],
        ["rewards", "score", "--suite", "functions", "--completions", "c.jsonl", "--timeout-s", "nan"],
        ["tasks", "check", "functions", "--limit", "0"],
        ["tasks", "overlap", "functions", "--threshold", "inf"],
        ["eval", "--model", "m", "--suite", "functions", "--limit", "-1"],
        ["serve", "--model", "m", "--max-n", "0"],
        ["serve", "--model", "m", "--max-queued-tokens", "many"],
    ],
)
def test_bad_numbers_are_argument_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(argv, capsys)
    assert code == 2 and "error: argument" in err.strip().splitlines()[-1]


# -- issue 24: export, model directories, refine show, run URLs ------------------------------------------
# Regression (issue 24, classes 2-5): each case below gave a traceback (or, worse, success) on the branch
# point: export through a file or a symlink target, deleting an unrelated `OUT.tmp-export`, checkpoints of
# another shape or truncated; --model directories whose config asks for 13.8 GB, whose weights hold 1 of
# the model's tensors (loaded with the rest random), whose tokenizer is broken or which need remote code;
# refine show on malformed rows; --resume from a URL whose keys leave the run directory.


def _one_line_naming(code: int, err: str, named: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert named in lines[0], lines[0]
    assert "Traceback" not in err
    return lines[0]


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if ".tmp-export" in p.name or ".old-export" in p.name)


def _copy_model(tiny_model_dir: Path, dest: Path) -> Path:
    import shutil

    shutil.copytree(tiny_model_dir, dest)
    return dest


@pytest.mark.parametrize("kind", ["file", "symlink", "empty directory", "directory --force"])
def test_export_refuses_a_target_that_exists(
    kind: str, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The target is never written through, replaced or deleted unless it is an earlier export (--force)."""
    target = tmp_path / "out"
    if kind == "file":
        target.write_text("mine")
    elif kind == "symlink":
        (tmp_path / "elsewhere").mkdir()
        target.symlink_to(tmp_path / "elsewhere")
    else:
        target.mkdir()
        if "force" in kind:
            (target / "mine.txt").write_text("mine")
    unrelated = tmp_path / "out.tmp-export"  # a directory named like the old temporary one
    unrelated.mkdir()
    (unrelated / "keep.txt").write_text("keep")
    argv = ["export", str(tiny_model_dir), str(target), *(["--force"] if "force" in kind else [])]
    _one_line_naming(*_run(argv, capsys), str(target))
    assert (unrelated / "keep.txt").read_text() == "keep"
    if kind == "symlink":
        assert target.is_symlink() and not any((tmp_path / "elsewhere").iterdir())
    elif kind == "file":
        assert target.read_text() == "mine"
    elif kind == "empty directory":  # it was exported into before
        assert target.is_dir() and not any(target.iterdir())
    else:
        assert (target / "mine.txt").read_text() == "mine"
    assert _leftovers(tmp_path) == ["out.tmp-export"]


def test_export_force_replaces_only_an_earlier_export(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "out"
    assert _run(["export", str(tiny_model_dir), str(target)], capsys)[0] == 0
    assert (target / "execrl-export.json").is_file()
    (target / "stale.txt").write_text("from before")
    assert _run(["export", str(tiny_model_dir), str(target)], capsys)[0] == 2  # no --force
    assert _run(["export", str(tiny_model_dir), str(target), "--force"], capsys)[0] == 0
    assert not (target / "stale.txt").exists() and (target / "model.safetensors").is_file()
    assert _leftovers(tmp_path) == []


def _run_dir_with_checkpoint(tiny_model_dir: Path, root: Path, weights: Callable[[Path], None]) -> Path:
    from execrl.config import load_config, to_toml

    run = root / "run"
    step = run / "checkpoints" / "step_000001"
    step.mkdir(parents=True)
    (run / "config.toml").write_text(
        to_toml(load_config(None, [f"model.path={json.dumps(str(tiny_model_dir))}"]))
    )
    (step / "trainer_state.pt").write_bytes(b"unused")
    weights(step / "model.safetensors")
    return run


def _other_shape(path: Path) -> None:
    import safetensors.torch

    from execrl.rollout.models import tiny_model

    safetensors.torch.save_model(tiny_model(hidden_size=32), str(path))


@pytest.mark.parametrize("kind", ["truncated", "not-tensors", "other-shape"])
def test_export_refuses_a_bad_checkpoint_before_loading(
    kind: str, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A checkpoint of another shape, truncated weights or a text file named model.safetensors: one line
    naming the file, and no temporary directory left behind."""
    real = (tiny_model_dir / "model.safetensors").read_bytes()
    writers: dict[str, Callable[[Path], None]] = {
        "truncated": lambda p: p.write_bytes(real[: len(real) // 2]),
        "not-tensors": lambda p: p.write_text("this is not a tensor file\n"),
        "other-shape": _other_shape,
    }
    run = _run_dir_with_checkpoint(tiny_model_dir, tmp_path, writers[kind])
    line = _one_line_naming(*_run(["export", str(run), str(tmp_path / "out")], capsys), "model.safetensors")
    assert ("shape" in line) == (kind == "other-shape"), line
    assert not (tmp_path / "out").exists() and _leftovers(tmp_path) == []


def _huge_config(model: Path) -> str:
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "vocab_size": 3_000_000, "hidden_size": 4608}))
    return "vocab_size=3000000"  # 13.8e9 parameters from a 1 KB file


def _one_tensor(model: Path) -> str:
    import safetensors.torch

    tensors = safetensors.torch.load_file(str(model / "model.safetensors"))
    first = sorted(tensors)[0]
    safetensors.torch.save_file({first: tensors[first]}, str(model / "model.safetensors"))
    return "model.safetensors"


def _broken_tokenizer(model: Path) -> str:
    (model / "tokenizer.json").write_bytes((model / "tokenizer.json").read_bytes()[:1000])
    return "tokenizer.json"


def _remote_code(model: Path) -> str:
    config = json.loads((model / "config.json").read_text())
    config.update(model_type="evil", auto_map={"AutoModelForCausalLM": "evil.Model"})
    (model / "config.json").write_text(json.dumps(config))
    (model / "evil.py").write_text(f"open({str(model / 'ran')!r}, 'w').write('ran')\n")
    return "trust_remote_code=False"


MODEL_DIR_PROBLEMS: dict[str, Callable[[Path], str]] = {
    "huge config": _huge_config,
    "1 tensor of the model's": _one_tensor,
    "broken tokenizer.json": _broken_tokenizer,
    "remote code": _remote_code,
}
MODEL_COMMANDS = {
    "eval": ["eval", "--model", "{model}", "--suite", "functions", "--limit", "1"],
    "serve": ["serve", "--model", "{model}", "--port", "0"],
    "export": ["export", "{model}", "{tmp}/exported"],
}


@pytest.mark.parametrize("problem", list(MODEL_DIR_PROBLEMS))
@pytest.mark.parametrize("command", list(MODEL_COMMANDS))
def test_model_directories_are_checked_before_loading(
    command: str, problem: str, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _copy_model(tiny_model_dir, tmp_path / "model")
    named = MODEL_DIR_PROBLEMS[problem](model)
    argv = [a.replace("{model}", str(model)).replace("{tmp}", str(tmp_path)) for a in MODEL_COMMANDS[command]]
    _one_line_naming(*_run(argv, capsys), named)
    assert not (model / "ran").exists(), "code from the model directory ran"
    assert not (tmp_path / "exported").exists()


def test_refine_show_skips_malformed_rows_and_escapes_terminal_control(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = {"condition": "refine", "task_id": "t/\x1b]52;c;cm0gLXJmIH4=\x07", "turn": 1, "completion": "x"}
    good |= {
        "code": "print('\x1b[2J\x1b[31mowned')",
        "feedback": "got: \x9b6n",
        "visible_reason": "wrong\x1b[0m",
    }
    rows = [json.dumps(good), "{not json", json.dumps([1]), json.dumps({**good, "turn": "1"}), "\udcff"]
    trace = tmp_path / "t.trace.jsonl"
    trace.write_bytes("\n".join(rows).encode("utf-8", "surrogateescape") + b"\n\xff\xfe\n")
    code = main(["refine", "show", str(trace)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "skipped 5 malformed rows" in err and "lines 2, 3, 4, 5, 6" in err
    assert not any(c in out for c in "\x1b\x07\x9b"), repr(out)
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in out  # shown, not sent to the terminal
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(BINARY)
    _one_line_naming(*_run(["refine", "show", str(binary)], capsys), str(binary))


def test_resume_from_a_url_refuses_keys_that_leave_the_run_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile
    import uuid

    import fsspec

    root = f"/h24-{uuid.uuid4().hex}"
    fs = fsspec.filesystem("memory")
    fs.pipe(f"{root}/runs/run/config.toml", b"[run]\n")
    fs.pipe(f"{root}/runs/run/../../../escaped.txt", b"written outside the staging directory")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # staging_root() uses the temp directory
    _one_line_naming(
        *_run(["train", "--resume", f"memory://{root}/runs/run"], capsys), "leaves the run directory"
    )
    assert list(tmp_path.rglob("escaped.txt")) == [] and list(tmp_path.iterdir()) == []  # staging removed


def test_file_urls_are_local_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--resume file:///abs`` reads the local directory (it was looked up as ./file:/abs)."""
    missing = tmp_path / "no-such-run"
    _one_line_naming(
        *_run(["train", "--resume", f"file://{missing}", "--print-config"], capsys), str(missing)
    )
    from execrl.config import load_config, to_toml

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.toml").write_text(to_toml(load_config(None, ["run.total_steps=7"])))
    code = main(["train", "--resume", f"file://{run}", "--print-config"])
    assert code == 0 and "total_steps = 7" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--max-n", "65"], "max_n"),
        (["--max-tokens", "4096"], "max_request_tokens"),
        (["--short-request-tokens", "0"], "short-request-tokens"),
        (["--shutdown-timeout-s", "nan"], "shutdown-timeout-s"),
    ],
)
def test_serve_settings_are_checked_before_the_model_loads(
    flags: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server's caps are validated first: one line naming the setting, and no model is loaded (the
    --model given does not exist)."""
    code, err = _run(["serve", "--model", "/nonexistent/model", *flags], capsys)
    assert code == 2 and named in err.strip().splitlines()[-1], err
