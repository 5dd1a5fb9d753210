"""Verifiers by domain: completions + tasks -> rewards (no torch here).

    from execrl.rewards import RewardConfig, score_batch, reward_metrics
    scores = score_batch(tasks, completions, sandbox=sandbox, config=RewardConfig(mode="partial"))
    metrics = reward_metrics(scores)          # {"reward/mean": ..., "reward/invalid_rate": ...}

Built-in domains: "code" (sandboxed tests), "math" (exact rational answer), "structured" (JSON schema +
expected values). ``judge.py``: an AI-feedback reward (a judge model behind an OpenAI-compatible endpoint)
and ``JudgedVerifier``, which combines it with a domain's execution verifier by weight. Add one with ``@register_verifier("my_domain")`` or
``register_verifier("my_domain", "my_pkg.module:function")``; see ``execrl.rewards.types`` for the
two-phase interface that lets code verifiers share one concurrent sandbox batch.
"""

# Importing the verifier modules registers the built-in domains.
from execrl.rewards.batch import (
    AsyncRunner,
    PreparedBatch,
    SyncRunner,
    ascore_batch,
    check_scorer,
    finish_batch,
    prepare_batch,
    score_batch,
)
from execrl.rewards.code_verifier import CodeVerifier, assemble_program
from execrl.rewards.extraction import ExtractedCode, extract_code
from execrl.rewards.math_verifier import final_answer, parse_number
from execrl.rewards.metrics import reward_metrics
from execrl.rewards.registry import (
    UnknownVerifierError,
    VerifierImportError,
    describe_verifier,
    get_verifier,
    list_verifiers,
    register_verifier,
    resolve_verifier,
    unregister_verifier,
)
from execrl.rewards.structured_verifier import extract_json
from execrl.rewards.types import PureVerifier, RewardConfig, RewardMode, Score, Verifier

__all__ = [
    "AsyncRunner",
    "CodeVerifier",
    "ExtractedCode",
    "PreparedBatch",
    "PureVerifier",
    "RewardConfig",
    "RewardMode",
    "Score",
    "SyncRunner",
    "UnknownVerifierError",
    "Verifier",
    "VerifierImportError",
    "ascore_batch",
    "assemble_program",
    "check_scorer",
    "describe_verifier",
    "extract_code",
    "extract_json",
    "final_answer",
    "finish_batch",
    "get_verifier",
    "list_verifiers",
    "parse_number",
    "prepare_batch",
    "register_verifier",
    "resolve_verifier",
    "reward_metrics",
    "score_batch",
    "unregister_verifier",
]
