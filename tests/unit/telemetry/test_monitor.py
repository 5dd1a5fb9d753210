import argparse
import json
import urllib.error
import urllib.request

import pytest

from execrl.telemetry.cli import register
from execrl.telemetry.monitor import MonitorState, start_monitor_in_thread
from execrl.telemetry.records import encode_line
from execrl.telemetry.sinks import JsonlSink


def append(run_dir, text):
    with (run_dir / "metrics.jsonl").open("a") as fh:
        fh.write(text)


def test_state_reads_incrementally_and_merges_same_step(tmp_path):
    state = MonitorState(tmp_path)
    state.refresh()  # no file yet: empty, no error
    assert state.snapshot(-1)["rows"] == []
    append(
        tmp_path, encode_line(0, 0.1, {"reward/mean": 0.5}) + "\n" + encode_line(1, 0.2, {"reward/mean": 0.6})
    )
    state.refresh()  # step 1 has no newline yet: not consumed
    assert [r["step"] for r in state.snapshot(-1)["rows"]] == [0]
    append(tmp_path, "\n" + encode_line(1, 0.3, {"eval/pass@1": float("nan")}) + "\n")
    state.refresh()
    rows = state.snapshot(0)["rows"]
    assert rows == [
        {
            "step": 1,
            "time_s": 0.3,
            "reward/mean": 0.6,
            "eval/pass@1": None,
            "nonfinite": {"eval/pass@1": "NaN"},
        }
    ]


def test_state_starts_over_when_resume_rewrites_the_file(tmp_path):
    sink = JsonlSink(tmp_path)
    for step in range(4):
        sink.log(step, {"reward/mean": float(step)})
    sink.close()
    state = MonitorState(tmp_path)
    state.refresh()
    assert state.snapshot(-1)["generation"] == 0
    JsonlSink(tmp_path, resume_from_step=1).close()
    state.refresh()
    snap = state.snapshot(-1)
    assert snap["generation"] == 1 and [r["step"] for r in snap["rows"]] == [0, 1]


def test_state_skips_malformed_lines_and_counts_them(tmp_path):
    append(tmp_path, "not json\n" + encode_line(0, 0.0, {"loss/total": 1.0}) + "\n")
    state = MonitorState(tmp_path)
    state.refresh()
    snap = state.snapshot(-1)
    assert snap["skipped_lines"] == 1 and len(snap["rows"]) == 1


def get(url):
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.headers["Content-Type"], response.read()


def test_http_endpoints(tmp_path):
    (tmp_path / "config.toml").write_text("[train]\nsteps = 3\n")
    append(tmp_path, encode_line(0, 0.0, {"reward/mean": 0.5}) + "\n")
    (tmp_path / "alarms.jsonl").write_text(json.dumps({"step": 0, "rule": "x", "message": "m"}) + "\n")
    handle = start_monitor_in_thread(tmp_path)
    try:
        status, ctype, body = get(handle.url)
        assert status == 200 and ctype.startswith("text/html") and b"monitor.js" in body
        assert get(handle.url + "charts.js")[1].startswith("application/javascript")
        data = json.loads(get(handle.url + "api/metrics?since=-1")[2])
        assert data["run"] == tmp_path.name and data["last_step"] == 0
        assert data["rows"][0]["reward/mean"] == 0.5 and data["alarms"][0]["rule"] == "x"
        assert json.loads(get(handle.url + "api/metrics?since=0")[2])["rows"] == []
        assert json.loads(get(handle.url + "api/info")[2])["config"].startswith("[train]")
        with pytest.raises(urllib.error.HTTPError, match="400"):
            get(handle.url + "api/metrics?since=abc")
    finally:
        handle.close()


def test_cli_registers_monitor_with_defaults():
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["monitor", "runs/a"])
    assert (args.run_dir, args.port, args.host) == ("runs/a", 8765, "127.0.0.1")
    assert args.func(argparse.Namespace(run_dir="/nonexistent/run", port=0, host="127.0.0.1")) == 2
