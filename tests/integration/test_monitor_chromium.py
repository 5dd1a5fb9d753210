"""The monitor page in a real headless Chromium: it renders charts, and updates while the run goes.

Two checks: (1) the command-line screenshot the issue describes, decoded and checked for drawn charts
(series colour, alarm colour, many colours, not blank); (2) a live session driven over the DevTools
protocol: the page shows step 19, we append steps 20..34 and an alarm to the files, and the *same* page
(no reload) shows step 34 and the new alarm within a few polls, with no JavaScript errors.
"""

import asyncio
import base64
import io
import json
import math
import shutil
import subprocess
import time
from pathlib import Path

import aiohttp
import numpy as np
import pytest
from PIL import Image

from execrl.telemetry.alarms import AlarmRule
from execrl.telemetry.monitor import start_monitor_in_thread
from execrl.telemetry.records import encode_line
from execrl.telemetry.run import RunTelemetry

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs /usr/bin/chromium (install with `scripts/setup.sh --system`)"
    ),
]
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
]
SERIES_BLUE = (59, 111, 216)  # --c1 in the light theme
ALARM_RED = (229, 72, 77)  # --alarm in the light theme


def metrics_at(step):
    return {
        "reward/mean": 0.1 + 0.6 * (1 - math.exp(-step / 10)) + 0.03 * math.sin(step),
        "reward/pass_rate": 0.05 + 0.5 * (1 - math.exp(-step / 12)),
        "loss/total": math.nan if step == 12 else 0.5 * math.exp(-step / 15),
        "kl/mean": 0.004 * step,
        "entropy/mean": 1.2 - 0.02 * step,
        "perf/tokens_per_s": 1500 + 40 * math.cos(step),
    }


@pytest.fixture
def run_dir(tmp_path):
    run = tmp_path / "run-chromium"
    rules = [AlarmRule("loss_nan", "nonfinite", "loss/*", action="stop")]
    with RunTelemetry(run, rules=rules, tensorboard=False) as tel:
        for step in range(20):
            tel.log(step, metrics_at(step))
    return run


def count_near(pixels, color, tol=40):
    return int((np.abs(pixels - np.array(color)).sum(axis=-1) <= tol).sum())


def check_png(data):
    image = Image.open(io.BytesIO(data)).convert("RGB")
    assert image.size == (1280, 900)
    pixels = np.asarray(image).astype(np.int32)  # [H, W, 3]
    flat = pixels.reshape(-1, 3)
    colours = len(np.unique(flat, axis=0))
    values, counts = np.unique(flat, axis=0, return_counts=True)
    background = values[counts.argmax()]
    non_bg = float((np.abs(flat - background).sum(axis=-1) > 0).mean())
    blue = count_near(pixels, SERIES_BLUE)
    red = count_near(pixels, ALARM_RED)
    assert colours > 200, f"only {colours} colours: blank or unstyled page"
    assert non_bg > 0.05, f"only {non_bg:.1%} of pixels differ from the background"
    assert blue > 500, f"series lines not drawn ({blue} blue pixels)"
    assert red > 20, f"alarm markers not drawn ({red} red pixels)"
    return {"colours": colours, "non_bg": non_bg, "blue": blue, "red": red}


def test_screenshot_shows_charts(run_dir, tmp_path):
    handle = start_monitor_in_thread(run_dir)
    png = tmp_path / "monitor.png"
    try:
        cmd = [str(CHROMIUM), *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000"]
        subprocess.run([*cmd, f"--screenshot={png}", handle.url], capture_output=True, timeout=60, check=True)
        dom = subprocess.run([*cmd, "--dump-dom", handle.url], capture_output=True, timeout=60, check=True)
    finally:
        handle.close()
    stats = check_png(png.read_bytes())
    print("screenshot", stats)
    html = dom.stdout.decode()
    assert '<b id="last-step">19</b>' in html
    assert "loss_nan" in html  # the alarm list shows the NaN alarm


class DevTools:
    """Just enough of the Chrome DevTools protocol: send a command, wait for its answer, keep events."""

    def __init__(self, ws):
        self.ws, self.next_id, self.events = ws, 0, []

    async def call(self, method, **params):
        self.next_id += 1
        await self.ws.send_json({"id": self.next_id, "method": method, "params": params})
        while True:
            msg = await asyncio.wait_for(self.ws.receive_json(), timeout=20)
            if msg.get("id") == self.next_id:
                assert "error" not in msg, msg
                return msg["result"]
            self.events.append(msg)

    async def evaluate(self, expression):
        # before the page has loaded the element may be missing: that evaluates to undefined, not a failure
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    async def wait_for(self, expression, expected, timeout_s=15.0):
        deadline = time.monotonic() + timeout_s
        value = None
        while time.monotonic() < deadline:
            value = await self.evaluate(expression)
            if value == expected:
                return
            await asyncio.sleep(0.2)
        raise AssertionError(f"{expression} stayed {value!r}, expected {expected!r}")


def devtools_port(profile, proc):
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and proc.poll() is None:
        if port_file.exists() and port_file.read_text().strip():
            return int(port_file.read_text().splitlines()[0])
        time.sleep(0.1)
    raise AssertionError(f"chromium did not open a DevTools port (exit code {proc.poll()})")


def append_more(run):
    with (run / "metrics.jsonl").open("a") as fh:
        for step in range(20, 35):
            fh.write(encode_line(step, float(step), metrics_at(step)) + "\n")
    alarm = {"run": run.name, "step": 30, "rule": "kl_high", "metric": "kl/mean", "action": "log"}
    with (run / "alarms.jsonl").open("a") as fh:
        fh.write(json.dumps({**alarm, "message": "kl_high: kl/mean above 0.1 (step 30)"}) + "\n")


async def live_session(url, port, run):
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/json/list") as resp:
            targets = await resp.json(content_type=None)
        page = next(t for t in targets if t["type"] == "page")
        async with session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            cdp = DevTools(ws)
            await cdp.call("Runtime.enable")
            await cdp.call(
                "Emulation.setDeviceMetricsOverride",
                width=1280,
                height=900,
                deviceScaleFactor=1,
                mobile=False,
            )
            await cdp.call("Page.navigate", url=url)
            await cdp.wait_for("document.getElementById('last-step')?.textContent", "19")
            before = (await cdp.call("Page.captureScreenshot", format="png"))["data"]
            append_more(run)
            await cdp.wait_for("document.getElementById('last-step')?.textContent", "34")
            await cdp.wait_for("document.querySelectorAll('#alarm-list li:not(.none)').length", 2)
            await asyncio.sleep(0.3)
            after = (await cdp.call("Page.captureScreenshot", format="png"))["data"]
            errors = [e for e in cdp.events if e.get("method") == "Runtime.exceptionThrown"]
            return base64.b64decode(before), base64.b64decode(after), errors


def test_page_updates_live_without_reload(run_dir, tmp_path):
    handle = start_monitor_in_thread(run_dir)
    profile = tmp_path / "profile-live"
    proc = subprocess.Popen(
        [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        before, after, errors = asyncio.run(live_session(handle.url, devtools_port(profile, proc), run_dir))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        handle.close()
        shutil.rmtree(profile, ignore_errors=True)
    assert errors == [], errors
    (tmp_path / "live_after.png").write_bytes(after)
    check_png(after)
    assert before != after
