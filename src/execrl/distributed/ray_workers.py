"""The worker roles, as plain classes; ``ray_executor.py`` makes Ray actors of them (this file has no ray).

Kept free of ray so each role can be unit-tested in this process, and so a worker runs the same code the
in-process executor runs: a rollout worker's engine call is ``engine.generate`` inside the local backend's
own ``session`` (the keys/values of a multi-turn rollout's earlier turns reused exactly as in process), and a
sandbox worker's environment is ``components.setup.build_environment`` over its own sandbox, driven through
``Environment.start`` / ``LiveEnvironment.respond`` / ``judge`` / ``close`` / ``report``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from execrl.config import TrainConfig
    from execrl.episodes import Final, LiveEnvironment, Prompt, Response, TurnView, Verdict
    from execrl.rollout.types import RolloutBatch, SamplingParams
    from execrl.tasks.schema import Task

__all__ = ["RolloutWorker", "SandboxWorker", "StaleWeights", "TurnSession"]


class StaleWeights(RuntimeError):
    """A rollout worker was asked to generate with weights older than the staleness bound allows."""


@dataclass(frozen=True)
class TurnSession:
    """One rollout call's multi-turn session on a rollout worker: what ``LocalBackend.session`` is in
    process (keys/values of earlier turns kept for the later ones, freed when the call ends)."""

    id: str
    max_turns: int
    reuse_kv_max_bytes: int


class RolloutWorker:
    """An engine with its own model replica; weights arrive by version from the trainer driver."""

    def __init__(self, config: TrainConfig) -> None:
        from execrl.components import setup

        # Architecture, tokenizer (and with LoRA the frozen base plus empty adapters); weights come by version.
        model, tokenizer, _ = setup.load_policy(config)
        model.train(False)  # eval mode (PreTrainedModel.eval is untyped)
        self.model, self.tokenizer = model, tokenizer
        # With lora.fold_for_sampling: over a folded copy, refolded when load_weights writes new adapters.
        self.engine = setup.rollout_engine(config, model, tokenizer)
        self.version = -1  # no weights received yet: generate refuses until the first load
        self._session: tuple[str, ExitStack] | None = None
        self.last_sync: dict[str, float] = {}  # the engine's last verified sync (rollout.engine=vllm)

    def load_weights(self, version: int, state: dict[str, Any]) -> int:
        """Copy ``state`` (a CPU state dict from the object store; with LoRA the adapters' only) into the
        replica, strictly."""
        import torch

        from execrl.trainer.lora import has_adapters, load_adapter_state_dict

        with torch.no_grad():
            if has_adapters(self.model):
                load_adapter_state_dict(self.model, state)
            else:
                self.model.load_state_dict(state, strict=True)
        sync = getattr(self.engine, "sync_weights", None)
        if sync is not None:  # rollout.engine=vllm: the replica's weights go on into this worker's engine
            self.last_sync = sync(self.model, version).metrics()
        self.version = version
        return version

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        params: SamplingParams,
        min_version: int,
        session: TurnSession | None = None,
    ) -> tuple[RolloutBatch, int]:
        """One engine call inside ``session`` (None: outside any); returns the rollout and the weight
        version it used."""
        if self.version < min_version:
            raise StaleWeights(f"weights version {self.version} < {min_version} (the staleness bound)")
        self._enter(session)
        return self.engine.generate(prompts, params), self.version

    def end_session(self, session_id: str) -> None:
        """The rollout call ``session_id`` ended: free its keys/values (another call's session stays)."""
        if self._session is not None and self._session[0] == session_id:
            self._leave()

    def _enter(self, session: TurnSession | None) -> None:
        """One session at a time (rollout calls of a run do not overlap): a call of another session, or of
        none, ends the one held, so an engine call never sees keys/values the in-process call would not."""
        if session is not None and self._session is not None and self._session[0] == session.id:
            return
        self._leave()
        if session is None:
            return
        from execrl.episodes import LocalBackend

        stack = ExitStack()
        backend = LocalBackend(self.engine, self.tokenizer, reuse_kv_max_bytes=session.reuse_kv_max_bytes)
        stack.enter_context(backend.session(session.max_turns))
        self._session = (session.id, stack)

    def _leave(self) -> None:
        if self._session is not None:
            _, stack = self._session
            self._session = None
            stack.close()

    def sync_metrics(self) -> dict[str, float]:
        """The ``sync/*`` metrics of the last verified sync into this worker's engine (none without one)."""
        return dict(self.last_sync)

    def close(self) -> None:
        """Stop an engine that runs apart from this worker (``rollout.engine=vllm``)."""
        close = getattr(self.engine, "close", None)
        if close is not None:
            close()

    def pid(self) -> int:
        return os.getpid()


class _NoEngine:
    """The engine of a sandbox worker's backend: environments read its tokenizer and chat template (how a
    tool block or feedback renders), never sample through it (the rollout workers do)."""

    def generate(self, prompt_token_ids: Sequence[Sequence[int]], params: SamplingParams) -> RolloutBatch:
        raise RuntimeError(
            "a sandbox worker does not sample: its backend renders, the rollout workers generate"
        )


class SandboxWorker:
    """A sandbox (its own pre-forked workers) and the run's environment over it: each rollout call's share
    of tasks is started here, and its episodes' turns answered and judged next to their sessions."""

    def __init__(self, config: TrainConfig, tokenizer: Any) -> None:
        from execrl.components import setup
        from execrl.episodes import LocalBackend

        setup.register_extra_verifiers(config)
        self.sandbox = setup.build_sandbox(config, sessions=setup.sessions_held(config))
        self.environment = setup.build_environment(config, self.sandbox)
        self.backend = LocalBackend(_NoEngine(), tokenizer)
        self.live: dict[str, LiveEnvironment] = {}

    def start(self, rollout: str, tasks: Sequence[Task], samples: int) -> tuple[int, list[Prompt]]:
        """Open ``tasks`` (their sessions, ``samples`` per task) for rollout call ``rollout``; its most
        model turns per episode and each task's prompt, asked in task order as the loop asks them."""
        live = self.environment.start(tasks, samples, self.backend)
        try:
            prompts = [live.prompt(i) for i in range(len(tasks))]
        except BaseException:
            live.close()
            raise
        self.live[rollout] = live
        return live.max_turns, prompts

    def respond(self, rollout: str, turns: Sequence[TurnView]) -> list[Response]:
        return self.live[rollout].respond(turns)

    def judge(self, rollout: str, finals: Sequence[Final]) -> list[Verdict]:
        return self.live[rollout].judge(finals)

    def close(self, rollout: str) -> None:
        self.live[rollout].close()

    def report(self, rollout: str) -> dict[int, dict[str, Any]]:
        """The rollout call's per-episode records; the call is forgotten here."""
        return self.live.pop(rollout).report()

    def pid(self) -> int:
        return os.getpid()
