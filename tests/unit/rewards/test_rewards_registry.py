"""The domain -> verifier registry: built-ins, decorator, module:function paths, clear errors."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

import execrl.rewards as rewards
from execrl.rewards import (
    CodeVerifier,
    PureVerifier,
    RewardConfig,
    Score,
    UnknownVerifierError,
    VerifierImportError,
    describe_verifier,
    get_verifier,
    list_verifiers,
    register_verifier,
    resolve_verifier,
    unregister_verifier,
)
from execrl.tasks.schema import MathSpec, Task, TaskMetadata


def always_half(task: Task, completion: str, config: RewardConfig) -> Score:
    """Gives 0.5 to everything (a module-level verifier for the path tests)."""
    return Score(0.5, True, False, 0.5, "half")


NOT_CALLABLE = 42


def test_builtin_domains_are_registered() -> None:
    known = list_verifiers()
    assert {"code", "math", "structured"} <= set(known)
    assert isinstance(known["code"], CodeVerifier)
    assert isinstance(known["math"], PureVerifier)


def test_decorator_registers_a_pure_function_and_returns_it_unchanged() -> None:
    @register_verifier("test_registry_pure")
    def score(task: Task, completion: str, config: RewardConfig) -> Score:
        """Length parity."""
        return Score(float(len(completion) % 2), True, len(completion) % 2 == 1, 1.0, "parity")

    try:
        assert score.__name__ == "score"
        verifier = get_verifier("test_registry_pure")
        task = Task("t", "test_registry_pure", "?", MathSpec("1"), TaskMetadata("f"))
        assert verifier.prepare(task, "abc", RewardConfig()).reward == 1.0
        assert describe_verifier(verifier) == "Length parity."
    finally:
        unregister_verifier("test_registry_pure")


def test_registering_a_duplicate_domain_raises() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_verifier("math", always_half)


def test_unknown_domain_lists_the_known_ones() -> None:
    with pytest.raises(UnknownVerifierError) as info:
        get_verifier("chess")
    message = str(info.value)
    assert "'chess'" in message and "code, " in message and "math" in message and "structured" in message


def test_register_from_a_module_function_path() -> None:
    register_verifier("test_registry_path", f"{__name__}:always_half")
    try:
        verifier = get_verifier("test_registry_path")
        task = Task("t", "test_registry_path", "?", MathSpec("1"), TaskMetadata("f"))
        assert verifier.prepare(task, "", RewardConfig()).reason == "half"
    finally:
        unregister_verifier("test_registry_path")


def test_resolve_verifier_accepts_a_class_with_prepare_and_finish() -> None:
    verifier = resolve_verifier("execrl.rewards.code_verifier:CodeVerifier")
    assert isinstance(verifier, CodeVerifier)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("no_colon_here", "must look like 'package.module:function'"),
        ("execrl.no_such_module:fn", "cannot import module 'execrl.no_such_module'"),
        (f"{__name__}:missing_fn", "has no attribute 'missing_fn'"),
        (f"{__name__}:NOT_CALLABLE", "is a int, not a callable verifier"),
    ],
)
def test_resolve_verifier_errors_are_clear(path: str, message: str) -> None:
    with pytest.raises(VerifierImportError, match=message):
        resolve_verifier(path)


def test_registering_a_non_verifier_raises_type_error() -> None:
    with pytest.raises(TypeError, match="not a verifier"):
        register_verifier("test_registry_bad", 3)
    assert "test_registry_bad" not in list_verifiers()


def test_pure_verifier_rejects_a_non_score_return() -> None:
    verifier = PureVerifier(lambda task, completion, config: 1.0)  # type: ignore[arg-type,return-value]
    task = Task("t", "x", "?", MathSpec("1"), TaskMetadata("f"))
    with pytest.raises(TypeError, match="expected a Score"):
        verifier.prepare(task, "", RewardConfig())


def test_public_api_is_curated() -> None:
    """The exported names are exactly __all__ (httpx test_exported_members style)."""
    exported = {
        name
        for name, value in vars(rewards).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert exported == set(rewards.__all__)


def test_rewards_import_neither_torch_nor_jsonschema() -> None:
    """rewards must stay cheap to import (the CLI imports it for `execrl --help`) and torch-free."""
    code = "import sys, execrl.rewards, execrl.rewards.cli; print(sorted(m for m in ('torch', 'jsonschema') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
