"""The Ray executor's rollout pieces, in this process (no Ray cluster): ``RayBackend`` sends the in-process
run's engine calls in its order, and ``RemoteEnvironment`` partitions a rollout over sandbox workers with
results that do not depend on the partition, restores a one-turn partition whose worker died and ends the
episodes of a multi-turn one (counted). The workers are ``SandboxWorker``s over a pure-Python environment,
behind a fake of ``ActorGroup``'s contract (a dead actor is replaced by a fresh one, ``replaced`` told)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from scripted_engine import ScriptedEngine

from execrl.distributed.faults import FaultCounters, TaskFailed
from execrl.distributed.ray_backend import RayBackend
from execrl.distributed.ray_environment import RemoteEnvironment
from execrl.distributed.ray_workers import SandboxWorker, TurnSession, _NoEngine
from execrl.episodes import (
    Final,
    LocalBackend,
    Prompt,
    Response,
    RolloutResult,
    TurnView,
    Verdict,
    run_episodes,
)
from execrl.rollout.models import default_tokenizer
from execrl.rollout.types import SamplingParams
from execrl.tasks.schema import MathSpec, Task, TaskMetadata

TOKENIZER = default_tokenizer()


@dataclass(frozen=True)
class Echo:
    """Each turn is answered with a user message until ``turns`` turns; the verdict reads the last text."""

    turns: int = 3
    name: str = "echo"

    def start(self, tasks: Sequence[Task], samples_per_task: int, backend: Any) -> _EchoLive:
        return _EchoLive(list(tasks), self.turns)

    def metrics(self, episodes: Sequence[Any], *, step_s: float = 0.0) -> dict[str, float]:
        return {}


@dataclass
class _EchoLive:
    tasks: list[Task]
    max_turns: int
    answered: dict[int, int] = field(default_factory=dict)

    def prompt(self, task_index: int) -> Prompt:
        return Prompt(({"role": "user", "content": str(self.tasks[task_index].prompt)},))

    def respond(self, turns: Sequence[TurnView]) -> list[Response]:
        out = []
        for v in turns:
            self.answered[v.episode] = self.answered.get(v.episode, 0) + 1
            message = {"role": "user", "content": f"task {self.tasks[v.task_index].id} turn {v.turn}: again"}
            out.append(Response(done=v.turn >= self.max_turns, stop="answer", messages=(message,)))
        return out

    def judge(self, finals: Sequence[Final]) -> list[Verdict]:
        return [
            Verdict(float(len(f.text) % 3), True, False, f"{self.tasks[f.task_index].id}") for f in finals
        ]

    def close(self) -> None:
        """Nothing to release."""

    def report(self) -> dict[int, dict[str, Any]]:
        return {e: {"answered": float(n)} for e, n in self.answered.items()}


def _tasks(count: int) -> list[Task]:
    return [
        Task(id=f"t{i}", domain="math", prompt=f"Say something about {i}.", spec=MathSpec(answer="1"),
             metadata=TaskMetadata(family="echo", split="train"))  # type: ignore[arg-type]
        for i in range(count)
    ]  # fmt: skip


def _script(turn: int, context: str) -> str:
    return f"answer {turn} to {sum(map(ord, context)) % 97}"


# ---- a fake of ActorGroup's contract, in this process --------------------------------------------------
@dataclass
class _Ref:
    actor: _Actor
    run: Callable[[], Any]


class _Actor:
    def __init__(self, host: SandboxWorker) -> None:
        self.host, self.dead = host, False

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.host, name)
        return SimpleNamespace(remote=lambda *args: _Ref(self, lambda: method(*args)))


class FakeGroup:
    def __init__(self, environment: Echo, count: int) -> None:
        self.environment = environment
        self.actors = [_Actor(self._host()) for _ in range(count)]

    def _host(self) -> SandboxWorker:
        host = SandboxWorker.__new__(SandboxWorker)  # the role without its sandbox: Echo needs none
        host.environment, host.backend, host.live = self.environment, LocalBackend(_NoEngine(), TOKENIZER), {}  # type: ignore[assignment]
        return host

    def call(self, what: str, submit: Callable[[int], _Ref], *, counters: FaultCounters, index: int | None = None,
             retry_raised: bool = True, replaced: Callable[[str], None] | None = None) -> Any:  # fmt: skip
        counters.count(tasks=1)
        for _ in range(3):
            assert index is not None
            ref = submit(index)
            if not ref.actor.dead:
                return ref.run()
            self.actors[index] = _Actor(self._host())
            counters.count(replaced_workers=1, retries=1)
            if replaced is not None:
                replaced(f"sandbox worker {index} died")
        raise TaskFailed(what, ["died"] * 3)


def _rollout(
    environment: Any, tasks: list[Task], script: Callable[[int, str], str] = _script
) -> RolloutResult:
    backend = LocalBackend(ScriptedEngine(TOKENIZER, script), TOKENIZER)
    return run_episodes(
        environment, backend, tasks, params=SamplingParams(samples_per_prompt=2, max_new_tokens=16)
    )


def _view(result: RolloutResult) -> list[tuple[Any, ...]]:
    return [(e.token_ids, e.stop, e.verdict, dict(e.info)) for e in result.episodes]


def test_a_partitioned_rollout_equals_the_local_one_whatever_the_partition() -> None:
    tasks = _tasks(5)
    local = _rollout(Echo(), tasks)
    assert {e.stop for e in local.episodes} == {"answer"} and len(local.episodes[0].turns) == 3
    for workers in (1, 2, 3, 7):
        counters = FaultCounters()
        remote = RemoteEnvironment(Echo(), FakeGroup(Echo(), workers), counters)  # type: ignore[arg-type]
        assert _view(_rollout(remote, tasks)) == _view(local), workers
        assert counters.lost_episodes == 0


def _kill_at_turn(group: FakeGroup, slot: int, turn: int) -> Callable[[int, str], str]:
    def script(t: int, context: str) -> str:
        if t == turn:
            group.actors[slot].dead = True
        return _script(t, context)

    return script


def test_a_multi_turn_partition_whose_worker_died_ends_its_episodes_as_counted_errors() -> None:
    tasks, counters = _tasks(4), FaultCounters()
    group = FakeGroup(Echo(), 2)
    remote = RemoteEnvironment(Echo(), group, counters)  # type: ignore[arg-type]
    result = _rollout(remote, tasks, _kill_at_turn(group, 1, 1))  # worker 1 (tasks 2, 3) dies after turn 1
    local = _rollout(Echo(), tasks)
    assert _view(result)[:4] == _view(local)[:4]  # tasks 0, 1: untouched
    lost = result.episodes[4:]
    assert [e.stop for e in lost] == ["error"] * 4 and not any(e.valid for e in lost)
    assert all(e.info["executor_lost"] == 1.0 for e in lost) and len(lost[0].turns) == 2
    assert (counters.lost_episodes, counters.replaced_workers) == (4, 1)


def test_a_one_turn_partition_whose_worker_died_is_restored_on_the_replacement() -> None:
    tasks, counters = _tasks(4), FaultCounters()
    group = FakeGroup(Echo(turns=1), 2)
    remote = RemoteEnvironment(Echo(turns=1), group, counters)  # type: ignore[arg-type]
    original = remote.start

    def start_then_kill(*args: Any) -> Any:
        live = original(*args)
        real_respond = live.respond

        def respond(turns: Sequence[TurnView]) -> list[Response]:
            out = real_respond(turns)
            group.actors[1].dead = True  # dies holding the answered turns, before close and judge
            return out

        live.respond = respond  # type: ignore[method-assign]
        return live

    remote.start = start_then_kill  # type: ignore[method-assign]
    assert _view(_rollout(remote, tasks)) == _view(_rollout(Echo(turns=1), tasks))  # the report replayed too
    assert (counters.lost_episodes, counters.replaced_workers) == (0, 1)


# ---- RayBackend: the in-process run's engine calls -------------------------------------------------------
class LocalCalls:
    """``RolloutCalls``' contract over an engine in this process; records what was sent, in order."""

    def __init__(self, engine: ScriptedEngine) -> None:
        self.engine = engine
        self.sent: list[tuple[list[list[int]], int, tuple[int, ...], TurnSession | None]] = []
        self.ended: list[TurnSession] = []

    def start(self, prompts: list[list[int]], params: SamplingParams, *, episodes: Sequence[int],
              session: TurnSession | None) -> Any:  # fmt: skip
        self.sent.append((prompts, params.seed, tuple(episodes), session))
        return prompts, params

    def finish(self, flight: Any) -> Any:
        return self.engine.generate(*flight.attempt)

    def end_session(self, session: TurnSession) -> None:
        self.ended.append(session)


class Recording(ScriptedEngine):
    def __init__(self) -> None:
        super().__init__(TOKENIZER, _script)
        self.calls: list[tuple[list[list[int]], int]] = []

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> Any:
        self.calls.append(([list(p) for p in prompts], params.seed))
        return super().generate(prompts, params)


@pytest.mark.parametrize("streamed", [False, True])
def test_ray_backend_sends_the_in_process_engine_calls_in_order(streamed: bool) -> None:
    tasks = _tasks(3)
    params = SamplingParams(samples_per_prompt=2, max_new_tokens=16, seed=5)
    seed_for = (lambda task, turn: 100 * task + turn) if streamed else None
    engine = Recording()
    local = run_episodes(Echo(), LocalBackend(engine, TOKENIZER), tasks, params=params, seed_for=seed_for)
    calls = LocalCalls(ScriptedEngine(TOKENIZER, _script))
    backend = RayBackend(calls, TOKENIZER, reuse_kv_max_bytes=1 << 20)  # type: ignore[arg-type]
    remote = run_episodes(Echo(), backend, tasks, params=params, seed_for=seed_for)
    assert _view(remote) == _view(local)
    assert [(p, s) for p, s, _, _ in calls.sent] == engine.calls  # the same calls, sent in the same order
    sessions = {s for _, _, _, s in calls.sent}
    assert len(sessions) == 1 and calls.ended == list(sessions)  # one session: the rollout call's
    (session,) = sessions
    assert session is not None and (session.max_turns, session.reuse_kv_max_bytes) == (3, 1 << 20)
    first = calls.sent[0][2]
    assert first == ((0, 1) if streamed else tuple(range(6)))  # a call names its episodes (actor affinity)


def test_a_one_turn_rollout_opens_no_session() -> None:
    calls = LocalCalls(ScriptedEngine(TOKENIZER, _script))
    backend = RayBackend(calls, TOKENIZER, reuse_kv_max_bytes=1 << 20)  # type: ignore[arg-type]
    run_episodes(
        Echo(turns=1), backend, _tasks(2), params=SamplingParams(samples_per_prompt=2, max_new_tokens=8)
    )
    assert [s for *_, s in calls.sent] == [None] and calls.ended == []


def test_remote_environment_keeps_the_drivers_name_and_metrics() -> None:
    remote = RemoteEnvironment(Echo(), FakeGroup(Echo(), 1), FaultCounters())  # type: ignore[arg-type]
    assert remote.name == "echo" and remote.metrics([]) == {}
