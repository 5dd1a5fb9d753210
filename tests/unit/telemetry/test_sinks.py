import json
import math
import sys

import pytest

from execrl.telemetry.reader import merge_rows, read_metrics
from execrl.telemetry.records import decode_line, encode_line
from execrl.telemetry.sinks import (
    JsonlSink,
    MetricLogger,
    MetricSink,
    MlflowSink,
    TensorBoardSink,
    open_run_logger,
)


class ListSink:
    def __init__(self):
        self.calls = []
        self.closed = False

    def log(self, step, metrics):
        self.calls.append((step, dict(metrics)))

    def close(self):
        self.closed = True


def test_jsonl_line_is_strict_json_with_nonfinite_map():
    line = encode_line(3, 1.5, {"loss/total": math.nan, "reward/mean": 0.25, "kl/mean": -math.inf})
    obj = json.loads(line)  # strict: no bare NaN tokens
    assert "NaN" not in line.replace('"NaN"', "")
    assert obj["loss/total"] is None and obj["reward/mean"] == 0.25
    assert obj["nonfinite"] == {"loss/total": "NaN", "kl/mean": "-Infinity"}
    row = decode_line(line)
    assert row.step == 3 and row.time_s == 1.5
    assert math.isnan(row.metrics["loss/total"]) and row.metrics["kl/mean"] == -math.inf


def test_jsonl_sink_writes_and_flushes_each_step(tmp_path):
    sink = JsonlSink(tmp_path)
    sink.log(0, {"reward/mean": 0.1})
    # readable before close: flushed per step for the live monitor
    assert [r.metrics for r in read_metrics(tmp_path)] == [{"reward/mean": 0.1}]
    sink.log(1, {"reward/mean": 0.2})
    sink.close()
    rows = read_metrics(tmp_path)
    assert [r.step for r in rows] == [0, 1]
    assert rows[1].time_s >= rows[0].time_s >= 0.0


def test_jsonl_sink_refuses_to_mix_two_runs(tmp_path):
    first = JsonlSink(tmp_path)
    first.log(0, {"reward/mean": 0.1})
    first.close()
    with pytest.raises(FileExistsError, match="resume_from_step"):
        JsonlSink(tmp_path)


def test_jsonl_resume_truncates_later_steps_and_does_not_duplicate(tmp_path):
    sink = JsonlSink(tmp_path)
    for step in range(5):
        sink.log(step, {"reward/mean": float(step)})
    sink.close()
    with (tmp_path / "metrics.jsonl").open("a") as fh:
        fh.write('{"step": 5, "reward/m')  # torn line from a crash
    resumed = JsonlSink(tmp_path, resume_from_step=2)
    resumed.log(3, {"reward/mean": 30.0})
    resumed.close()
    rows = read_metrics(tmp_path)
    assert [r.step for r in rows] == [0, 1, 2, 3]
    assert rows[-1].metrics["reward/mean"] == 30.0


def test_jsonl_steps_must_not_go_back(tmp_path):
    sink = JsonlSink(tmp_path)
    sink.log(4, {"reward/mean": 1.0})
    sink.log(4, {"eval/pass@1": 0.5})  # same step, second group of metrics: allowed
    with pytest.raises(ValueError, match="before the last logged step 4"):
        sink.log(3, {"reward/mean": 1.0})
    sink.close()
    merged = merge_rows(read_metrics(tmp_path))
    assert len(merged) == 1 and merged[0].metrics == {"reward/mean": 1.0, "eval/pass@1": 0.5}


def test_logger_fans_out_and_converts_numbers():
    a, b = ListSink(), ListSink()
    assert isinstance(a, MetricSink)
    with MetricLogger([a, b]) as logger:
        logger.log(2, {"reward/mean": 1, "loss/policy": 0.5})
    assert a.calls == b.calls == [(2, {"reward/mean": 1.0, "loss/policy": 0.5})]
    assert a.closed and b.closed


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("reward", "must look like '<namespace>/<name>'"),
        ("foo/bar", "unknown namespace 'foo'"),
        ("loss/ x", "must look"),
    ],
)
def test_logger_rejects_unnamespaced_names(name, message):
    with pytest.raises(ValueError, match=message):
        MetricLogger([ListSink()]).log(0, {name: 1.0})


def test_logger_rejects_non_numbers_naming_the_metric():
    with pytest.raises(TypeError, match="metric 'reward/mean' must be a number"):
        MetricLogger([ListSink()]).log(0, {"reward/mean": "high"})


def test_tensorboard_sink_writes_readable_scalars(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    sink = TensorBoardSink(tmp_path)
    sink.log(0, {"reward/mean": 0.5})
    sink.log(1, {"reward/mean": 0.75, "loss/total": math.nan})
    sink.close()
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("reward/mean")] == [(0, 0.5), (1, 0.75)]
    assert math.isnan(acc.Scalars("loss/total")[0].value)


def test_mlflow_sink_missing_package_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow -> ImportError
    with pytest.raises(ImportError, match=r"pip install 'execrl\[mlflow\]'"):
        MlflowSink()


def test_open_run_logger_makes_jsonl_and_tensorboard(tmp_path):
    with open_run_logger(tmp_path) as logger:
        logger.log(0, {"perf/tokens_per_s": 100.0})
    assert (tmp_path / "metrics.jsonl").exists()
    assert any((tmp_path / "tb").iterdir())


def test_tensorboard_resume_purges_later_steps(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    first = TensorBoardSink(tmp_path)
    for step in range(5):
        first.log(step, {"reward/mean": float(step)})
    first.close()
    resumed = TensorBoardSink(tmp_path, resume_from_step=2)
    resumed.log(3, {"reward/mean": 30.0})
    resumed.close()
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("reward/mean")] == [
        (0, 0.0),
        (1, 1.0),
        (2, 2.0),
        (3, 30.0),
    ]
