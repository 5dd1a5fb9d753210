"""Runs whose directory lives on an fsspec URL (``s3://``, ``gs://``, ``memory://`` in tests, any local path).

    execrl train run.output_dir=s3://bucket/runs                 # needs the s3 extra: pip install execrl[s3]
    execrl train --resume s3://bucket/runs/grpo-smollm2-20261201-031500

Why a mirror and not fsspec calls all through the loop: checkpoints rely on an atomic directory rename
(``trainer/checkpoint.py``) and telemetry appends to files; object stores have neither. So the run works
in a local staging directory exactly as before, and ``RunMirror`` copies it to the URL every
``interval_s`` from a background thread (checkpoints, metrics, reports: only new or changed files) and
once more when the run ends, also when it fails. A checkpoint is uploaded file by file with its ``meta.json`` last,
so a remote checkpoint without ``meta.json`` is incomplete and is never downloaded; checkpoints pruned
locally (``checkpoint.keep_last``) are removed remotely too. ``download_run`` fetches a run for
``--resume``.

Hostile or careless URLs (issue 24, class 5): a remote key that would land outside the local run
directory (``../``, an absolute path, ``.``) is refused before anything is written; ``file://`` URLs are
plain local paths (:func:`local_path`), never mirrored; the staging copy is removed once the final sync
succeeded (a failed final sync keeps it, and says where: it is then the only copy).

Limits: a driver killed outright (SIGKILL, a lost node) loses what was written since the last sync, at
most ``interval_s`` of progress; the remote checkpoint it resumes from is always complete, and
telemetry drops the metrics after that checkpoint on resume, as for a local run. Single writer
per run URL, as for local runs. Datasets on URLs need nothing from here: task files are read through
fsspec already (``execrl.tasks.storage``).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit

log = logging.getLogger("execrl.remote")

CHECKPOINTS = "checkpoints"
COMPLETE_MARKER = "meta.json"  # written last to a remote checkpoint: its presence means complete


def is_url(path: str | Path) -> bool:
    """True for ``scheme://...`` other than ``file://`` (those go through ``RunMirror``; ``file://`` is a
    local path, see :func:`local_path`)."""
    text = str(path)
    return "://" in text and not text.startswith("file://")


def local_path(path: str) -> str:
    """``file:///tmp/x`` (or ``file://localhost/tmp/x``) as ``/tmp/x``; any other text unchanged. A
    ``file://`` URL naming another host is refused (it was created as ``./file:/...`` in the working
    directory)."""
    if not path.startswith("file://"):
        return path
    parts = urlsplit(path)
    if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
        raise ValueError(f"{path}: a file:// URL must name a local path (file:///abs/path), not a host")
    if not parts.path:
        raise ValueError(f"{path}: a file:// URL without a path")
    return unquote(parts.path)


def _filesystem(url: str) -> tuple[Any, str]:
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(url)
    except ImportError as exc:  # e.g. s3:// without s3fs
        raise ValueError(f"{url}: {exc}; for s3:// install the extra: pip install 'execrl[s3]'") from exc
    return fs, root.rstrip("/")


def staging_root() -> Path:
    """A fresh local directory for one invocation's runs (under the system temp directory)."""
    return Path(tempfile.mkdtemp(prefix="execrl-staging-"))


def _local_files(root: Path) -> list[Path]:
    """Files under ``root`` to mirror; checkpoint partials (``.tmp-``/``.old-``) are skipped."""
    return sorted(
        p for p in root.rglob("*") if p.is_file() and not any(".tmp-" in s or ".old-" in s for s in p.parts)
    )


class RunMirror:
    """Copies the local directory ``local_root`` to ``url`` (same relative layout); see the module doc."""

    def __init__(
        self, local_root: Path, url: str, *, interval_s: float = 10.0, remove_local: bool = False
    ) -> None:
        """``remove_local``: delete ``local_root`` (a staging directory) after the final sync succeeds."""
        self.local_root = local_root
        self.remove_local = remove_local
        self.url = url.rstrip("/")
        self.fs, self.remote_root = _filesystem(self.url)
        self.interval_s = interval_s
        self._uploaded: dict[Path, tuple[int, int]] = {}  # file -> (size, mtime_ns) when last copied
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sync(self) -> int:
        """Copy new or changed files, checkpoint markers last; drop remote checkpoints pruned here.
        Returns how many files were copied."""
        with self._lock:
            files = _local_files(self.local_root)
            markers = [p for p in files if p.name == COMPLETE_MARKER and CHECKPOINTS in p.parts]
            copied = sum(self._put(p) for p in files if p not in markers)
            copied += sum(self._put(p) for p in markers)
            self._prune_checkpoints()
            return copied

    def _put(self, path: Path) -> bool:
        stat = path.stat()
        signature = (stat.st_size, stat.st_mtime_ns)
        if self._uploaded.get(path) == signature:
            return False
        target = f"{self.remote_root}/{path.relative_to(self.local_root).as_posix()}"
        self.fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
        self.fs.put_file(str(path), target)
        self._uploaded[path] = signature
        return True

    def _prune_checkpoints(self) -> None:
        for run_dir in (p for p in self.local_root.iterdir() if p.is_dir()):
            remote = f"{self.remote_root}/{run_dir.name}/{CHECKPOINTS}"
            if not self.fs.exists(remote):
                continue
            local = {p.name for p in (run_dir / CHECKPOINTS).glob("step_*")}
            for entry in self.fs.ls(remote, detail=False):
                name = entry.rstrip("/").rsplit("/", 1)[-1]
                if name.startswith("step_") and name not in local:
                    self.fs.rm(entry, recursive=True)
                    self._uploaded = {k: v for k, v in self._uploaded.items() if name not in k.parts}

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sync()

    def __enter__(self) -> RunMirror:
        self._thread = threading.Thread(target=self._loop, name="execrl-mirror", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.sync()  # also after a failure: what was written locally reaches the URL
        except BaseException:
            log.error("the final sync to %s failed; the run stays in %s", self.url, self.local_root)
            raise
        log.info("run mirrored to %s", self.url)
        if self.remove_local:
            shutil.rmtree(self.local_root, ignore_errors=True)

    def remote(self, local: Path) -> str:
        """The URL of ``local`` (a path under ``local_root``)."""
        return f"{self.url}/{local.relative_to(self.local_root).as_posix()}"


def _inside(run_dir: Path, relative: str, url: str) -> Path:
    """``run_dir / relative`` when it stays inside ``run_dir``; a key with ``..``, ``.``, an empty
    component or an absolute path is refused (it would write outside the staging directory)."""
    parts = relative.split("/")
    target = run_dir.joinpath(*parts)
    if any(p in ("", ".", "..") for p in parts) or not target.resolve().is_relative_to(run_dir.resolve()):
        raise ValueError(
            f"--resume {url}: remote key {relative!r} leaves the run directory; nothing is resumed"
        )
    return target


def download_run(url: str, local_root: Path) -> Path:
    """Fetch the run at ``url`` into ``local_root/<run name>``; incomplete checkpoints are left out, and a
    key that would land outside ``local_root/<run name>`` is refused before anything is written."""
    fs, root = _filesystem(url)
    name = root.rsplit("/", 1)[-1]
    if name in ("", ".", ".."):
        raise ValueError(f"--resume {url}: the URL must end in the run directory's name")
    if not fs.exists(f"{root}/config.toml"):
        raise ValueError(f"--resume {url}: no config.toml there (not an execrl run directory)")
    run_dir = local_root / name
    keys = [(remote, remote[len(root) :].lstrip("/")) for remote in fs.find(root)]
    targets = [_inside(run_dir, relative, url) for _, relative in keys]  # all checked before any write
    for (remote, relative), target in zip(keys, targets, strict=True):
        parts = relative.split("/")
        if (
            len(parts) >= 3
            and parts[0] == CHECKPOINTS
            and not fs.exists(f"{root}/{'/'.join(parts[:2])}/{COMPLETE_MARKER}")
        ):
            continue  # a checkpoint whose upload did not finish
        target.parent.mkdir(parents=True, exist_ok=True)
        fs.get_file(remote, str(target))
    return run_dir


def parent_url(url: str) -> str:
    """``s3://b/runs/name`` -> ``s3://b/runs`` (where a resumed run's mirror writes back)."""
    return url.rstrip("/").rsplit("/", 1)[0]
