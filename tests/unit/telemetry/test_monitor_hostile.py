"""The monitor keeps every good row whatever else a metrics file holds (issue 14, class 6).

Regressions: the reader advanced its offset before parsing and caught only JSON and Unicode errors, so
one deeply nested line or a ``nonfinite`` value of the wrong type silently dropped every row of that
poll; a bare ``NaN`` was relayed as invalid JSON and the page stayed "disconnected"; a ``config.toml``
symlink was followed and served by ``/api/info``.
"""

from __future__ import annotations

import json
import math
import os
import urllib.request
from pathlib import Path

import pytest

from execrl.telemetry.monitor import MonitorState, start_monitor_in_thread
from execrl.telemetry.reader import JsonlTail
from execrl.telemetry.records import encode_line

HOSTILE_LINES = [
    "[" * 100_000 + "]" * 100_000,  # RecursionError in json.loads
    "[" * 300 + "]" * 300,  # parses, deeper than the monitor accepts
    '{"step": 5, "reward/mean": 1.0, "nonfinite": ["reward/mean"]}',  # wrong-typed nonfinite
    '{"step": 6, "reward/mean": 1.0, "nonfinite": {"reward/mean": 7}}',
    '{"step": 7, "reward/mean": "high"}',  # a metric that is not a number
    '{"step": true, "reward/mean": 1.0}',
    "NaN",
    "not json",
    "\udcff",  # becomes an invalid UTF-8 byte below
]


def _write(path: Path, lines: list[str]) -> None:
    with path.open("ab") as fh:
        for line in lines:
            fh.write(line.encode("utf-8", errors="surrogateescape") + b"\n")


def test_each_bad_line_costs_only_itself(tmp_path: Path) -> None:
    good = [encode_line(s, 0.1 * s, {"reward/mean": s / 10}) for s in range(3)]
    _write(
        tmp_path / "metrics.jsonl", [good[0], *HOSTILE_LINES, good[1], '{"step": 9, "loss/x": NaN}', good[2]]
    )
    state = MonitorState(tmp_path)
    state.refresh()
    snap = state.snapshot(-1)
    assert [r["step"] for r in snap["rows"]] == [0, 1, 2, 9]
    assert snap["skipped_lines"] == len(HOSTILE_LINES)
    assert snap["rows"][3] == {"step": 9, "loss/x": None, "nonfinite": {"loss/x": "NaN"}}
    json.dumps(snap, allow_nan=False)  # strict JSON: a browser's JSON.parse accepts it


def test_offset_moves_only_past_complete_lines(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    tail = JsonlTail(path)
    path.write_text(encode_line(0, 0.0, {"reward/mean": 1.0}) + "\n" + '{"step": 1, "rew')
    assert [r["step"] for r in tail.poll()] == [0]
    with path.open("a") as fh:
        fh.write('ard/mean": 2.0}\n')
    assert [r["step"] for r in tail.poll()] == [1] and tail.skipped_lines == 0


def test_a_line_longer_than_the_cap_is_skipped_in_pieces(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("execrl.telemetry.reader.MAX_LINE_BYTES", 1000)
    path = tmp_path / "metrics.jsonl"
    _write(path, ['{"step": 0, "x": "' + "a" * 5000 + '"}', encode_line(1, 0.0, {"reward/mean": 1.0})])
    tail = JsonlTail(path)
    assert [r["step"] for r in tail.poll()] == [1]
    assert tail.skipped_lines == 1 and tail.offset == path.stat().st_size


def test_nan_in_an_alarm_line_is_relayed_as_null(tmp_path: Path) -> None:
    (tmp_path / "alarms.jsonl").write_text('{"step": 0, "rule": "x", "value": NaN}\n')
    state = MonitorState(tmp_path)
    state.refresh()
    assert state.snapshot(-1)["alarms"] == [{"step": 0, "rule": "x", "value": None}]


def _get_json(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read(), parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))


def test_page_api_stays_strict_json_with_nan_lines(tmp_path: Path) -> None:
    _write(
        tmp_path / "metrics.jsonl", ['{"step": 0, "loss/x": NaN, "loss/y": -Infinity}', *HOSTILE_LINES[:3]]
    )
    handle = start_monitor_in_thread(tmp_path)
    try:
        data = _get_json(handle.url + "api/metrics?since=-1")
        assert data["rows"] == [
            {"step": 0, "loss/x": None, "loss/y": None, "nonfinite": {"loss/x": "NaN", "loss/y": "-Infinity"}}
        ]
        assert data["skipped_lines"] == 3
    finally:
        handle.close()


@pytest.mark.parametrize("kind", ["symlink", "directory", "fifo"])
def test_info_serves_config_only_from_a_regular_file(tmp_path: Path, kind: str) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("PRIVATE KEY")
    run = tmp_path / "run"
    run.mkdir()
    if kind == "symlink":
        (run / "config.toml").symlink_to(secret)
    elif kind == "directory":
        (run / "config.toml").mkdir()
    else:
        os.mkfifo(run / "config.toml")
    assert MonitorState(run).info()["config"] is None
    (run / "plain").mkdir()
    (run / "plain" / "config.toml").write_text("[run]\nname = 'x'\n")
    assert MonitorState(run / "plain").info()["config"] == "[run]\nname = 'x'\n"


def test_decode_of_bad_nonfinite_is_a_value_error() -> None:
    """``read_metrics`` (compare, report) names file and line for such a line instead of crashing."""
    from execrl.telemetry.records import decode_line

    with pytest.raises(ValueError, match="'nonfinite' must map"):
        decode_line('{"step": 1, "loss/x": null, "nonfinite": ["loss/x"]}')
    assert math.isnan(
        decode_line('{"step": 1, "loss/x": null, "nonfinite": {"loss/x": "NaN"}}').metrics["loss/x"]
    )


def test_resume_reports_bad_metrics_and_skips_bad_alarm_lines(tmp_path: Path) -> None:
    """Resuming rewrites both files: a deeply nested or non-object alarm line is dropped like a torn one
    (it was an AttributeError / RecursionError), a non-UTF-8 metrics file is a ValueError naming it."""
    from execrl.telemetry.run import RunTelemetry

    (tmp_path / "alarms.jsonl").write_text('{"step": 0, "rule": "a"}\n[1]\n' + "[" * 100_000 + "\n")
    (tmp_path / "metrics.jsonl").write_text(encode_line(0, 0.0, {"reward/mean": 1.0}) + "\n")
    with RunTelemetry(tmp_path, rules=[], tensorboard=False, resume_from_step=0):
        pass
    assert (tmp_path / "alarms.jsonl").read_text() == '{"step": 0, "rule": "a"}\n'
    (tmp_path / "metrics.jsonl").write_bytes(b'{"step": 0}\n\xff\n')
    with pytest.raises(ValueError, match="metrics.jsonl: not UTF-8 text"):
        RunTelemetry(tmp_path, rules=[], tensorboard=False, resume_from_step=0)
