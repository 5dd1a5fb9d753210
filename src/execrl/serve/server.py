"""``execrl serve``: an OpenAI-compatible HTTP server over the rollout engine (aiohttp).

Endpoints: ``POST /v1/chat/completions`` (``n``, ``temperature``, ``top_p``, ``max_tokens``, ``stop``,
``seed``, ``stream``, ``tools``; usage counts), ``GET /v1/models``, ``GET /health``. Concurrent requests are batched
into one generation (:mod:`execrl.serve.batcher`). The official ``openai`` Python client is the test client.

One request's path: the body is read under the sandbox service's edge rules (``sandbox/service/http_edge.py``:
Origin and Content-Type, Content-Length before reading, UTF-8, depth, integer length, surrogates), the
fields validated (``api.py``), then the server's caps (``ServeConfig``: ``n``, ``max_tokens``, prompt
tokens, queued tokens), each refusal an OpenAI-shaped 4xx naming ``param``. A request with ``tools`` is
validated on a worker thread (their JSON schemas are checked in pure Python), within caps on the tools
and the values of their schemas (``api.MAX_TOOLS``, ``api.MAX_TOOL_SCHEMA_VALUES``). The messages are measured
in characters first (a prompt of C characters has at least C / L tokens, L the tokenizer's longest
token), so a multi-megabyte message is refused without being tokenised; the rest is tokenised on a
worker thread, never on the event loop. A client that disconnects cancels its request (the handler is
cancelled, the engine finishes its rows at the next step). ``stream=true`` sends tokens as the batch
decodes them (:mod:`execrl.serve.stream`).

Authentication: none unless ``api_key`` is set (``--api-key`` or ``EXECRL_API_KEY``): then every
endpoint but ``/health`` wants ``Authorization: Bearer KEY`` (401 otherwise, OpenAI's ``invalid_api_key``).
An empty key given either way is refused at start (it served with no authentication).
Bind to localhost (the default) or put it behind a proxy with TLS: the key travels in clear over HTTP.
Plain-text content only (no images). Tool calls: ``tool_calls.py`` (rendered as ``execrl.tools`` trains
them; no streaming with tools).
"""

from __future__ import annotations

import asyncio
import hmac
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from execrl.rollout.types import SamplingParams
from execrl.sandbox.service.http_edge import BodyRefused, read_json_body
from execrl.sandbox.service.serialize import FieldProblem, RequestFieldError
from execrl.serve.api import MAX_N, ChatRequest, RequestError, error_body, parse_chat_request
from execrl.serve.background import RUNNER_OPTIONS, RunnerOptions
from execrl.serve.batcher import (
    Batcher,
    BatcherLimits,
    EngineFailed,
    Generated,
    QueueFull,
    RequestTooLarge,
    ServerStopping,
    Streamed,
)
from execrl.serve.stream import stream_chat
from execrl.serve.tool_calls import answer_message, chat_messages, declarations, encode_chat, renders_tools
from execrl.tools.calls import CALL_END

if TYPE_CHECKING:
    from execrl.rollout.hf_engine import HFEngine

__all__ = ["ServeConfig", "build_app", "engine_threads_alive"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class ServeConfig:
    """The server's settings; every cap is a CLI option of ``execrl serve`` (``--max-n`` ...).

    ``max_request_tokens``: the most ``max_tokens`` one request may ask; ``max_prompt_tokens``: the most
    prompt tokens (None: the model's context); ``max_queued_tokens``: n x (prompt + max_tokens) summed over
    every request queued or running (the KV-cache memory bound; 429 past it); ``short_request_tokens``:
    requests asking at most this many tokens may also run on the engine lanes kept for short requests
    (``engine_lanes - 1`` of them), so they never wait behind a long one; ``shutdown_timeout_s``: how long
    SIGTERM waits for running requests (they are stopped at their next decode step)."""

    model_name: str
    default_max_tokens: int = 256
    max_prompts_per_batch: int = 32
    seed: int = 0
    max_n: int = 16
    max_request_tokens: int = 2048
    max_prompt_tokens: int | None = None
    max_queued_tokens: int = 1 << 16
    short_request_tokens: int = 256
    engine_lanes: int = 2
    max_body_mb: int = 8
    allowed_origins: tuple[str, ...] = ()
    api_key: str | None = None
    shutdown_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        for name in ("default_max_tokens", "max_request_tokens", "max_queued_tokens", "max_body_mb"):
            if getattr(self, name) < 1:
                raise ValueError(f"ServeConfig.{name} must be >= 1, got {getattr(self, name)}")
        if not 1 <= self.max_n <= MAX_N:
            raise ValueError(f"ServeConfig.max_n must be in [1, {MAX_N}], got {self.max_n}")
        if self.default_max_tokens > self.max_request_tokens:
            raise ValueError(
                f"ServeConfig.default_max_tokens={self.default_max_tokens} is above max_request_tokens="
                f"{self.max_request_tokens}"
            )
        if self.max_prompt_tokens is not None and self.max_prompt_tokens < 1:
            raise ValueError(f"ServeConfig.max_prompt_tokens must be >= 1, got {self.max_prompt_tokens}")
        if self.api_key is not None and not self.api_key.strip():
            raise ValueError("ServeConfig.api_key is empty; leave it unset for no authentication")
        if not self.shutdown_timeout_s > 0:
            raise ValueError(f"ServeConfig.shutdown_timeout_s must be > 0, got {self.shutdown_timeout_s}")
        BatcherLimits(**self._batcher_fields())  # the lanes and token caps are valid

    def _batcher_fields(self) -> dict[str, int]:
        return {
            "max_prompts_per_batch": self.max_prompts_per_batch,
            "max_queued_tokens": self.max_queued_tokens,
            "lanes": self.engine_lanes,
            "short_max_tokens": self.short_request_tokens,
        }


@dataclass(frozen=True)
class _State:
    config: ServeConfig
    engine: HFEngine
    context_tokens: int
    max_prompt_tokens: int
    token_chars: int  # the longest token's text: a prompt of C characters has >= C / token_chars tokens
    tokenizing: ThreadPoolExecutor
    validating: ThreadPoolExecutor  # a request's tools are checked here, off the event loop
    template_tools: bool  # the chat template renders ``tools`` itself (tool_calls.renders_tools)


_BATCHER = web.AppKey("batcher", Batcher)
_STATE = web.AppKey("state", _State)


def _longest_token_chars(tokenizer: Any) -> int:
    """Characters of the longest entry of the vocabulary (a byte-level token is at least as long in its
    own alphabet as in the text it decodes to)."""
    return max((len(t) for t in tokenizer.get_vocab()), default=1) or 1


def build_app(engine: HFEngine, config: ServeConfig) -> web.Application:
    """The aiohttp application; the batcher starts with it and stops at shutdown."""
    app = web.Application(
        middlewares=[_openai_errors, _authenticate], client_max_size=config.max_body_mb << 20
    )
    context = int(getattr(engine.model.config, "max_position_embeddings", 0) or 1 << 30)
    app[_STATE] = _State(
        config,
        engine,
        context,
        min(context, config.max_prompt_tokens or context),
        _longest_token_chars(engine.tokenizer),
        ThreadPoolExecutor(1, thread_name_prefix="execrl-tokenize"),
        ThreadPoolExecutor(1, thread_name_prefix="execrl-validate"),
        renders_tools(engine.tokenizer),
    )
    limits = BatcherLimits(**config._batcher_fields())
    app[_BATCHER] = Batcher(engine, limits=limits, seed=config.seed)
    app[RUNNER_OPTIONS] = RunnerOptions(
        handler_cancellation=True, shutdown_timeout_s=config.shutdown_timeout_s
    )
    app.on_startup.append(_start)
    app.on_shutdown.append(_stop)
    app.on_cleanup.append(_cleanup)
    app.router.add_post("/v1/chat/completions", _chat)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/health", _health)
    return app


def engine_threads_alive(app: web.Application) -> bool:
    """Whether an engine lane of ``app`` still runs a generation (after shutdown: one that ignored the stop)."""
    return app[_BATCHER].engine_busy


async def _start(app: web.Application) -> None:
    await app[_BATCHER].start()


async def _stop(app: web.Application) -> None:
    await app[_BATCHER].stop(timeout_s=app[_STATE].config.shutdown_timeout_s)


async def _cleanup(app: web.Application) -> None:
    app[_STATE].tokenizing.shutdown(wait=False, cancel_futures=True)
    app[_STATE].validating.shutdown(wait=False, cancel_futures=True)


def _edge_error(problem: FieldProblem, status: int) -> RequestError:
    param = None if problem.field in ("body", "") or problem.field.startswith("/") else problem.field
    return RequestError(f"{problem.field}: {problem.message}", param=param, status=status, code=problem.kind)


@web.middleware
async def _openai_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every refusal leaves in OpenAI's error shape, with its HTTP status."""
    try:
        return await handler(request)
    except RequestError as err:
        return web.json_response(error_body(err), status=err.status)
    except BodyRefused as exc:
        return web.json_response(error_body(_edge_error(exc.problem, exc.status)), status=exc.status)
    except RequestFieldError as exc:
        return web.json_response(error_body(_edge_error(exc.problems[0], 400)), status=400)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        wrapped = RequestError(f"{exc.reason}: {request.method} {request.path}", status=exc.status)
        return web.json_response(error_body(wrapped), status=exc.status)


@web.middleware
async def _authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    key = request.app[_STATE].config.api_key
    if key is None or request.path == "/health":
        return await handler(request)
    sent = request.headers.get("Authorization", "")
    if not hmac.compare_digest(sent.encode("utf-8", "replace"), f"Bearer {key}".encode()):
        raise RequestError(
            "Incorrect or missing API key: send Authorization: Bearer <key> (server option --api-key)",
            status=401,
            code="invalid_api_key",
        )
    return await handler(request)


async def _models(request: web.Request) -> web.Response:
    name = request.app[_STATE].config.model_name
    model = {"id": name, "object": "model", "created": 0, "owned_by": "execrl"}
    return web.json_response({"object": "list", "data": [model]})


async def _health(request: web.Request) -> web.Response:
    """``status``: ok; degraded (the last generation failed: see ``last_failure``; requests still run);
    stopping or failed (HTTP 503: a bug in the engine stopped it, or the server is shutting down)."""
    batcher = request.app[_BATCHER]
    if batcher.failure is not None:
        status = "failed"
    elif batcher.stopping:
        status = "stopping"
    else:
        status = "degraded" if batcher.consecutive_failures else "ok"
    body = {
        "status": status,
        "batches": batcher.batches_run,
        "prompts": batcher.prompts_run,
        "queued": batcher.queued,
        "running": batcher.running,
        "queued_tokens": batcher.held_tokens,
        "max_queued_tokens": batcher.limits.max_queued_tokens,
        "failures": batcher.failures,
        "last_failure": batcher.last_failure if batcher.failure is None else repr(batcher.failure),
    }
    return web.json_response(body, status=503 if status in ("failed", "stopping") else 200)


async def _chat(request: web.Request) -> web.StreamResponse:
    state = request.app[_STATE]
    config = state.config
    body = await read_json_body(
        request, allowed_origins=config.allowed_origins, max_body_bytes=config.max_body_mb << 20
    )
    req = await _parse(state, body)
    if req.model != config.model_name:
        raise RequestError(
            f"model {req.model!r} is not served here; this server serves {config.model_name!r}",
            param="model",
            status=404,
            code="model_not_found",
        )
    max_new = _check_caps(config, req)
    prompt_ids = await _encode(state, req)
    params = _params(state, request.app[_BATCHER], req, prompt_ids, max_new)
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    batcher, seeded = request.app[_BATCHER], req.seed is not None
    try:
        if req.stream:
            streamed = await batcher.submit_stream(prompt_ids, params, seeded=seeded)
            return await _stream(request, state, req, streamed, completion_id)
        generated = await batcher.submit(prompt_ids, params, seeded=seeded)
    except (EngineFailed, ServerStopping, QueueFull, ValueError) as exc:
        raise _submit_error(exc) from exc
    return web.json_response(_completion_body(state, generated, completion_id, declarations(req)))


async def _parse(state: _State, body: Any) -> ChatRequest:
    """The request's fields (``api.py``); with ``tools``, on a worker thread: their JSON schemas are
    checked in pure Python (capped, ``api.MAX_TOOL_SCHEMA_VALUES``), which would pause ``/health``."""
    if not (isinstance(body, dict) and body.get("tools")):
        return parse_chat_request(body)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(state.validating, parse_chat_request, body)


def _submit_error(exc: BaseException) -> RequestError:
    if isinstance(exc, QueueFull):
        return RequestError(str(exc), status=429, code="rate_limit_exceeded", error_type="tokens")
    if isinstance(exc, ServerStopping):
        return RequestError(str(exc), status=503, code="server_stopping")
    if isinstance(exc, EngineFailed):
        return RequestError(str(exc), status=503, code="engine_failed")
    return RequestError(str(exc), param=getattr(exc, "param", None))


def _check_caps(config: ServeConfig, req: ChatRequest) -> int:
    """The request's max_tokens, after the server's caps on ``n`` and ``max_tokens``."""
    if req.n > config.max_n:
        raise RequestError(
            f"n={req.n} is above this server's cap of {config.max_n} (server option --max-n)", param="n"
        )
    max_new = req.new_tokens(config.default_max_tokens)
    if max_new > config.max_request_tokens:
        param = "max_completion_tokens" if req.max_completion_tokens else "max_tokens"
        raise RequestError(
            f"{param}={max_new} is above this server's cap of {config.max_request_tokens} "
            "(server option --max-request-tokens)",
            param=param,
        )
    return max_new


def _too_long(state: _State, what: str) -> RequestError:
    return RequestError(
        f"this model's maximum context length is {state.context_tokens} tokens and this server takes at "
        f"most {state.max_prompt_tokens} prompt tokens (server option --max-prompt-tokens); {what}",
        param="messages",
        code="context_length_exceeded",
    )


async def _encode(state: _State, req: ChatRequest) -> list[int]:
    """The prompt's token ids, tokenised on a worker thread after a bound in characters (module doc)."""
    messages = chat_messages(req, template_tools=state.template_tools)
    chars = sum(len(m["content"]) + len(m["role"]) for m in messages)
    if chars > state.max_prompt_tokens * state.token_chars:
        raise _too_long(state, f"the messages hold {chars} characters, more than that many tokens can")
    tools = declarations(req) if state.template_tools else None
    loop = asyncio.get_running_loop()
    prompt_ids = await loop.run_in_executor(
        state.tokenizing, encode_chat, state.engine.tokenizer, messages, tools
    )
    if len(prompt_ids) > state.max_prompt_tokens:
        raise _too_long(state, f"the messages take {len(prompt_ids)} tokens")
    return prompt_ids


def _params(
    state: _State, batcher: Batcher, req: ChatRequest, prompt_ids: list[int], max_new: int
) -> SamplingParams:
    if len(prompt_ids) + max_new > state.context_tokens:
        raise RequestError(
            f"this model's maximum context length is {state.context_tokens} tokens; the messages take "
            f"{len(prompt_ids)} and max_tokens asks for {max_new}",
            param="messages",
            code="context_length_exceeded",
        )
    try:
        batcher.check_fits(req.n * (len(prompt_ids) + max_new))
    except RequestTooLarge as exc:
        raise RequestError(str(exc), param=exc.param) from exc
    return SamplingParams(
        samples_per_prompt=req.n,
        max_new_tokens=max_new,
        temperature=req.temperature,
        top_p=req.top_p,
        stop_strings=(*req.stop_strings, CALL_END) if declarations(req) else req.stop_strings,
        seed=req.seed or 0,
    )


def _completion_body(
    state: _State, generated: Generated, completion_id: str, declared: list[dict[str, Any]] | None
) -> dict[str, Any]:
    choices = []
    for i, c in enumerate(generated.choices):
        message, finish = answer_message(c, declared)
        choices.append({"index": i, "message": message, "finish_reason": finish, "logprobs": None})
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": state.config.model_name,
        "choices": choices,
        "usage": generated.usage(),
    }


async def _stream(
    request: web.Request, state: _State, req: ChatRequest, streamed: Streamed, completion_id: str
) -> web.StreamResponse:
    base = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": state.config.model_name,
    }
    options = getattr(req, "stream_options", None)
    return await stream_chat(
        request,
        streamed,
        tokenizer=state.engine.tokenizer,
        stops=req.stop_strings,
        choices=req.n,
        base=base,
        include_usage=isinstance(options, dict) and bool(options.get("include_usage")),
    )
