"""``RunMirror`` and ``download_run`` on fsspec's ``memory://``: what is copied, in which order, what is
left out (partial checkpoints), what is pruned."""

from __future__ import annotations

import uuid
from pathlib import Path

import fsspec
import pytest

from execrl.recipes.remote import RunMirror, download_run, is_url, local_path, parent_url


def _url() -> str:
    return f"memory://mirror-{uuid.uuid4().hex}"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_sync_copies_new_and_changed_files_once_and_skips_partials(tmp_path: Path) -> None:
    url = _url()
    _write(tmp_path / "run" / "config.toml", "a")
    _write(tmp_path / "run" / "checkpoints" / "step_000001" / "model.safetensors", "w")
    _write(tmp_path / "run" / "checkpoints" / "step_000001" / "meta.json", "{}")
    _write(tmp_path / "run" / "checkpoints" / "step_000002.tmp-x1" / "model.safetensors", "partial")
    mirror = RunMirror(tmp_path, url)
    assert mirror.sync() == 3
    assert mirror.sync() == 0  # nothing changed
    _write(tmp_path / "run" / "metrics.jsonl", "{}\n")
    assert mirror.sync() == 1
    fs = fsspec.filesystem("memory")
    root = url.removeprefix("memory://")
    assert not fs.exists(f"{root}/run/checkpoints/step_000002.tmp-x1")
    assert fs.cat(f"{root}/run/checkpoints/step_000001/model.safetensors") == b"w"


def test_checkpoints_pruned_locally_are_removed_remotely(tmp_path: Path) -> None:
    url = _url()
    for step in (1, 2):
        _write(tmp_path / "run" / "checkpoints" / f"step_00000{step}" / "meta.json", "{}")
    mirror = RunMirror(tmp_path, url)
    mirror.sync()
    (tmp_path / "run" / "checkpoints" / "step_000001" / "meta.json").unlink()
    (tmp_path / "run" / "checkpoints" / "step_000001").rmdir()
    mirror.sync()
    names = [
        p.rsplit("/", 1)[-1]
        for p in fsspec.filesystem("memory").ls(f"{url[9:]}/run/checkpoints", detail=False)
    ]
    assert names == ["step_000002"]


def test_download_leaves_out_a_checkpoint_whose_upload_did_not_finish(tmp_path: Path) -> None:
    """A driver killed mid-upload leaves a remote checkpoint without meta.json (uploaded last); resuming
    from it would load a torn checkpoint."""
    url = _url()
    fs = fsspec.filesystem("memory")
    root = url.removeprefix("memory://")
    fs.pipe(f"{root}/run/config.toml", b"x")
    fs.pipe(f"{root}/run/checkpoints/step_000001/model.safetensors", b"ok")
    fs.pipe(f"{root}/run/checkpoints/step_000001/meta.json", b"{}")
    fs.pipe(f"{root}/run/checkpoints/step_000002/model.safetensors", b"torn")
    run_dir = download_run(f"{url}/run", tmp_path)
    assert run_dir == tmp_path / "run"
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step_000001"]
    assert (run_dir / "config.toml").read_text() == "x"


def test_download_of_something_that_is_not_a_run_names_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no config.toml"):
        download_run(f"{_url()}/nothing", tmp_path)


def test_urls_and_parents() -> None:
    assert is_url("s3://b/runs") and is_url("memory://x")
    assert not is_url("runs/x") and not is_url("file:///tmp/x")
    assert parent_url("s3://b/runs/name/") == "s3://b/runs"


# -- issue 24, class 5 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["../../escaped.txt", "checkpoints/../../x", "./config.toml", "a//b"])
def test_download_refuses_a_key_that_leaves_the_run_directory(tmp_path: Path, key: str) -> None:
    """Regression: --resume from a URL wrote outside its staging directory when a remote key held '../'.
    Nothing at all is written when one key is bad."""
    fs = fsspec.filesystem("memory")
    root = _url().removeprefix("memory://")
    fs.pipe(f"{root}/run/config.toml", b"[run]\n")
    fs.pipe(f"{root}/run/metrics.jsonl", b"{}\n")
    fs.pipe(f"{root}/run/{key}", b"hostile")
    staging = tmp_path / "staging"
    staging.mkdir()
    with pytest.raises(ValueError, match="leaves the run directory"):
        download_run(f"memory://{root}/run", staging)
    assert list(tmp_path.rglob("*")) == [staging]


def test_download_refuses_a_url_that_names_no_run(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="end in the run directory's name"):
        download_run("memory://somewhere/runs/..", tmp_path)


def test_file_urls_are_local_paths() -> None:
    """Regression: run.output_dir=file:///tmp/x created ./file:/tmp/x in the working directory."""
    assert local_path("file:///tmp/x") == "/tmp/x" and local_path("file://localhost/tmp/a%20b") == "/tmp/a b"
    assert local_path("runs/x") == "runs/x" and not is_url("file:///tmp/x")
    with pytest.raises(ValueError, match="not a host"):
        local_path("file://otherhost/tmp/x")


def test_stage_output_turns_a_file_url_into_its_path() -> None:
    from contextlib import ExitStack

    from execrl.config import load_config
    from execrl.recipes.cli import _stage_output

    with ExitStack() as stack:
        config = _stage_output(load_config(None, ["run.output_dir=file:///tmp/h24-runs"]), stack, [])
    assert config.run.output_dir == "/tmp/h24-runs"


def test_staging_is_removed_after_the_final_sync_and_kept_when_it_fails(tmp_path: Path) -> None:
    """Regression: URL runs left a full staging copy (1.6 GB) in /tmp. It goes once the URL has
    everything; when the final sync fails the staging copy is the only one and stays."""
    staged = tmp_path / "staging"
    _write(staged / "run" / "config.toml", "a")
    url = _url()
    with RunMirror(staged, url, remove_local=True) as mirror:
        _write(staged / "run" / "metrics.jsonl", "{}\n")
    assert not staged.exists()
    assert fsspec.filesystem("memory").cat(f"{url.removeprefix('memory://')}/run/metrics.jsonl") == b"{}\n"
    assert mirror.remote(staged / "run") == f"{url}/run"
    kept = tmp_path / "kept"
    _write(kept / "run" / "config.toml", "a")
    failing = RunMirror(kept, _url(), remove_local=True)
    failing.sync = lambda: (_ for _ in ()).throw(OSError("the bucket is gone"))  # type: ignore[method-assign]
    with pytest.raises(OSError, match="bucket is gone"), failing:
        pass
    assert (kept / "run" / "config.toml").exists()
