"""The data of the spine: what crosses from an environment and a model backend into the rollout loop, and
the ``Episode`` that leaves it for the trainer.

An episode is one context: the task's prompt, then model turns and what the environment answered between
them (visible-test feedback, tool output). A single-turn completion is an episode of one turn. Everything
is frozen and holds plain Python values (no tensors), so an episode pickles cheaply across processes (Ray)
and reads the same in a debugger; the one batch builder (``batch.py``) turns a list of them into the
trainer's ``TrainBatch``.

Token layout of ``Episode.token_ids``: ``[0, prompt_tokens)`` is the first prompt (identical for every
episode of a group: the shared-prompt forward computes it once), then every model turn as the exact ids the
engine sampled (``loss_mask`` True, ``logprobs`` and ``sampling_logprobs`` filled) and every environment
message as the ids the chat template renders around its content (``loss_mask`` False). An episode from a
backend that works in messages only (an OpenAI-compatible endpoint) has no ids: ``token_ids`` is empty,
and it serves evaluation, never training.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from execrl.rewards import Score
    from execrl.rollout.types import SamplingParams

__all__ = [
    "Completion",
    "Context",
    "Episode",
    "FinishReason",
    "Message",
    "Prompt",
    "RawCall",
    "Response",
    "Turn",
    "TurnRequest",
    "TurnResult",
    "TurnView",
    "Verdict",
]

Message = Mapping[str, Any]  # {"role", "content"[, "tool_calls", "tool_call_id"]}: the OpenAI wire format
FinishReason = Literal["stop", "length", "error"]


@dataclass(frozen=True)
class Turn:
    """One model turn inside ``Episode.token_ids``: ``[start, end)`` are the ids the model sampled."""

    start: int
    end: int
    finish_reason: FinishReason  # "stop": EOS or a stop string; "length": a token cap cut it; "error"


@dataclass(frozen=True)
class Verdict:
    """The environment's judgement of an episode's final answer (the reward the advantages see)."""

    reward: float
    valid: bool  # False: the reward is unknown (a sandbox error, an unparseable judge reply): kept out of the loss
    passed: bool
    reason: str  # the score's reason code ("passed", "wrong_answer", "sandbox_error", ...)
    score: Score | None = None  # the hidden-test score itself (the reward audit reads its execution)


@dataclass(frozen=True)
class Episode:
    task_index: int  # the task's position in the call's task list: the group of group-relative advantages
    task_id: str
    sample: int  # which of the group's samples (0-based)
    token_ids: tuple[int, ...]  # the whole context (see the module docstring); empty for a message backend
    loss_mask: tuple[bool, ...]  # True on the model's sampled tokens
    logprobs: tuple[float, ...]  # log pi(token) at temperature 1 of each sampled token, 0.0 elsewhere
    sampling_logprobs: tuple[float, ...]  # log q(token) of the distribution it was drawn from, 0.0 elsewhere
    prompt_tokens: int  # the first prompt's length (the group's shared context)
    turns: tuple[Turn, ...]
    messages: tuple[Message, ...]  # the conversation as messages (reports, traces, an HTTP backend)
    text: str  # the final answer: the last model turn's text
    stop: (
        str  # why the episode ended: "answer", "max_turns", "max_tool_calls", "episode_tokens", "error", ...
    )
    verdict: Verdict
    info: Mapping[str, Any] = field(default_factory=dict)  # the environment's counters and records
    error: str = ""  # a backend error that ended the episode (an endpoint's HTTP status, say)

    @property
    def reward(self) -> float:
        return self.verdict.reward

    @property
    def valid(self) -> bool:
        return self.verdict.valid

    @property
    def passed(self) -> bool:
        return self.verdict.passed

    @property
    def model_tokens(self) -> int:
        """Tokens the model sampled, all turns."""
        return sum(t.end - t.start for t in self.turns)

    @property
    def longest_turn_tokens(self) -> int:
        return max((t.end - t.start for t in self.turns), default=0)

    @property
    def truncated(self) -> bool:
        """A token cap cut one of the model's turns (DAPO's overlong filtering and the length curriculum)."""
        return any(t.finish_reason == "length" for t in self.turns)

    @property
    def tokens_after_prompt(self) -> int:
        return len(self.token_ids) - self.prompt_tokens


@dataclass(frozen=True)
class Prompt:
    """How an environment opens a task's episodes: the first messages, the tool declarations for a chat
    template that renders ``tools`` (None otherwise), and stop strings that end a model turn early (the end
    of a tool call)."""

    messages: tuple[Message, ...]
    tools: tuple[Mapping[str, Any], ...] | None = None
    stop_strings: tuple[str, ...] = ()


@dataclass(frozen=True)
class RawCall:
    """A tool call as an OpenAI-compatible endpoint returned it (``tool_calls``), unchecked."""

    id: str
    name: str
    arguments: Any  # a JSON string (the wire format) or an already decoded value


@dataclass(frozen=True)
class TurnView:
    """What an environment sees of an episode's newest model turn."""

    episode: int  # the episode's index in the rollout (task-major: task i, sample j -> i * samples + j)
    task_index: int
    turn: int  # 1-based number of this model turn in the episode
    text: str  # the turn's text (special tokens skipped)
    finish_reason: FinishReason
    tool_calls: tuple[RawCall, ...] = ()  # structured calls of a message backend; () for a token backend
    tokens_left: int | None = None  # the episode's token budget left after this turn (None: unknown)
    error: str = ""  # the backend could not answer this turn (no text): the episode ends with "error"
    prompt_tokens: int = 0  # the context this turn answered, in tokens (a message backend: its usage)
    completion_tokens: int = 0


@dataclass(frozen=True)
class Response:
    """An environment's answer to one model turn: messages to append and go on, or done."""

    done: bool
    stop: str = ""  # why the episode ends (with ``done``)
    messages: tuple[Message, ...] = ()  # appended before the next model turn (``tool``/``user`` messages)
    content_token_caps: tuple[int | None, ...] = ()  # per message: cut its content to this many tokens
    content_wrappers: tuple[tuple[str, str] | None, ...] = ()  # per message: text around the (cut) content
    restart_with: tuple[Message, ...] | None = None  # the next turn answers these messages afresh (eval only)
    info: Mapping[str, float] = field(default_factory=dict)  # counters added to the episode's ``info``


@dataclass(frozen=True)
class TurnRequest:
    """One model turn to sample: ``params.samples_per_prompt`` continuations of ``context`` (a group's first
    turn asks for the whole group at once, so a backend can share the prompt's keys/values), each at most
    ``max_new_tokens`` long. ``params.max_new_tokens`` is the turn cap every request of the rollout shares;
    ``max_new_tokens`` may be lower (what is left of the episode's budget): a batching backend samples the
    shared cap and cuts, since a prefix of a sample is a sample under the shorter cap."""

    key: int  # the loop's id of the request's first episode
    context: Context
    params: SamplingParams
    max_new_tokens: int


@dataclass(frozen=True)
class Completion:
    """One sampled model turn."""

    token_ids: tuple[int, ...]  # () for a message backend
    logprobs: tuple[float, ...]
    sampling_logprobs: tuple[float, ...]
    text: str
    finish_reason: FinishReason
    tool_calls: tuple[RawCall, ...] = ()
    message: Message | None = None  # a message backend's assistant message as the endpoint returned it
    usage_prompt_tokens: int | None = None  # a message backend's token counts (the server's ``usage``)
    usage_completion_tokens: int | None = None
    error: str = ""  # the backend could not answer (an HTTP status, a refused prompt): no text


@dataclass(frozen=True)
class TurnResult:
    key: int
    completions: tuple[Completion, ...]  # ``samples`` of them


@dataclass(frozen=True)
class Context:
    """An episode's conversation so far, as a backend keeps it: the messages (every backend) and, for a
    backend that works in tokens, the ids with their loss mask and behaviour log-probs, the first prompt's
    length and the model turns' spans. A message backend leaves the token fields empty and counts tokens
    from the server's ``usage`` (``usage_tokens``: tokens after the first prompt; None until known)."""

    messages: tuple[Message, ...]
    tools: tuple[Mapping[str, Any], ...] | None = None
    token_ids: tuple[int, ...] = ()
    loss_mask: tuple[bool, ...] = ()
    logprobs: tuple[float, ...] = ()
    sampling_logprobs: tuple[float, ...] = ()
    prompt_tokens: int = 0
    turns: tuple[Turn, ...] = ()
    usage_first_prompt_tokens: int | None = None
    usage_tokens: int | None = None
