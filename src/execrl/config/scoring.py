"""``[reward]``, ``[sandbox]``, ``[audit]`` and ``[eval]``: how completions are run and scored, audited
on held-back tests, and how the base and trained models are evaluated."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from execrl.config.base import Section


class RewardSection(Section):
    """How outcomes become rewards (``execrl.rewards.RewardConfig``)."""

    mode: Literal["binary", "partial"] = Field(
        "partial", description="binary: 1 only if every test passes; partial: the share of tests passed"
    )
    no_code_penalty: float = Field(0.0, description="subtracted when no code block can be extracted")
    syntax_error_penalty: float = Field(0.0, description="subtracted when the program does not compile")
    timeout_penalty: float = Field(0.0, description="subtracted when the program hits its time limit")
    verifiers: dict[str, str] = Field(
        default_factory=dict, description="extra domain -> 'module:function' verifiers"
    )


class SandboxSection(Section):
    """Where the programs run: the in-process sandbox, or replicas of ``execrl sandbox serve``."""

    backend: str = Field(
        "namespace", description="namespace (isolated: namespaces, seccomp, cgroups) | unisolated | <yours>"
    )
    workers: int = Field(2, ge=1, description="pre-forked sandbox workers: programs run at once")
    timeout_s: float = Field(5.0, ge=0.01, le=3600, description="wall and CPU limit per program")
    memory_mb: int = Field(256, ge=16, le=65536, description="the sandbox's own bounds (sandbox.Limits)")
    urls: list[str] = Field(
        default_factory=list,
        description="sandbox service replicas (execrl sandbox serve); set: rewards and tool sessions run there",
    )
    max_in_flight_per_replica: int = Field(8, ge=1, description="with urls: back-pressure per replica")
    max_attempts: int = Field(4, ge=1, description="with urls: attempts of a safe-to-retry failure")
    retry_backoff_s: float = Field(0.05, ge=0, description="with urls: first backoff, doubled per attempt")

    @model_validator(mode="after")
    def _urls_well_formed(self) -> SandboxSection:
        from execrl.sandbox.service.client import check_url  # no torch; aiohttp is a core dependency

        for url in self.urls:
            check_url(url)
        if len({u.rstrip("/") for u in self.urls}) != len(self.urls):
            raise ValueError(f"sandbox.urls lists a replica twice: {self.urls}")
        return self

    @field_validator("backend")
    @classmethod
    def _backend_known(cls, value: str) -> str:
        from execrl.sandbox.backends import list_backends

        if value not in list_backends():
            raise ValueError(
                f"unknown sandbox backend {value!r}; known backends: {', '.join(list_backends())}"
            )
        return value


class AuditSection(Section):
    """The reward audit (``execrl.recipes.audit``): held-back tests re-run on passing completions."""

    enabled: bool = Field(True, description="audit each step's passing completions and the evaluations")
    share: float = Field(
        0.1, ge=0, le=1, description="share of passes without a blind audit re-run on audit tests per step"
    )
    flagged_per_step: int = Field(8, ge=0, description="suspicious completions kept in hack.jsonl per step")


class EvalSection(Section):
    """The held-out evaluation of the base model (before the first update) and the trained one."""

    enabled: bool = Field(True, description="evaluate the base and trained models and write the report")
    samples_per_task: int = Field(4, ge=1, description="completions per held-out task (pass@k up to this)")
    temperature: float = Field(
        0.7, ge=0, description="0 = greedy; the default matches training's sampling temperature"
    )
    bootstrap_resamples: int = Field(2000, ge=100, description="resamples of the bootstrap intervals")
