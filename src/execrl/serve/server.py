"""``execrl serve``: an OpenAI-compatible HTTP server over the rollout engine (aiohttp).

Endpoints: ``POST /v1/chat/completions`` (``n``, ``temperature``, ``top_p``, ``max_tokens``, ``stop``,
``seed``, ``stream``; usage counts), ``GET /v1/models``, ``GET /health``. Concurrent requests are batched
into one generation (:mod:`execrl.serve.batcher`). The official ``openai`` Python client is the test client.

Streaming (``stream=true``) sends tokens as the batch decodes them (:mod:`execrl.serve.stream`); a
streamed request still shares its batch with the others. Limits: no authentication: bind to
localhost (the default) or put it behind a proxy. Plain-text content only (no images, no tools).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from execrl.rollout.types import SamplingParams
from execrl.serve.api import ChatRequest, RequestError, error_body, parse_chat_request
from execrl.serve.batcher import Batcher, EngineFailed, Generated, Streamed
from execrl.serve.stream import stream_chat

if TYPE_CHECKING:
    from execrl.rollout.hf_engine import HFEngine

__all__ = ["ServeConfig", "build_app"]


@dataclass(frozen=True)
class ServeConfig:
    model_name: str
    default_max_tokens: int = 256
    max_prompts_per_batch: int = 32
    seed: int = 0


@dataclass(frozen=True)
class _State:
    config: ServeConfig
    engine: HFEngine
    context_tokens: int


_BATCHER = web.AppKey("batcher", Batcher)
_STATE = web.AppKey("state", _State)


def build_app(engine: HFEngine, config: ServeConfig) -> web.Application:
    """The aiohttp application; the batcher starts and stops with it."""
    app = web.Application(middlewares=[_openai_errors], client_max_size=8 << 20)
    context = int(getattr(engine.model.config, "max_position_embeddings", 0) or 1 << 30)
    app[_STATE] = _State(config, engine, context)
    app[_BATCHER] = Batcher(engine, max_prompts_per_batch=config.max_prompts_per_batch, seed=config.seed)
    app.on_startup.append(_start)
    app.on_cleanup.append(_stop)
    app.router.add_post("/v1/chat/completions", _chat)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/health", _health)
    return app


async def _start(app: web.Application) -> None:
    await app[_BATCHER].start()


async def _stop(app: web.Application) -> None:
    await app[_BATCHER].stop()


@web.middleware
async def _openai_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Every refusal leaves in OpenAI's error shape, with its HTTP status."""
    try:
        return await handler(request)
    except RequestError as err:
        return web.json_response(error_body(err), status=err.status)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        wrapped = RequestError(f"{exc.reason}: {request.method} {request.path}", status=exc.status)
        return web.json_response(error_body(wrapped), status=exc.status)


async def _models(request: web.Request) -> web.Response:
    name = request.app[_STATE].config.model_name
    model = {"id": name, "object": "model", "created": 0, "owned_by": "execrl"}
    return web.json_response({"object": "list", "data": [model]})


async def _health(request: web.Request) -> web.Response:
    batcher = request.app[_BATCHER]
    counts = {"batches": batcher.batches_run, "prompts": batcher.prompts_run, "queued": batcher.queued}
    return web.json_response({"status": "ok", **counts})


async def _chat(request: web.Request) -> web.StreamResponse:
    state = request.app[_STATE]
    try:
        body = await request.json()
    except json.JSONDecodeError as exc:
        raise RequestError(f"the request body is not valid JSON: {exc}") from exc
    req = parse_chat_request(body)
    if req.model != state.config.model_name:
        raise RequestError(
            f"model {req.model!r} is not served here; this server serves {state.config.model_name!r}",
            param="model",
            status=404,
            code="model_not_found",
        )
    prompt_ids, params = _encode(state, req)
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    batcher, seeded = request.app[_BATCHER], req.seed is not None
    try:
        if req.stream:
            streamed = await batcher.submit_stream(prompt_ids, params, seeded=seeded)
            return await _stream(request, state, req, streamed, completion_id)
        generated = await batcher.submit(prompt_ids, params, seeded=seeded)
    except EngineFailed as exc:
        raise RequestError(str(exc), status=503, code="engine_failed") from exc
    except ValueError as exc:
        raise RequestError(str(exc)) from exc
    return web.json_response(_completion_body(state, generated, completion_id))


def _encode(state: _State, req: ChatRequest) -> tuple[list[int], SamplingParams]:
    from execrl.rollout.prompts import encode_prompts

    messages = [{"role": m.role, "content": m.content} for m in req.messages]
    prompt_ids = encode_prompts(state.engine.tokenizer, [messages])[0]
    max_new = req.new_tokens(state.config.default_max_tokens)
    if len(prompt_ids) + max_new > state.context_tokens:
        raise RequestError(
            f"this model's maximum context length is {state.context_tokens} tokens; the messages take "
            f"{len(prompt_ids)} and max_tokens asks for {max_new}",
            param="messages",
            code="context_length_exceeded",
        )
    params = SamplingParams(
        samples_per_prompt=req.n,
        max_new_tokens=max_new,
        temperature=req.temperature,
        top_p=req.top_p,
        stop_strings=req.stop_strings,
        seed=req.seed or 0,
    )
    return prompt_ids, params


def _completion_body(state: _State, generated: Generated, completion_id: str) -> dict[str, Any]:
    choices = [
        {
            "index": i,
            "message": {"role": "assistant", "content": c.text},
            "finish_reason": c.finish_reason,
            "logprobs": None,
        }
        for i, c in enumerate(generated.choices)
    ]
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
