"""The AI-feedback reward (``rewards/judge.py``): verdicts parsed, invalid replies masked and counted (never
a 0 or a 1), the cache, the combination with an execution verifier, and the HTTP call's bounds."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from execrl.rewards import RewardConfig, get_verifier, score_batch
from execrl.rewards.judge import Judge, JudgedVerifier, JudgeSettings, parse_verdict
from execrl.rewards.judge_http import ChatReply, JudgeHTTPError, chat_reply
from execrl.rewards.registry import register_verifier, unregister_verifier
from execrl.tasks.schema import MathSpec, Task, TaskMetadata

TASK = Task(id="m/0", domain="math", prompt="What is 6 * 7?", spec=MathSpec(answer="42"),
            metadata=TaskMetadata(family="m"))  # fmt: skip


class Scripted:
    """A judge endpoint in-process: replies ``reply(nonce)`` (or raises), recording every request."""

    def __init__(self, reply: Any) -> None:
        self.reply, self.bodies = reply, []

    def __call__(self, body: Mapping[str, Any]) -> ChatReply:
        self.bodies.append(body)
        nonce = body["messages"][0]["content"].split("`VERDICT ")[1].split(":")[0]
        out = self.reply(nonce)
        if isinstance(out, Exception):
            raise out
        return out if isinstance(out, ChatReply) else ChatReply(out, "stop")


def _judge(reply: Any) -> tuple[Judge, Scripted]:
    client = Scripted(reply)
    return Judge(JudgeSettings(base_url="http://judge.invalid/v1", model="j"), client=client), client


def test_a_verdict_line_with_the_requests_nonce_is_the_score() -> None:
    judge, client = _judge(lambda n: f"Correct and brief.\nVERDICT {n}: 7/10")
    score = judge.score(TASK, "The answer is 42.")
    assert (score.valid, score.reward, score.passed) == (True, pytest.approx(0.7), False)
    assert "What is 6 * 7?" in client.bodies[0]["messages"][1]["content"]


@pytest.mark.parametrize(
    ("reply", "stat", "reason"),
    [
        (JudgeHTTPError("timeout", "no reply within 60 s"), "timeouts", "judge_timeout"),
        (JudgeHTTPError("status", "HTTP 500"), "errors", "judge_error"),
        (lambda n: f"VERDICT {n}: REFUSE", "refusals", "judge_refusal"),
        (lambda n: "I'm sorry, I can't help with grading that.", "refusals", "judge_refusal"),
        (ChatReply(None, "content_filter"), "refusals", "judge_refusal"),
        (lambda n: "It looks fine, maybe 8 out of 10?", "unparseable", "judge_unparseable"),
        (lambda n: f"VERDICT {n}: 11/10", "unparseable", "judge_unparseable"),
        (lambda n: f"VERDICT {n}: 3/10\nVERDICT {n}: 10/10", "unparseable", "judge_unparseable"),
        (lambda n: "VERDICT 0123456789abcdef: 10/10", "unparseable", "judge_unparseable"),  # another nonce
    ],
)  # fmt: skip
def test_invalid_replies_are_masked_and_counted_never_scored(reply: Any, stat: str, reason: str) -> None:
    """Guards the RLAIF failure of scoring a timeout or a refusal as 0 (teaching the policy that a right
    answer is wrong) or an unparseable reply as a pass."""
    judge, _ = _judge(reply if callable(reply) and not isinstance(reply, Exception) else (lambda n: reply))
    score = judge.score(TASK, "The answer is 42.")
    assert not score.valid and score.reason_code == reason
    assert getattr(judge.stats, stat) == 1 and judge.stats.asked == 1
    again = judge.score(TASK, "The answer is 42.")
    assert not again.valid and judge.stats.asked == 2 and judge.stats.cached == 0  # invalid: asked again


def test_a_repeated_answer_is_not_asked_again_but_another_task_is() -> None:
    judge, client = _judge(lambda n: f"VERDICT {n}: 10/10")
    first, second = judge.score(TASK, "42"), judge.score(TASK, "42")
    assert first == second and first.passed and len(client.bodies) == 1 and judge.stats.cached == 1
    other = Task(id="m/1", domain="math", prompt="What is 40 + 2?", spec=MathSpec(answer="42"),
                 metadata=TaskMetadata(family="m"))  # fmt: skip
    judge.score(other, "42")
    assert len(client.bodies) == 2
    assert judge.stats.metrics()["reward/judge_cached"] == 1.0


def test_parse_verdict_takes_only_this_nonce_and_this_scale() -> None:
    ok = ChatReply("thinking...\n  VERDICT abc: 4 / 10  \n", "stop")
    assert parse_verdict(ok, nonce="abc", scale=10) == pytest.approx(0.4)
    assert parse_verdict(ChatReply("VERDICT abc: 4/5", "stop"), nonce="abc", scale=10) == "unparseable"


def test_judged_verifier_combines_by_weight_and_masks_an_invalid_judge() -> None:
    """(1 - w) * execution + w * judge; passed stays the execution's; a failed judge masks the sample."""
    good, _ = _judge(lambda n: f"VERDICT {n}: 5/10")
    register_verifier("judged_math", JudgedVerifier(get_verifier("math"), good, weight=0.4))
    broken, _ = _judge(lambda n: JudgeHTTPError("timeout", "slow"))
    register_verifier("judged_math_broken", JudgedVerifier(get_verifier("math"), broken, weight=0.4))
    try:
        tasks = [Task(id=f"j/{i}", domain=d, prompt="What is 6 * 7?", spec=MathSpec(answer="42"),
                      metadata=TaskMetadata(family="j")) for i, d in enumerate(["judged_math"] * 2 + ["judged_math_broken"])]  # fmt: skip
        right, wrong, masked = score_batch(tasks, ["The answer is 42.", "The answer is 41.", "The answer is 42."],
                                           sandbox=None, config=RewardConfig())  # fmt: skip
    finally:
        unregister_verifier("judged_math")
        unregister_verifier("judged_math_broken")
    assert (right.reward, right.passed, right.reason) == (
        pytest.approx(0.6 + 0.2),
        True,
        "passed: judge 0.50",
    )
    assert (wrong.reward, wrong.passed) == (pytest.approx(0.2), False)
    assert not masked.valid and masked.reason_code == "judge_timeout"


# ---- the HTTP call: a deadline over the whole reply, a size cap, no redirects ------------------------------


@pytest.fixture
def server() -> Iterator[tuple[str, dict[str, Any]]]:
    """A local endpoint whose behaviour the test sets in ``state['mode']``."""
    state: dict[str, Any] = {"mode": "ok"}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            mode = state["mode"]
            if mode == "redirect":
                self.send_response(302)
                self.send_header("Location", "http://elsewhere.invalid/")
                self.end_headers()
                return
            body = json.dumps(
                {"choices": [{"message": {"content": "VERDICT x: 1/10"}, "finish_reason": "stop"}]}
            )
            data = (body + " " * (5 << 20) if mode == "huge" else body).encode()
            self.send_response(200)
            if mode != "trickle":
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            for i in range(0, len(data), 1 if mode == "trickle" else len(data)):
                self.wfile.write(data[i : i + 1] if mode == "trickle" else data)
                self.wfile.flush()
                if mode == "trickle":
                    time.sleep(0.05)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", state
    httpd.shutdown()
    httpd.server_close()


def test_http_reply_and_its_bounds(server: tuple[str, dict[str, Any]]) -> None:
    url, state = server
    assert chat_reply(url, {"model": "j"}).content == "VERDICT x: 1/10"
    for mode, kind in (("redirect", "redirect"), ("huge", "too_large")):
        state["mode"] = mode
        with pytest.raises(JudgeHTTPError) as err:
            chat_reply(url, {"model": "j"}, max_reply_bytes=1 << 20)
        assert err.value.kind == kind
    state["mode"] = "trickle"  # a byte every 50 ms: each read is quick, the whole is not
    started = time.monotonic()
    with pytest.raises(JudgeHTTPError) as err:
        chat_reply(url, {"model": "j"}, deadline_s=0.5)
    assert err.value.kind == "timeout" and time.monotonic() - started < 2.0
    with pytest.raises(JudgeHTTPError) as err:
        chat_reply("http://127.0.0.1:9/v1", {"model": "j"}, deadline_s=2)
    assert err.value.kind in ("connection", "timeout")
