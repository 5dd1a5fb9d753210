"""``execrl train --nproc N``: N trainer ranks on this machine, started by torch.distributed's launcher.

    execrl train --nproc 2                                   # 2 ranks here: gloo on CPU, NCCL on GPUs
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29400 \\
        -m execrl train trainer.strategy=fsdp                # the same run over nodes, as torchrun users know it

``--nproc`` runs ``torch.distributed.launcher.api.elastic_launch`` (what ``torchrun --standalone`` runs:
c10d rendezvous on a free local port, no restarts), one process per rank, each running ``python -m
execrl train`` with the same arguments and ``trainer.strategy=fsdp``. Rank 0 runs the recipe (rollout,
scoring, logging, the run directory, the report) and prints as a one-process run does; ranks 1..N-1
build their shards and follow rank 0's commands (``execrl.trainer.ranks``), printing nothing. Under
torchrun the launcher is torchrun's and every process runs ``execrl train`` itself; the run directory
must then be on a file system all nodes share (each rank writes its checkpoint shard there).

Failure: when a rank dies or exits non-zero the launcher stops the others and this command prints one
line naming the rank (rank 0's own errors are its ``error:`` line), and exits non-zero; a rank that
hangs makes the others' collectives time out (``trainer.collective_timeout_s``) and is named by rank 0.
The output of ranks 1..N-1 (warnings, a traceback) goes to log files whose path the error line prints.
Ctrl-C (SIGINT) to ``execrl train --nproc``: the launcher passes it to the ranks; rank 0 checkpoints after
its current step and stops as in one process, the others wait for its stop (a rank still running after
``trainer.collective_timeout_s`` is killed). SIGTERM stops every rank at once: ``--resume`` continues
from the last checkpoint. A launcher killed with SIGKILL takes its ranks with it.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from execrl.config import ConfigError, TrainConfig

if TYPE_CHECKING:
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

__all__ = [
    "check_nproc",
    "check_trainer",
    "exit_with_launcher",
    "launch_ranks",
    "note_rank_exit",
    "under_launcher",
]

_REPORTED = "rank0-reported"  # rank 0 printed its own error line (the launcher adds none)
_LOGS_ENV = "EXECRL_RANK_LOGS"  # the launcher's log directory, for rank 0's mark


def under_launcher() -> bool:
    """Whether this process is a rank started by a launcher (``--nproc``, torchrun, the Ray executor)."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def check_trainer(config: TrainConfig) -> None:
    """What the sharded trainer needs of this machine, checked before anything is written."""
    import torch

    if config.trainer.strategy == "fsdp" and config.trainer.cpu_offload and not torch.cuda.is_available():
        raise ConfigError(
            "trainer.cpu_offload=true needs GPUs: on CPU the parameters are in CPU memory already"
        )


def check_nproc(nproc: int, config: TrainConfig) -> None:
    """``--nproc`` must fit the machine: at most one rank per GPU, or per CPU core without GPUs."""
    import torch

    check_trainer(config)
    if nproc < 1:
        raise ConfigError(f"--nproc {nproc}: needs at least 1 rank")
    if torch.cuda.is_available():
        devices = torch.cuda.device_count()
        if nproc > devices:
            raise ConfigError(
                f"--nproc {nproc} exceeds the {devices} GPU(s) this machine sees (one rank per GPU)"
            )
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if nproc > cores:
        raise ConfigError(
            f"--nproc {nproc} exceeds this machine's {cores} CPU core(s) (one rank per core at most; each rank "
            "holds its shard and computes on its own cores)"
        )


_AGENT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def launch_ranks(nproc: int, argv: list[str], *, shutdown_timeout_s: float = 600.0) -> int:
    """Run ``python -m execrl train ARGV`` as ``nproc`` ranks (``elastic_launch``); returns the exit code.
    Ranks 1..N-1 write their output to log files (rank 0 owns the console)."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, SignalException, Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    for name in ("torch.distributed.elastic", "torch.distributed.launcher"):  # this module prints the errors
        logging.getLogger(name).setLevel(logging.CRITICAL)
    logs = Path(tempfile.mkdtemp(prefix="execrl-ranks-"))
    config = LaunchConfig(
        min_nodes=1, max_nodes=1, nproc_per_node=nproc, run_id=f"execrl-{uuid.uuid4().hex[:8]}",
        rdzv_backend="c10d", rdzv_endpoint="127.0.0.1:0", max_restarts=0, monitor_interval=0.5,
        shutdown_timeout=int(shutdown_timeout_s),
        logs_specs=DefaultLogsSpecs(log_dir=str(logs), redirects={r: Std.ALL for r in range(1, nproc)}),
    )  # fmt: skip
    os.environ[_LOGS_ENV] = str(logs)
    # The elastic agent installs its own SIGINT/SIGTERM/SIGHUP/SIGQUIT handlers and leaves them behind: a
    # later run in this process (a test, a notebook) would get torch's SignalException instead of Ctrl-C.
    saved = {sig: signal.getsignal(sig) for sig in _AGENT_SIGNALS}
    try:
        elastic_launch(config, sys.executable)("-m", "execrl", "train", *argv)
    except ChildFailedError as exc:
        return _report_failure(exc, logs)
    except SignalException as exc:  # Ctrl-C / SIGTERM: passed on to the ranks, which stopped after a step
        print(f"stopped by {exc.sigval.name}: rank 0 checkpointed after its current step", file=sys.stderr)
        return 130
    finally:
        os.environ.pop(_LOGS_ENV, None)
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    shutil.rmtree(logs, ignore_errors=True)
    return 0


def exit_with_launcher() -> None:
    """A rank of ``--nproc`` ends when its launcher does: the launcher starts the ranks in sessions of their
    own, so a launcher killed with SIGKILL would otherwise leave them running (a watchdog thread)."""
    if not os.environ.get(_LOGS_ENV):
        return
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="execrl-launcher-watchdog", daemon=True).start()


def note_rank_exit(code: int) -> None:
    """Rank 0 of ``--nproc`` ending with ``code``: a non-zero exit was reported on the console by rank 0
    itself (an ``error:`` line or a traceback), so the launcher adds no line of its own for rank 0."""
    logs = os.environ.get(_LOGS_ENV)
    if code != 0 and logs and os.environ.get("RANK") == "0":
        (Path(logs) / _REPORTED).write_text(str(code), encoding="utf-8")


def _report_failure(exc: ChildFailedError, logs: Path) -> int:
    """One line for the rank that failed first (none for rank 0 when it printed its own); the exit code."""
    rank, failure = exc.get_first_failure()
    code = failure.exitcode if failure.exitcode > 0 else 1
    reported = logs / _REPORTED
    if reported.is_file() and (rank == 0 or failure.exitcode > 0):  # rank 0 printed the error (a bad
        return int(reported.read_text(encoding="utf-8") or code)  # checkpoint fails every rank alike)
    what = f"died ({failure.signal_name()})" if failure.exitcode < 0 else f"exited with {failure.exitcode}"
    found = sorted(logs.glob(f"*/attempt_*/{rank}/stderr.log"))
    lines = [x for x in found[0].read_text(errors="replace").splitlines() if x.strip()] if found else []
    detail = f": {lines[-1].strip()}" if lines and failure.exitcode > 0 else ""  # its error's last line
    print(f"error: trainer rank {rank} {what}{detail}", file=sys.stderr)
    if found:
        print(f"  rank {rank}'s output: {found[0]}", file=sys.stderr)
    return code
