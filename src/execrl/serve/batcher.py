"""Continuous request batching for ``execrl serve``: concurrent requests share one ``engine.generate``.

Why: on CPU (and more so on a GPU) one decode step over 16 rows costs little more than over one row, so a
server that runs requests one at a time leaves most of the hardware idle (``execrl bench serve`` measures
the gap against a naive one-request-at-a-time server). Requests wait in a queue; a free engine *lane*
takes the oldest request it may run together with every queued request of the same sampling parameters
(up to ``max_prompts_per_batch`` prompts) and runs them as one call. After the first request of an idle
spell a lane waits ``window_s`` (20 ms) so that a burst of clients lands in one batch instead of the first
request running alone while the others wait for it (what the first `execrl bench serve` run showed).

Lanes: each lane is one engine thread. Lane 0 runs any request; the others (``lanes - 1``, default 1) run
only requests asking for at most ``short_max_tokens`` new tokens, so a short request never waits behind a
long one (a long request can hold a lane for minutes). Two lanes share the model's weights and the CPU.

Bounds (each refusal names the request field; the server turns them into OpenAI errors): a request costs
``n x (prompt tokens + max_tokens)`` tokens of KV cache and output while queued or running, and the sum
over all of them stays under ``max_queued_tokens`` (the server's memory bound: a request that could
never fit is a :class:`RequestTooLarge`, one that does not fit now a :class:`QueueFull`, HTTP 429).

Cancellation: a request whose future is cancelled (its client went away: the server cancels the
handler) is dropped from the queue, and while it runs the engine's ``on_step`` hook finishes its rows at
the next decode step, so the engine stops generating for it; the batch goes on for the others.
:meth:`Batcher.stop` finishes every row the same way, fails what waits with :class:`ServerStopping`, and
waits at most ``timeout_s`` for the lanes.

Failures: an engine that raises ``RuntimeError`` or ``MemoryError`` (a refused allocation, a device error)
fails the requests of that call only (:class:`EngineFailed`, 503) and the lane goes on;
``consecutive_failures`` and ``last_failure`` tell ``/health`` the truth. Anything else is a bug: every
waiting request fails and later ones are refused (``failure``).

Streaming: a request submitted with :meth:`Batcher.submit_stream` gets its tokens as the batch decodes
(the ``on_step`` hook runs on the engine thread after every decode step and hands the step's (row, token)
pairs to the event loop with one ``call_soon_threadsafe``). An engine without the hook streams everything
at the end and cannot stop rows early (a cancelled request then runs to its end).

Limits: requests join only at batch boundaries (no iteration-level scheduling as in vLLM/Orca); only
requests with identical sampling parameters share a call. A request with an explicit ``seed`` always runs
alone, so its output depends only on its own prompt and seed; unseeded requests get seeds from the
server's generator.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import random
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from execrl.rollout.engine import Engine, StepHook
from execrl.rollout.types import RolloutBatch, SamplingParams

if TYPE_CHECKING:
    import torch

__all__ = [
    "Batcher",
    "BatcherLimits",
    "Choice",
    "EngineFailed",
    "Generated",
    "QueueFull",
    "RequestTooLarge",
    "ServerStopping",
    "Streamed",
]

log = logging.getLogger("execrl.serve")

# (choice index, token id) as generated; None marks the end (the result future is then done).
Delta = tuple[int, int] | None


class EngineFailed(RuntimeError):
    """Generation failed (the engine raised); the requests of that call get HTTP 503."""


class ServerStopping(RuntimeError):
    """The server is shutting down; nothing new runs (HTTP 503)."""


class QueueFull(RuntimeError):
    """The tokens queued and running would exceed ``max_queued_tokens`` with this request (HTTP 429)."""


class RequestTooLarge(ValueError):
    """A request that could never fit in ``max_queued_tokens`` (HTTP 400 naming ``param``)."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class BatcherLimits:
    """How the batcher shares the engine (see the module docstring)."""

    max_prompts_per_batch: int = 32
    max_queued_tokens: int = 1 << 16  # SmolLM2-135M holds ~45 KB of keys/values per token: ~3 GB
    lanes: int = 2
    short_max_tokens: int = 256
    window_s: float = 0.02

    def __post_init__(self) -> None:
        for name in ("max_prompts_per_batch", "max_queued_tokens", "lanes", "short_max_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"BatcherLimits.{name} must be >= 1, got {getattr(self, name)}")
        if self.window_s < 0:
            raise ValueError(f"BatcherLimits.window_s must be >= 0, got {self.window_s}")


@dataclass(frozen=True)
class Choice:
    text: str
    token_ids: tuple[int, ...]
    finish_reason: str  # "stop" | "length"
    stop_string: str | None = None  # the stop string that ended it (cut from ``text``)


@dataclass(frozen=True)
class Generated:
    """One request's answer: ``n`` choices and its token counts."""

    choices: tuple[Choice, ...]
    prompt_tokens: int

    @property
    def completion_tokens(self) -> int:
        return sum(len(c.token_ids) for c in self.choices)

    def usage(self) -> dict[str, int]:
        """OpenAI's ``usage`` object."""
        prompt, completion = self.prompt_tokens, self.completion_tokens
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


@dataclass(eq=False)
class _Job:
    prompt_ids: tuple[int, ...]
    params: SamplingParams
    seeded: bool
    future: asyncio.Future[Generated] = field(repr=False)
    deltas: asyncio.Queue[Delta] | None = field(default=None, repr=False)  # streamed requests only
    arrived_s: float = 0.0
    abandoned: bool = False  # its future was cancelled (read by the engine thread's step hook)

    @property
    def tokens(self) -> int:
        """What the request may hold at most: n x (prompt + max_new_tokens) tokens."""
        return self.params.samples_per_prompt * (len(self.prompt_ids) + self.params.max_new_tokens)

    def close_stream(self) -> None:
        if self.deltas is not None:
            self.deltas.put_nowait(None)


@dataclass(frozen=True)
class Streamed:
    """A streamed request: its tokens as they come (``deltas``, ending with None), then the answer."""

    deltas: asyncio.Queue[Delta]
    result: asyncio.Future[Generated]


def trim_at_stop(text: str, stops: Sequence[str]) -> tuple[str, bool]:
    """``text`` cut before the earliest stop string (OpenAI excludes it), and whether one was found."""
    cut, stop = cut_at_stop(text, stops)
    return cut, stop is not None


def cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, str | None]:
    """``text`` cut before the earliest stop string, and that stop string (None: no stop string)."""
    cuts = [(i, s) for s in stops if (i := text.find(s)) >= 0]
    if not cuts:
        return text, None
    at, stop = min(cuts, key=lambda cut: cut[0])
    return text[:at], stop


def split_batch(batch: RolloutBatch, stops: Sequence[str]) -> list[Generated]:
    """Per prompt of ``batch``: its ``samples_per_prompt`` choices (prompt-major rows)."""
    n = batch.samples_per_prompt
    out = []
    for p, prompt in enumerate(batch.prompt_token_ids):
        choices = []
        for row in range(p * n, (p + 1) * n):
            text, stop = cut_at_stop(batch.texts[row], stops)
            finish = "stop" if stop is not None else batch.finish_reasons[row]
            choices.append(Choice(text, tuple(batch.completion_token_ids(row)), finish, stop))
        out.append(Generated(tuple(choices), len(prompt)))
    return out


def _fail(jobs: Sequence[_Job], exc: BaseException) -> None:
    for job in jobs:
        if not job.future.done():
            job.future.set_exception(exc)
        job.close_stream()


def _takes_step_hook(engine: Engine) -> bool:
    return "on_step" in inspect.signature(engine.generate).parameters


@dataclass(eq=False)
class _Lane:
    index: int
    max_new_tokens: int | None  # None: any request
    executor: ThreadPoolExecutor = field(repr=False)
    running: int = 0  # prompts in its current call
    in_thread: bool = False  # its thread is inside engine.generate (even after its task was cancelled)

    def accepts(self, job: _Job) -> bool:
        return self.max_new_tokens is None or job.params.max_new_tokens <= self.max_new_tokens


class Batcher:
    """Queue of pending requests, drained into grouped ``engine.generate`` calls on engine lanes."""

    def __init__(
        self,
        engine: Engine,
        *,
        limits: BatcherLimits | None = None,
        max_prompts_per_batch: int | None = None,
        window_s: float | None = None,
        seed: int = 0,
    ) -> None:
        """``max_prompts_per_batch`` and ``window_s`` override ``limits``' fields (kept for callers that
        set only those)."""
        limits = limits or BatcherLimits()
        if max_prompts_per_batch is not None or window_s is not None:
            limits = replace(
                limits,
                max_prompts_per_batch=limits.max_prompts_per_batch
                if max_prompts_per_batch is None
                else max_prompts_per_batch,
                window_s=limits.window_s if window_s is None else window_s,
            )
        self.limits, self.engine = limits, engine
        self._pending: list[_Job] = []
        self._changed: asyncio.Condition | None = None
        self._lanes = [
            _Lane(i, None if i == 0 else limits.short_max_tokens, ThreadPoolExecutor(1, f"execrl-engine-{i}"))
            for i in range(limits.lanes)
        ]
        self._tasks: list[asyncio.Task[None]] = []
        self._rng = random.Random(seed)
        self._streams = _takes_step_hook(engine)
        self.stopping = False
        self.failure: BaseException | None = None  # a bug in the engine: nothing runs any more
        self.last_failure: str | None = None
        self.consecutive_failures = 0
        self.failures = 0
        self.held_tokens = 0
        self.batches_run = 0
        self.prompts_run = 0

    async def start(self) -> None:
        self._changed = asyncio.Condition()
        self._tasks = [asyncio.create_task(self._lane_loop(lane)) for lane in self._lanes]

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Finish running rows at their next step, fail what waits, wait <= ``timeout_s`` for the lanes."""
        self.stopping = True
        pending, self._pending = self._pending, []
        _fail(pending, ServerStopping("the server is shutting down"))
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()
        if self._tasks:
            done, late = await asyncio.wait(self._tasks, timeout=timeout_s)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    log.error("an engine lane had failed: %r", task.exception())
            for task in late:
                log.warning("an engine lane did not stop within %.0f s; leaving it", timeout_s)
                task.cancel()
        for lane in self._lanes:
            lane.executor.shutdown(wait=False, cancel_futures=True)

    @property
    def queued(self) -> int:
        """Requests waiting for an engine lane (not counting the calls running)."""
        return len(self._pending)

    @property
    def running(self) -> int:
        """Prompts in the engine calls running now."""
        return sum(lane.running for lane in self._lanes)

    @property
    def engine_busy(self) -> bool:
        """Whether an engine thread is inside ``generate`` (after :meth:`stop`: one that ignored it)."""
        return any(lane.in_thread for lane in self._lanes)

    async def submit(self, prompt_ids: Sequence[int], params: SamplingParams, *, seeded: bool) -> Generated:
        return await (await self._enqueue(prompt_ids, params, seeded, None))

    async def submit_stream(
        self, prompt_ids: Sequence[int], params: SamplingParams, *, seeded: bool
    ) -> Streamed:
        """Queue a request whose tokens arrive in ``deltas`` while its batch decodes. Cancel ``result`` when
        the client leaves: its rows then stop, the batch goes on."""
        deltas: asyncio.Queue[Delta] = asyncio.Queue()
        return Streamed(deltas, await self._enqueue(prompt_ids, params, seeded, deltas))

    def check_fits(self, tokens: int) -> None:
        """Refuse a request of ``tokens`` (n x (prompt + max_tokens)) that could never be admitted."""
        cap = self.limits.max_queued_tokens
        if tokens > cap:
            raise RequestTooLarge(
                f"this request may hold {tokens} tokens (n x (prompt tokens + max_tokens)); this server "
                f"holds at most {cap} (server option --max-queued-tokens): lower n or max_tokens",
                param="max_tokens",
            )

    async def _enqueue(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams,
        seeded: bool,
        deltas: asyncio.Queue[Delta] | None,
    ) -> asyncio.Future[Generated]:
        if self.failure is not None:
            raise EngineFailed(f"the engine failed earlier ({self.failure!r}); restart the server")
        if self.stopping or self._changed is None:
            raise ServerStopping(
                "the server is shutting down" if self.stopping else "the server is not started"
            )
        loop = asyncio.get_running_loop()
        job = _Job(tuple(prompt_ids), params, seeded, loop.create_future(), deltas, loop.time())
        self.check_fits(job.tokens)
        if self.held_tokens + job.tokens > self.limits.max_queued_tokens:
            raise QueueFull(
                f"the server holds {self.held_tokens} of its {self.limits.max_queued_tokens} queued tokens and "
                f"this request needs {job.tokens}; retry later"
            )
        self.held_tokens += job.tokens
        job.future.add_done_callback(functools.partial(self._release, job))
        self._pending.append(job)
        async with self._changed:
            self._changed.notify_all()
        return job.future

    def _release(self, job: _Job, future: asyncio.Future[Generated]) -> None:
        self.held_tokens -= job.tokens
        if future.cancelled():
            job.abandoned = True
            if job in self._pending:
                self._pending.remove(job)

    async def _lane_loop(self, lane: _Lane) -> None:
        assert self._changed is not None
        while True:
            async with self._changed:
                await self._changed.wait_for(lambda: self.stopping or any(map(lane.accepts, self._pending)))
            oldest = next((job for job in self._pending if lane.accepts(job)), None)
            if self.stopping:
                return
            if oldest is None:
                continue
            wait_s = oldest.arrived_s + self.limits.window_s - asyncio.get_running_loop().time()
            if wait_s > 0:  # a burst of requests arrives over a few ms: let it gather
                await asyncio.sleep(wait_s)
            group = self._take(lane)
            if group:
                await self._run(group, lane)

    def _take(self, lane: _Lane) -> list[_Job]:
        """The oldest request this lane may run and every queued one that can share its call."""
        first = next((job for job in self._pending if lane.accepts(job)), None)
        if first is None or self.stopping:
            return []
        if first.seeded:
            group = [first]
        else:
            key = replace(first.params, seed=0)
            same = (j for j in self._pending if not j.seeded and replace(j.params, seed=0) == key)
            group = [j for j in same if lane.accepts(j)][: self.limits.max_prompts_per_batch]
        for job in group:
            self._pending.remove(job)
        return group

    async def _run(self, group: list[_Job], lane: _Lane) -> None:
        params = group[0].params
        if not group[0].seeded:
            params = replace(params, seed=self._rng.randrange(2**62))
        prompts = [list(job.prompt_ids) for job in group]
        loop = asyncio.get_running_loop()
        generate = self.engine.generate
        if self._streams:
            hook = self._step_hook(loop, group, params.samples_per_prompt)
            generate = functools.partial(generate, on_step=hook)  # type: ignore[call-arg]

        def call() -> RolloutBatch:
            lane.in_thread = True
            try:
                return generate(prompts, params)
            finally:
                lane.in_thread = False

        lane.running = len(group)
        try:
            batch = await loop.run_in_executor(lane.executor, call)
        except ValueError as exc:  # the engine refused the inputs: each waiting request gets the error
            _fail(group, exc)
            return
        except (RuntimeError, MemoryError) as exc:  # a refused allocation, a device error: this call only
            self._failed(group, exc)
            return
        except BaseException as exc:  # a bug: every waiting request learns it, later ones are refused
            self.failure = exc
            _fail([*group, *self._pending], EngineFailed(f"generation failed: {exc!r}"))
            self._pending = []
            raise
        finally:
            lane.running = 0
        self.consecutive_failures = 0
        self.batches_run += 1
        self.prompts_run += len(group)
        self._deliver(group, batch, params)

    def _failed(self, group: list[_Job], exc: BaseException) -> None:
        self.failures += 1
        self.consecutive_failures += 1
        self.last_failure = f"{type(exc).__name__}: {str(exc)[:300]}"
        log.error("generation failed for %d requests (the server goes on): %s", len(group), self.last_failure)
        _fail(group, EngineFailed(f"generation failed: {self.last_failure}; retry, or send less"))

    def _deliver(self, group: list[_Job], batch: RolloutBatch, params: SamplingParams) -> None:
        if self.stopping:
            _fail(group, ServerStopping("the server is shutting down"))
            return
        for job, result in zip(group, split_batch(batch, params.stop_strings), strict=True):
            if not job.future.done():  # a client that disconnected cancelled its future
                job.future.set_result(result)
            job.close_stream()

    def _step_hook(self, loop: asyncio.AbstractEventLoop, group: list[_Job], n: int) -> StepHook:
        """Runs on the engine thread: forwards one step's tokens to the loop in one call, and names the
        rows to finish now (requests whose client left; every row once the server is stopping)."""
        streamed = any(job.deltas is not None for job in group)

        def deliver(rows: list[int], tokens: list[int]) -> None:
            for row, token in zip(rows, tokens, strict=True):
                job = group[row // n]
                if job.deltas is not None and not job.future.done():
                    job.deltas.put_nowait((row % n, token))

        def hook(rows: torch.Tensor, tokens: torch.Tensor) -> Collection[int] | None:
            if streamed:
                loop.call_soon_threadsafe(deliver, rows.tolist(), tokens.tolist())
            if self.stopping:
                return list(rows.tolist())
            if not any(job.abandoned for job in group):
                return None
            return [r for r in rows.tolist() if group[r // n].abandoned]

        return hook
