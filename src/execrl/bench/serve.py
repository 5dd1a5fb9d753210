"""`execrl bench serve`: ``execrl serve`` vs a naive one-request-at-a-time ``generate`` server.

Both servers run in this process on their own threads, with the same model, thread count and requests, and
speak the same OpenAI wire format; ``C`` concurrent clients (the official ``openai`` package, one thread
each) send ``--requests-per-client`` chat requests each, alternating the servers at every concurrency level.

- ``execrl``: ``execrl serve`` as shipped (requests batched into one generation by the batcher);
- ``execrl_unbatched``: the same server with ``max_prompts_per_batch=1``, to separate the batching gain
  from the engine's own speed;
- ``naive``: the peer, an aiohttp server that runs each request alone with ``transformers``'
  ``model.generate(do_sample=True)`` behind a single worker thread (what a quick Flask/FastAPI wrapper does).

Reported per side and concurrency: requests/s and completion tokens/s (each side credited with the tokens
its own usage counts report; sampling differs, so lengths differ: tokens/s is the comparable figure).
``ratio_vs_naive_at_16`` is execrl's tokens/s over the naive server's at 16 clients (goal: >= 2).

Limits: a CPU measurement on a shared machine (load average recorded); request latency percentiles are
not reported, only throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execrl.bench._report import write_report

if TYPE_CHECKING:
    from aiohttp import web
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["add_arguments", "run"]

SIDES = ("execrl", "execrl_unbatched", "naive")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument("--model", default="smollm2-135m-instruct", help="model, run dir or checkpoint")
    parser.add_argument("--concurrency", default="1,4,16", help="comma-separated client counts")
    parser.add_argument("--requests-per-client", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=64, help="max_tokens of every request")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (all sides)")
    parser.add_argument("--sides", default=",".join(SIDES), help=f"subset of {','.join(SIDES)}")


def run(args: argparse.Namespace) -> int:
    import torch

    from execrl.rollout.engine import create_engine
    from execrl.serve.background import serve_in_thread
    from execrl.serve.export import load_any_model

    levels = [int(x) for x in args.concurrency.split(",")]
    sides = [s for s in args.sides.split(",") if s]
    if any(s not in SIDES for s in sides) or min(levels) < 1 or args.requests_per_client < 1:
        raise SystemExit(f"--sides must be a subset of {SIDES}; --concurrency and --requests-per-client >= 1")
    torch.set_num_threads(args.threads)
    model, tokenizer, source = load_any_model(args.model)
    engine = create_engine("hf", model=model, tokenizer=tokenizer)
    results: dict[str, dict[str, Any]] = {s: {} for s in sides}
    for clients in levels:
        for side in sides:  # a fresh app per measurement (an aiohttp app starts once)
            with serve_in_thread(_app(side, engine, model, tokenizer)) as url:
                _load(url, 1, 1, args.max_tokens)  # warm-up
                results[side][str(clients)] = _load(url, clients, args.requests_per_client, args.max_tokens)
    report = _report(args, source.description, results, levels)
    _print_table(report)
    if args.json is not None:
        write_report(args.json, report)
        print(f"wrote {args.json}")
    return 0


def _app(side: str, engine: Any, model: Any, tokenizer: Any) -> web.Application:
    from execrl.serve.server import ServeConfig, build_app

    if side == "naive":
        return naive_app(model, tokenizer)
    per_batch = 1 if side == "execrl_unbatched" else 32
    return build_app(engine, ServeConfig(model_name="m", max_prompts_per_batch=per_batch))


def _report(
    args: argparse.Namespace, model: str, results: dict[str, dict[str, Any]], levels: list[int]
) -> dict[str, Any]:
    import torch
    import transformers

    report: dict[str, Any] = {
        "benchmark": "serve",
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": model,
        "concurrency": levels,
        "requests_per_client": args.requests_per_client,
        "max_tokens": args.max_tokens,
        "threads": args.threads,
        "sides": results,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "host": {"cpus": os.cpu_count(), "machine": platform.machine(), "load_avg_1m": os.getloadavg()[0]},
    }
    if "execrl" in results and "naive" in results:
        for c in levels:
            ours, peer = results["execrl"][str(c)], results["naive"][str(c)]
            report[f"ratio_vs_naive_at_{c}"] = ours["tokens_per_s"] / peer["tokens_per_s"]
            report[f"requests_ratio_vs_naive_at_{c}"] = ours["requests_per_s"] / peer["requests_per_s"]
    return report


def _load(url: str, clients: int, per_client: int, max_tokens: int) -> dict[str, float]:
    """``clients`` threads each send ``per_client`` requests in turn; throughput over the whole burst."""
    import openai

    from execrl.bench.rollout import BENCH_PROMPTS

    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=3600)

    def one_client(index: int) -> int:
        tokens = 0
        for r in range(per_client):
            prompt = BENCH_PROMPTS[(index * per_client + r) % len(BENCH_PROMPTS)]
            reply = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens
            )
            tokens += reply.usage.completion_tokens if reply.usage else 0
        return tokens

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        tokens = sum(pool.map(one_client, range(clients)))
    seconds = time.perf_counter() - start
    requests = clients * per_client
    return {
        "requests": requests,
        "completion_tokens": tokens,
        "seconds": seconds,
        "requests_per_s": requests / seconds,
        "tokens_per_s": tokens / seconds,
    }


def naive_app(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> web.Application:
    """The peer: each request alone through ``model.generate``, one at a time (single worker thread)."""
    from aiohttp import web

    from execrl.rollout.prompts import encode_prompts
    from execrl.serve.api import parse_chat_request

    worker = ThreadPoolExecutor(max_workers=1)

    async def chat(request: web.Request) -> web.Response:
        req = parse_chat_request(await request.json())
        ids = encode_prompts(tokenizer, [[m.model_dump(exclude_none=True) for m in req.messages]])[0]
        loop = asyncio.get_running_loop()
        new_ids = await loop.run_in_executor(
            worker, _hf_generate, model, tokenizer, ids, req.new_tokens(256), req.temperature
        )
        text = tokenizer.decode(new_ids, skip_special_tokens=True)
        usage = {"prompt_tokens": len(ids), "completion_tokens": len(new_ids)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        body = {"id": "naive", "object": "chat.completion", "created": 0, "model": req.model}
        return web.json_response({**body, "choices": [choice], "usage": usage})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


def _hf_generate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    ids: list[int],
    max_new: int,
    temperature: float,
) -> list[int]:
    import torch

    from execrl.rollout.hf_engine import resolve_eos_token_ids

    eos = resolve_eos_token_ids(model, tokenizer)  # the same stop tokens as execrl's engine
    input_ids = torch.tensor([ids])
    sample = {"do_sample": True, "temperature": temperature, "top_k": 0} if temperature > 0 else {}
    with torch.inference_mode():
        out = model.generate(  # type: ignore[operator]
            input_ids,
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=max_new,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=eos,
            **({"do_sample": False} | sample),
        )
    new = out[0, len(ids) :].tolist()
    for i, token in enumerate(new):  # credit tokens up to and including the first EOS (padding after it)
        if token in eos:
            return [int(t) for t in new[: i + 1]]
    return [int(t) for t in new]


def _print_table(report: dict[str, Any]) -> None:
    print(f"{'side':<18}{'clients':>8}{'req/s':>10}{'tok/s':>10}")
    for side, by_level in report["sides"].items():
        for clients, r in by_level.items():
            print(f"{side:<18}{clients:>8}{r['requests_per_s']:>10.3f}{r['tokens_per_s']:>10.1f}")
    for c in report["concurrency"]:
        if f"ratio_vs_naive_at_{c}" in report:
            print(
                f"ratio vs naive at {c:>2} clients: {report[f'ratio_vs_naive_at_{c}']:.2f}x tokens/s, "
                f"{report[f'requests_ratio_vs_naive_at_{c}']:.2f}x requests/s"
            )
