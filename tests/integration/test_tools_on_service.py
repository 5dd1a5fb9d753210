"""Tool episodes on ``sandbox.urls`` replicas (issue 36, item 3): ``ServiceClient``'s sessions against real
``execrl sandbox serve --session-templates`` processes on loopback.

The same scripted episodes through the in-process sandbox and through two replicas are equal (tool answers,
token ids, rewards); a replica killed in the middle of the episodes leaves its sessions answering counted
sandbox errors while the episodes finish and are judged; a replica without ``--session-templates`` is
named before a run starts.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_server import EXECRL, running_server, wait_for_url

from execrl.episodes import Episode, LocalBackend, run_episodes
from execrl.rollout.models import default_tokenizer
from execrl.rollout.types import SamplingParams
from execrl.sandbox import Sandbox, SandboxConfig
from execrl.sandbox.service.client import ClientConfig, ServiceClient
from execrl.tasks.schema import ChatMessage, MathSpec, SessionSpec, Task, TaskMetadata
from execrl.tools import ToolConfig, ToolEnvironment

sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))  # scripted_engine.py, as toy_tools.py does
from scripted_engine import ScriptedEngine  # noqa: E402

pytestmark = pytest.mark.slow
TEMPLATES = ("--session-templates", "--session-max-sessions", "16")
MEASURED = ("session_memory_mb", "tool_time_s")  # the session's peak memory, the tools' wall clock
MEASURED_METRICS = (
    "perf/",
    "time_s",
    "tools/time_share",
    "tools/session_memory_mb_max",
    "sandbox/cpu_time_s",
)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return default_tokenizer()


@pytest.fixture(scope="module")
def replicas() -> Iterator[tuple[str, str]]:
    with running_server(*TEMPLATES) as a, running_server(*TEMPLATES) as b:
        yield a, b


def _task(i: int) -> Task:
    """A task whose answer only its session knows (``n``, set by its trusted setup cell)."""
    return Task(
        id=f"svc/{i}", domain="math", prompt=(ChatMessage(role="user", content="What is n * 11?"),),
        spec=MathSpec(answer=str(42 * (i + 1) * 11)), metadata=TaskMetadata(family="tools", split="test"),
        session=SessionSpec(setup=(f"n = {42 * (i + 1)}",)),
    )  # fmt: skip


def _call(code: str) -> str:
    return f"<tool_call>\n{json.dumps({'name': 'python', 'arguments': {'code': code}})}\n</tool_call>"


def _script(turn: int, context: str) -> str:
    """Set state, read it back (the session persists between calls), fail once, then answer from it."""
    if turn == 0:
        return _call("x = n * 11\nprint('x is', x)")
    if turn == 1:
        return _call("1 / 0")
    if turn == 2:
        return _call("x")
    seen = context.rsplit("Out: ", 1)[-1].split("\n", 1)[0] if "Out: " in context else "?"
    return f"The answer is {seen.strip()}."


def _episodes(tokenizer: Any, runner: Any, script: Any = _script, tasks: int = 2) -> list[Episode]:
    config = ToolConfig(max_tool_calls=3, max_episode_tokens=1024, max_turn_tokens=64)
    result = run_episodes(
        ToolEnvironment(runner, config), LocalBackend(ScriptedEngine(tokenizer, script), tokenizer),
        [_task(i) for i in range(tasks)], params=SamplingParams(samples_per_prompt=2, max_new_tokens=64),
        max_episode_tokens=config.max_episode_tokens,
    )  # fmt: skip
    return list(result.episodes)


def _comparable(episode: Episode) -> Episode:
    import dataclasses

    info = {k: v for k, v in episode.info.items() if k not in MEASURED}
    return dataclasses.replace(episode, info=info)


def _tool_answers(episode: Episode) -> list[str]:
    return [str(m["content"]) for m in episode.messages if m["role"] == "tool"]


def test_tool_episodes_on_replicas_equal_the_in_process_ones(
    tokenizer: Any, replicas: tuple[str, str]
) -> None:
    with Sandbox(SandboxConfig(workers=2)) as sandbox:
        local = _episodes(tokenizer, sandbox)
    client = ServiceClient(ClientConfig(urls=replicas))
    remote = _episodes(tokenizer, client)
    assert [_comparable(e) for e in remote] == [_comparable(e) for e in local]
    assert all(e.passed and e.reward == 1.0 for e in remote), [e.text for e in remote]
    answers = _tool_answers(remote[2])
    assert "x is 924" in answers[0] and "ZeroDivisionError" in answers[1] and "Out: 924" in answers[2]
    assert all(e.info["session_memory_mb"] > 0 for e in remote)  # read from each fork's stats
    stats = client.stats()
    assert stats.session_errors == 0 and stats.session_retries == 0
    assert client.sessions_problem() is None


def test_a_replica_killed_mid_episode_gives_counted_sandbox_errors(tokenizer: Any) -> None:
    """The replica holding one task's sessions dies after the first call: that task's later calls answer
    sandbox errors (counted), its episodes still end and are judged on the surviving replica; nothing
    raises."""
    command = [EXECRL, "sandbox", "serve", "--port", "0", "--workers", "2", *TEMPLATES]
    doomed = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        doomed_url = wait_for_url(doomed)
        with running_server(*TEMPLATES) as survivor:
            client = ServiceClient(
                ClientConfig(urls=(doomed_url, survivor), backoff_s=0.0, backoff_max_s=0.0)
            )

            def script(turn: int, context: str) -> str:
                if turn == 1 and doomed.poll() is None:
                    doomed.send_signal(signal.SIGKILL)
                    doomed.wait(timeout=30)
                return _script(turn, context)

            episodes = _episodes(tokenizer, client, script)
    finally:
        if doomed.poll() is None:
            doomed.kill()
        doomed.communicate(timeout=30)
    broken = [e for e in episodes if any("[sandbox_error]" in a for a in _tool_answers(e))]
    whole = [e for e in episodes if e not in broken]
    assert len(broken) == len(whole) == 2 and {e.task_index for e in broken} != {e.task_index for e in whole}
    for e in broken:  # the first call ran before the kill; the next two were lost, the answer judged
        answers = _tool_answers(e)
        assert "x is" in answers[0] and all("sandbox service" in a for a in answers[1:])
        assert e.valid and e.stop == "answer" and not e.passed
    assert all(e.passed for e in whole)
    assert client.stats().session_errors >= 4  # two lost cells per broken episode, plus their stats reads
    client.close()


def test_a_replica_without_templates_is_named_before_a_run(replicas: tuple[str, str]) -> None:
    from execrl.components.setup import build_sandbox
    from execrl.config import ConfigError, load_config

    with running_server() as plain:
        urls = json.dumps([replicas[0], plain])
        config = load_config(None, [f"sandbox.urls={urls}", "tools.enabled=true"])
        with pytest.raises(
            ConfigError, match=f"{plain} does not serve session templates.*--session-templates"
        ):
            build_sandbox(config, sessions=4)
        assert isinstance(build_sandbox(config), ServiceClient)  # a run without tool episodes needs none


def test_tool_recipe_on_replicas_equals_the_in_process_run(tiny_model_dir: Path, tmp_path: Path) -> None:
    """``execrl train tools.enabled=true 'sandbox.urls=[...]'`` (refused before issue 36): two steps on the
    toy tool domain, every metric equal to the in-process run's step for step but the timings and the
    sessions' peak memory. The tiny random model writes no well-formed call, so this drives the template
    opens with their setup cells, the forks, stats and closes over HTTP; cells are compared above."""
    import toy_tools
    from test_train_cli import _env, _run_dir

    from execrl.tasks import save_tasks

    tasks = tmp_path / "toytool.jsonl"
    save_tasks(toy_tools.toy_tool_tasks(8, "train"), str(tasks))

    def train(out: Path, *extra: str) -> list[dict[str, float]]:
        args = [
            f"model.path={tiny_model_dir}", f'tasks.suites={{"{tasks}"=1.0}}', f"run.output_dir={out}",
            "run.name=toy", "rollout.prompts_per_step=2", "rollout.samples_per_prompt=2", "rollout.top_k=16",
            "optim.learning_rate=1e-2", "telemetry.tensorboard=false", "eval.enabled=false", "run.total_steps=2",
            "checkpoint.every_steps=1000", "tools.enabled=true",
            *(f"tools.{k}={v}" for k, v in toy_tools.TOOL_LIMITS.items()), *extra,
        ]  # fmt: skip
        done = subprocess.run([sys.executable, "-m", "execrl.cli", "train", "--no-progress", *args], env=_env(),
                              capture_output=True, text=True, timeout=600)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        lines = (_run_dir(out) / "metrics.jsonl").read_text().splitlines()
        rows = [json.loads(line) for line in lines if "reward/mean" in line]
        return [{k: v for k, v in row.items() if not k.startswith(MEASURED_METRICS)} for row in rows]

    local = train(tmp_path / "local", "sandbox.workers=2")
    with running_server(*TEMPLATES) as a, running_server(*TEMPLATES) as b:
        remote = train(tmp_path / "remote", f"sandbox.urls={json.dumps([a, b])}")
    assert [row["step"] for row in remote] == [0, 1]
    assert remote == local
