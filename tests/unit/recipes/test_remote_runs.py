"""``RunMirror`` and ``download_run`` on fsspec's ``memory://``: what is copied, in which order, what is
left out (partial checkpoints), what is pruned."""

from __future__ import annotations

import uuid
from pathlib import Path

import fsspec
import pytest

from execrl.recipes.remote import RunMirror, download_run, is_url, parent_url


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
