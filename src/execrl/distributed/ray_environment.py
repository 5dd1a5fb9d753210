"""The run's environment on the Ray executor: the rollout loop drives it on the driver, its steps run on the
sandbox actors, each next to the sessions it opened.

``RemoteEnvironment.start`` splits the rollout call's tasks into contiguous partitions, one per sandbox
actor (at most one per task), and starts the real environment (``components.setup.build_environment`` over
the actor's own sandbox: ``SandboxWorker``) on each partition's actor, in parallel: a task's episodes stay
on one actor, with its session template and the forks they run their cells in. ``respond`` and ``judge``
split their batch by partition (episode and task indices renumbered to the partition's own) and run the
parts in parallel; ``close`` and ``report`` likewise. The environments are per episode (a turn's answer
and a verdict depend on that episode only), so the results do not depend on the partition. Limit:
``refine``'s ``random_feedback`` evaluation condition deranges feedback within a batch, so it would;
it is an ``execrl refine`` condition, never a training environment.

Faults (``faults.py``): a sandbox actor that dies or hangs is replaced. What it held died with it:

* a partition that has answered no turn yet (its sessions just opened), or of an environment of one turn
  per episode (``max_turns == 1``: the single-turn recipes), is restored on the replacement (started
  again, the turns it answered replayed) and the call retried, so nothing is lost;
* any other partition (tool sessions with cells run in them, refine's feedback state) cannot continue:
  its episodes still running end with stop ``error`` (invalid: kept out of the loss, ``executor_lost``
  in their info), its finished episodes get invalid verdicts naming the reason, all counted in
  ``executor/lost_episodes``; the step goes on.

A ``judge`` that raises inside a live actor is retried (judging has no side effect); one failing on every
attempt gives invalid verdicts with the reason, as scoring did. A ``respond`` that raises is not retried
(a half-run cell would run twice): it fails the step, as in process.
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from execrl.distributed.faults import FaultCounters, TaskFailed
from execrl.episodes.environment import Final
from execrl.episodes.single import verdict_of
from execrl.episodes.types import Response, TurnView, Verdict

if TYPE_CHECKING:
    from execrl.distributed.ray_actors import ActorGroup
    from execrl.episodes import Backend, Environment, Episode, Prompt
    from execrl.tasks.schema import Task

__all__ = ["PartitionLost", "RemoteEnvironment"]


class PartitionLost(RuntimeError):
    """The sandbox actor holding a partition's environment died, and the partition could not be restored."""


@dataclass
class RemoteEnvironment:
    """``local`` (the driver's environment: its name and metrics) with its steps on ``hosts``."""

    local: Environment
    hosts: ActorGroup  # the sandbox actors (``SandboxWorker``)
    counters: FaultCounters  # the step's ``executor/*`` counters
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.local.name

    def start(self, tasks: Sequence[Task], samples_per_task: int, backend: Backend) -> RemoteLive:
        live = RemoteLive(self.hosts, self.counters, list(tasks), samples_per_task)
        live.open()
        return live

    def metrics(self, episodes: Sequence[Episode], *, step_s: float = 0.0) -> dict[str, float]:
        return self.local.metrics(episodes, step_s=step_s)


@dataclass(eq=False)  # identity: a partition is a dict key
class _Partition:
    """Tasks ``[lo, hi)`` of a rollout call, open on the actor in slot ``slot``."""

    slot: int
    lo: int
    hi: int
    actor: Any = None  # the handle holding the partition's environment
    lost: str = ""  # why its environment is gone ("" while alive)
    answered: list[list[TurnView]] = field(default_factory=list)  # replayed on a restore (one-turn only)
    responded: bool = False  # a turn was answered: a multi-turn environment holds state from then on
    lock: threading.RLock = field(default_factory=threading.RLock)


@dataclass
class RemoteLive:
    """One rollout call's live environment, partitioned over the sandbox actors (module docstring)."""

    hosts: ActorGroup
    counters: FaultCounters
    tasks: list[Task]
    samples: int
    rollout: str = field(default_factory=lambda: uuid.uuid4().hex)
    max_turns: int = 1
    parts: list[_Partition] = field(default_factory=list)
    prompts: list[Prompt] = field(default_factory=list)

    def open(self) -> None:
        """Contiguous partitions, one per actor (at most one per task), started in parallel."""
        count = min(len(self.hosts.actors), len(self.tasks))
        bounds = [len(self.tasks) * k // max(count, 1) for k in range(count + 1)]
        self.parts = [_Partition(k, bounds[k], bounds[k + 1]) for k in range(count)]
        started = self._fan(self.parts, self._start)
        self.max_turns = max((turns for turns, _ in started), default=1)
        self.prompts = [prompt for _, prompts in started for prompt in prompts]

    def prompt(self, task_index: int) -> Prompt:
        return self.prompts[task_index]

    # -- the steps, split by partition --------------------------------------------------------------------
    def respond(self, turns: Sequence[TurnView]) -> list[Response]:
        by_part = self._split(turns, lambda v: v.task_index)
        answers = self._fan(list(by_part), lambda p: self._respond(p, by_part[p]))
        out: dict[int, Response] = {}
        for p, responses in zip(by_part, answers, strict=True):
            out.update(zip((v.episode for v in by_part[p]), responses, strict=True))
        return [out[v.episode] for v in turns]

    def judge(self, finals: Sequence[Final]) -> list[Verdict]:
        by_part = self._split(finals, lambda f: f.task_index)
        verdicts = self._fan(list(by_part), lambda p: self._judge(p, by_part[p]))
        out: dict[int, Verdict] = {}
        for p, part_verdicts in zip(by_part, verdicts, strict=True):
            out.update(zip((f.episode for f in by_part[p]), part_verdicts, strict=True))
        return [out[f.episode] for f in finals]

    def close(self) -> None:
        self._fan(self.parts, lambda p: self._quietly(p, "close"))

    def report(self) -> dict[int, dict[str, Any]]:
        reports = self._fan(self.parts, lambda p: self._quietly(p, "report") or {})
        out: dict[int, dict[str, Any]] = {}
        for p, part in zip(self.parts, reports, strict=True):
            out.update({e + p.lo * self.samples: record for e, record in part.items()})
        return out

    # -- one partition --------------------------------------------------------------------------------------
    def _respond(self, p: _Partition, views: list[TurnView]) -> list[Response]:
        local = [dataclasses.replace(v, episode=v.episode - p.lo * self.samples, task_index=v.task_index - p.lo)
                 for v in views]  # fmt: skip
        try:
            responses: list[Response] = self._call(p, "respond", local, retry_raised=False)
        except PartitionLost:
            self.counters.count(lost_episodes=len(views))
            return [Response(done=True, stop="error", info={"executor_lost": 1.0}) for _ in views]
        with p.lock:
            p.responded = True
            if self.max_turns == 1:
                p.answered.append(local)
        return responses

    def _judge(self, p: _Partition, finals: list[Final]) -> list[Verdict]:
        local = [dataclasses.replace(f, episode=f.episode - p.lo * self.samples, task_index=f.task_index - p.lo)
                 for f in finals]  # fmt: skip
        try:
            verdicts: list[Verdict] = self._call(p, "judge", local, retry_raised=True)
            return verdicts
        except PartitionLost as exc:
            self.counters.count(lost_episodes=len(finals))
            reason = f"executor_error: {exc}"
        except TaskFailed as exc:
            reason = f"executor_error: {exc}"
        from execrl.rewards import Score

        return [verdict_of(Score.invalid(reason)) for _ in finals]

    def _quietly(self, p: _Partition, method: str) -> Any:
        """``close``/``report``: nothing to do for a lost partition (its sessions died with the actor)."""
        try:
            return self._call(p, method, retry_raised=False)
        except PartitionLost:
            return None

    def _call(self, p: _Partition, method: str, *args: Any, retry_raised: bool) -> Any:
        """``method`` of the partition's environment on its actor; ``PartitionLost`` once it is gone."""
        self._check(p)

        def submit(index: int) -> Any:
            return getattr(self.hosts.actors[index], method).remote(self.rollout, *args)

        what = f"{method} of tasks {p.lo}..{p.hi - 1}"
        return self.hosts.call(
            what, submit, counters=self.counters, index=p.slot, retry_raised=retry_raised,
            replaced=lambda reason: self._restore(p, reason),
        )  # fmt: skip

    def _check(self, p: _Partition) -> None:
        """A partition whose actor was replaced since (by another call's failure) is restored or lost."""
        if p.lost:
            raise PartitionLost(p.lost)
        if self.hosts.actors[p.slot] is not p.actor:
            self._restore(p, f"sandbox worker {p.slot} was replaced")

    def _restore(self, p: _Partition, reason: str) -> None:
        """After the partition's actor died: start it again on the replacement (the turns it answered
        replayed) when that restores it exactly, else it is lost (module docstring)."""
        with p.lock:
            if p.lost:
                raise PartitionLost(p.lost)
            if self.hosts.actors[p.slot] is p.actor:
                return  # another thread restored it already
            if self.max_turns > 1 and p.responded:
                p.lost = f"{reason} holding the environment of tasks {p.lo}..{p.hi - 1}"
                raise PartitionLost(p.lost)
            try:
                self._start(p)
                for views in p.answered:
                    self._call(p, "respond", views, retry_raised=False)
            except TaskFailed as exc:
                p.lost = str(exc)
                raise PartitionLost(p.lost) from None

    def _start(self, p: _Partition) -> tuple[int, list[Prompt]]:
        """Start the partition's environment on its slot's actor (a death meanwhile: on the replacement)."""
        tasks = self.tasks[p.lo : p.hi]

        def submit(index: int) -> Any:
            return self.hosts.actors[index].start.remote(self.rollout, tasks, self.samples)

        what = f"start of tasks {p.lo}..{p.hi - 1}"
        with p.lock:
            started: tuple[int, list[Prompt]] = self.hosts.call(
                what, submit, counters=self.counters, index=p.slot
            )
            p.actor = self.hosts.actors[p.slot]
        return started

    # -- helpers ----------------------------------------------------------------------------------------------
    def _split(self, items: Sequence[Any], task_of: Callable[[Any], int]) -> dict[_Partition, list[Any]]:
        """Items by the partition of their task, in order of first appearance (each part keeps its order)."""
        starts = [p.lo for p in self.parts]
        out: dict[_Partition, list[Any]] = {}
        for item in items:
            out.setdefault(self.parts[bisect.bisect_right(starts, task_of(item)) - 1], []).append(item)
        return out

    def _fan(self, parts: Sequence[_Partition], work: Callable[[_Partition], Any]) -> list[Any]:
        """``work`` for every partition, in parallel (one thread each beyond the first), results in order."""
        if len(parts) <= 1:
            return [work(p) for p in parts]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(parts) - 1, thread_name_prefix="execrl-sandbox-call") as pool:
            rest = [pool.submit(work, p) for p in parts[1:]]
            first = work(parts[0])
            return [first, *(f.result() for f in rest)]
