"""A NaN loss fires the alarm, and a real local HTTP server receives the webhook POST."""

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from execrl.telemetry.alarms import AlarmRule
from execrl.telemetry.run import RunTelemetry
from execrl.telemetry.webhook import WebhookConfig


@pytest.fixture
def hook_server():
    received = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server API)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers["Content-Type"], json.loads(body)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/alarms", received
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_nan_loss_posts_payload_and_requests_stop(tmp_path, hook_server):
    url, received = hook_server
    rules = [
        AlarmRule("loss_nan", "nonfinite", "loss/*", action="stop"),
        AlarmRule("loss_nan_hook", "nonfinite", "loss/*", action="webhook"),
    ]
    run_dir = tmp_path / "run-nan"
    history = [{"loss/total": 0.9}, {"loss/total": 0.7}, {"loss/total": math.nan}, {"loss/total": math.nan}]
    decisions = []
    with RunTelemetry(
        run_dir, rules=rules, webhook=WebhookConfig(url=url, timeout_s=5.0), tensorboard=False
    ) as tel:
        for step, metrics in enumerate(history):
            decisions.append(tel.log(step, metrics))
    assert [d.stop_requested for d in decisions] == [False, False, True, False]
    # Both rules post (a "stop" alarm is delivered too when a webhook is configured), once per episode:
    # step 3 is the same NaN episode.
    assert sorted(r[2]["rule"] for r in received) == ["loss_nan", "loss_nan_hook"]
    path, content_type, payload = next(r for r in received if r[2]["rule"] == "loss_nan_hook")
    assert path == "/alarms" and content_type == "application/json"
    assert payload["run"] == "run-nan" and payload["step"] == 2
    assert payload["rule"] == "loss_nan_hook" and payload["metric"] == "loss/total"
    assert payload["value"] is None and payload["value_text"] == "nan"
    assert payload["threshold"] == 0.0
    assert payload["message"] == "loss_nan_hook: loss/total = nan is not finite (step 2)"
