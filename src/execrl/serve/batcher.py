"""Continuous request batching for ``execrl serve``: concurrent requests share one ``engine.generate``.

Why: on CPU (and more so on a GPU) one decode step over 16 rows costs little more than over one row, so a
server that runs requests one at a time leaves most of the hardware idle (``execrl bench serve`` measures
the gap against a naive one-request-at-a-time server). Requests that arrive while a generation runs wait
in a queue; when the engine is free, everything queued is grouped by sampling parameters and each group
runs as one call (up to ``max_prompts_per_batch`` prompts). After the first request of an idle spell the
batcher waits ``window_s`` (20 ms) so that a burst of clients lands in one batch instead of the first
request running alone while the others wait for it (what the first `execrl bench serve` run showed).

Streaming: a request submitted with :meth:`Batcher.submit_stream` gets its tokens as the batch decodes.
The engine's ``on_step`` hook (engines whose ``generate`` takes it, e.g. ``HFEngine``) runs on the engine
thread after every decode step; it hands the step's (row, token) pairs to the event loop
(``call_soon_threadsafe``, one call per step), which puts each streamed request's own tokens in its
queue. Requests that do not stream cost nothing extra; an engine without the hook streams everything at
the end. A client that goes away only closes its queue: the batch carries on for the others.

Limits: requests join only at batch boundaries (no iteration-level scheduling as in vLLM/Orca, so a short
request behind a long one waits); only requests with identical sampling parameters share a call. A request
with an explicit ``seed`` always runs alone, so its output depends only on its own prompt and seed;
unseeded requests get seeds from the server's generator.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import random
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from execrl.rollout.engine import Engine, StepHook
from execrl.rollout.types import RolloutBatch, SamplingParams

if TYPE_CHECKING:
    import torch

__all__ = ["Batcher", "Choice", "EngineFailed", "Generated", "Streamed"]

# (choice index, token id) as generated; None marks the end (the result future is then done).
Delta = tuple[int, int] | None


class EngineFailed(RuntimeError):
    """The engine raised something other than a refusal of the inputs; the server stops generating."""


@dataclass(frozen=True)
class Choice:
    text: str
    token_ids: tuple[int, ...]
    finish_reason: str  # "stop" | "length"


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
    cuts = [i for i in (text.find(s) for s in stops) if i >= 0]
    return (text[: min(cuts)], True) if cuts else (text, False)


def split_batch(batch: RolloutBatch, stops: Sequence[str]) -> list[Generated]:
    """Per prompt of ``batch``: its ``samples_per_prompt`` choices (prompt-major rows)."""
    n = batch.samples_per_prompt
    out = []
    for p, prompt in enumerate(batch.prompt_token_ids):
        choices = []
        for row in range(p * n, (p + 1) * n):
            text, stopped = trim_at_stop(batch.texts[row], stops)
            finish = "stop" if stopped else batch.finish_reasons[row]
            choices.append(Choice(text, tuple(batch.completion_token_ids(row)), finish))
        out.append(Generated(tuple(choices), len(prompt)))
    return out


def _fail(jobs: list[_Job], exc: BaseException) -> None:
    for job in jobs:
        if not job.future.done():
            job.future.set_exception(exc)
        job.close_stream()


def _takes_step_hook(engine: Engine) -> bool:
    return "on_step" in inspect.signature(engine.generate).parameters


class Batcher:
    """Queue of pending requests, drained into grouped ``engine.generate`` calls on one worker thread."""

    def __init__(
        self, engine: Engine, *, max_prompts_per_batch: int = 32, window_s: float = 0.02, seed: int = 0
    ) -> None:
        if max_prompts_per_batch < 1 or window_s < 0:
            raise ValueError(
                f"max_prompts_per_batch must be >= 1 and window_s >= 0, got {max_prompts_per_batch}"
            )
        self.window_s = window_s
        self.engine = engine
        self.max_prompts_per_batch = max_prompts_per_batch
        self._queue: asyncio.Queue[_Job] = asyncio.Queue()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="execrl-engine")
        self._rng = random.Random(seed)
        self._task: asyncio.Task[None] | None = None
        self._streams = _takes_step_hook(engine)
        self.failure: BaseException | None = None
        self.batches_run = 0
        self.prompts_run = 0

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._executor.shutdown(wait=True)

    @property
    def queued(self) -> int:
        """Requests waiting for the engine (not counting the batch it is running)."""
        return self._queue.qsize()

    async def submit(self, prompt_ids: Sequence[int], params: SamplingParams, *, seeded: bool) -> Generated:
        return await (await self._enqueue(prompt_ids, params, seeded, None))

    async def submit_stream(
        self, prompt_ids: Sequence[int], params: SamplingParams, *, seeded: bool
    ) -> Streamed:
        """Queue a request whose tokens arrive in ``deltas`` while its batch decodes. Cancel ``result`` when
        the client leaves: its tokens are then dropped, the batch goes on."""
        deltas: asyncio.Queue[Delta] = asyncio.Queue()
        return Streamed(deltas, await self._enqueue(prompt_ids, params, seeded, deltas))

    async def _enqueue(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams,
        seeded: bool,
        deltas: asyncio.Queue[Delta] | None,
    ) -> asyncio.Future[Generated]:
        if self.failure is not None:
            raise EngineFailed(f"the engine failed earlier ({self.failure!r}); restart the server")
        future: asyncio.Future[Generated] = asyncio.get_running_loop().create_future()
        await self._queue.put(_Job(tuple(prompt_ids), params, seeded, future, deltas))
        return future

    async def _loop(self) -> None:
        while True:
            jobs = [await self._queue.get()]
            if self.window_s > 0:  # a burst of requests arrives over a few ms: let it gather
                await asyncio.sleep(self.window_s)
            while not self._queue.empty():
                jobs.append(self._queue.get_nowait())
            for group in self._groups(jobs):
                await self._run(group)

    def _groups(self, jobs: list[_Job]) -> list[list[_Job]]:
        groups: dict[object, list[list[_Job]]] = {}
        for job in jobs:
            key: object = job if job.seeded else replace(job.params, seed=0)
            chunks = groups.setdefault(key, [[]])
            if len(chunks[-1]) >= self.max_prompts_per_batch:
                chunks.append([])
            chunks[-1].append(job)
        return [chunk for chunks in groups.values() for chunk in chunks]

    async def _run(self, group: list[_Job]) -> None:
        params = group[0].params
        if not group[0].seeded:
            params = replace(params, seed=self._rng.randrange(2**62))
        prompts = [list(job.prompt_ids) for job in group]
        loop = asyncio.get_running_loop()
        generate = self.engine.generate
        if self._streams and any(job.deltas is not None for job in group):
            generate = functools.partial(
                generate, on_step=self._step_hook(loop, group, params.samples_per_prompt)
            )  # type: ignore[call-arg]
        try:
            batch = await loop.run_in_executor(self._executor, generate, prompts, params)
        except ValueError as exc:  # the engine refused the inputs: each waiting request gets the error
            _fail(group, exc)
            return
        except BaseException as exc:  # a broken engine: every waiting request learns it, then re-raise
            self.failure = exc
            _fail(group, EngineFailed(f"generation failed: {exc!r}"))
            while not self._queue.empty():
                _fail([self._queue.get_nowait()], EngineFailed(f"generation failed: {exc!r}"))
            raise
        self.batches_run += 1
        self.prompts_run += len(group)
        for job, result in zip(group, split_batch(batch, params.stop_strings), strict=True):
            if not job.future.done():  # a client that disconnected cancelled its future
                job.future.set_result(result)
            job.close_stream()

    @staticmethod
    def _step_hook(loop: asyncio.AbstractEventLoop, group: list[_Job], n: int) -> StepHook:
        """Runs on the engine thread: forwards one step's tokens to the loop in one call."""

        def deliver(rows: list[int], tokens: list[int]) -> None:
            for row, token in zip(rows, tokens, strict=True):
                job = group[row // n]
                if job.deltas is not None and not job.future.done():
                    job.deltas.put_nowait((row % n, token))

        def hook(rows: torch.Tensor, tokens: torch.Tensor) -> None:
            loop.call_soon_threadsafe(deliver, rows.tolist(), tokens.tolist())

        return hook
