"""Metric sinks behind one small interface, and the logger that fans out to them.

Every run writes ``run_dir/metrics.jsonl`` (the source of truth: the monitor, the alarms and the report
read it) and TensorBoard event files under ``run_dir/tb/`` (the standard viewer). MLflow is optional and
imported only when asked for. Names are validated once, in ``MetricLogger``: a sink receives clean
``{namespace/name: float}`` maps.

Limits: sinks are not thread-safe; call them from the training loop's thread.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

from execrl.telemetry.records import decode_line, encode_line, to_float, validate_metric_name

__all__ = ["JsonlSink", "MetricLogger", "MetricSink", "MlflowSink", "TensorBoardSink", "open_run_logger"]

_log = logging.getLogger(__name__)


@runtime_checkable
class MetricSink(Protocol):
    """Anything that records ``{name: value}`` at an integer step."""

    def log(self, step: int, metrics: Mapping[str, float]) -> None: ...

    def close(self) -> None: ...


def _kept_lines(path: Path, resume_from_step: int) -> tuple[list[str], float]:
    """Lines with step <= resume_from_step (a torn last line is dropped) and the last kept time_s."""
    kept: list[str] = []
    last_time_s = 0.0
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start}), cannot resume") from None
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = decode_line(line)
        except ValueError as exc:
            if lineno == len(lines):  # the process died mid-write
                _log.warning("%s:%d: dropping torn last line on resume", path, lineno)
                continue
            raise ValueError(f"{path}:{lineno}: malformed metrics line, cannot resume: {exc}") from exc
        if row.step <= resume_from_step:
            kept.append(line)
            last_time_s = max(last_time_s, row.time_s)
    return kept, last_time_s


class JsonlSink:
    """``run_dir/metrics.jsonl``, one strict-JSON object per call, flushed at once for live readers.

    A new run refuses to append to an existing non-empty file (two runs in one file would interleave);
    ``resume_from_step=k`` keeps lines with step <= k, drops the rest, and continues ``time_s`` from there,
    so a resumed run never duplicates a step.
    """

    def __init__(self, run_dir: str | Path, *, resume_from_step: int | None = None) -> None:
        self.path = Path(run_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        time_offset_s = 0.0
        self._last_step = -1
        if resume_from_step is not None:
            if self.path.exists():
                kept, time_offset_s = _kept_lines(self.path, resume_from_step)
                tmp = self.path.with_suffix(".jsonl.tmp")
                tmp.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
                os.replace(tmp, self.path)
            self._last_step = resume_from_step
        elif self.path.exists() and self.path.stat().st_size > 0:
            raise FileExistsError(
                f"{self.path} already has metrics; pass resume_from_step=<last checkpoint step> to resume "
                "this run, or use a fresh run directory"
            )
        self._t0 = time.monotonic() - time_offset_s
        self._fh = self.path.open("a", encoding="utf-8")

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        if step < self._last_step:
            raise ValueError(
                f"step {step} is before the last logged step {self._last_step}; steps must not go back"
            )
        self._last_step = step
        self._fh.write(encode_line(step, time.monotonic() - self._t0, metrics) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()


class TensorBoardSink:
    """TensorBoard scalars under ``run_dir/tb/`` written with tensorboard's own event writer (no torch).

    On resume it writes a SessionLog START at ``resume_from_step + 1``, which tells TensorBoard to purge
    events with larger steps from the earlier session (the mechanism behind SummaryWriter's purge_step).
    """

    def __init__(self, run_dir: str | Path, *, resume_from_step: int | None = None) -> None:
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._event_cls: Any = Event
        self._summary_cls: Any = Summary
        self.log_dir = Path(run_dir) / "tb"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._writer = EventFileWriter(str(self.log_dir), flush_secs=5)
        if resume_from_step is not None:
            start = SessionLog(status=SessionLog.START)
            self._writer.add_event(Event(wall_time=time.time(), step=resume_from_step + 1, session_log=start))

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        values = [self._summary_cls.Value(tag=name, simple_value=value) for name, value in metrics.items()]
        event = self._event_cls(wall_time=time.time(), step=step, summary=self._summary_cls(value=values))
        self._writer.add_event(event)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class MlflowSink:
    """MLflow metrics, for teams that already run a tracking server. Needs ``pip install 'execrl[mlflow]'``."""

    def __init__(
        self, *, experiment: str | None = None, run_name: str | None = None, tracking_uri: str | None = None
    ) -> None:
        try:
            import mlflow
        except ImportError as exc:
            raise ImportError(
                "the MLflow sink was requested but mlflow is not installed; "
                "run `pip install 'execrl[mlflow]'` or turn the mlflow sink off in the [telemetry] config"
            ) from exc
        self._mlflow: Any = mlflow
        if tracking_uri:
            mlflow.set_tracking_uri(tracking_uri)
        if experiment:
            mlflow.set_experiment(experiment)
        self._run = mlflow.start_run(run_name=run_name)

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        self._mlflow.log_metrics(dict(metrics), step=step)

    def close(self) -> None:
        self._mlflow.end_run()


class MetricLogger:
    """Validates metric names and values once, then sends every ``log`` call to all sinks.

    Names must be ``<namespace>/<name>`` with a known namespace (see ``records.METRIC_NAMESPACES``), so
    plots, alarms and dashboards can group them. Non-finite values are passed through (they are what the
    alarms look for); the JSONL sink records them as described in ``records``.
    """

    def __init__(self, sinks: Sequence[MetricSink]) -> None:
        self.sinks = list(sinks)

    def log(self, step: int, metrics: Mapping[str, object]) -> dict[str, float]:
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise ValueError(f"step must be a non-negative int, got {step!r}")
        clean: dict[str, float] = {}
        for name, value in metrics.items():
            validate_metric_name(name)
            clean[name] = to_float(name, value)
        if clean:
            for sink in self.sinks:
                sink.log(step, clean)
        return clean

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()

    def __enter__(self) -> MetricLogger:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def open_run_logger(
    run_dir: str | Path,
    *,
    resume_from_step: int | None = None,
    tensorboard: bool = True,
    mlflow: bool = False,
    mlflow_experiment: str | None = None,
) -> MetricLogger:
    """The standard sinks for a run directory: JSONL always, TensorBoard by default, MLflow on request."""
    sinks: list[MetricSink] = [JsonlSink(run_dir, resume_from_step=resume_from_step)]
    if tensorboard:
        sinks.append(TensorBoardSink(run_dir, resume_from_step=resume_from_step))
    if mlflow:
        sinks.append(MlflowSink(experiment=mlflow_experiment, run_name=Path(run_dir).name))
    return MetricLogger(sinks)
