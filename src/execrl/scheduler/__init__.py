"""Which tasks each step trains on: the multi-domain task mixture, static or adaptive."""

from execrl.scheduler.adaptive import AdaptiveScheduler, AdaptiveSettings
from execrl.scheduler.mixture import MixtureSampler
from execrl.scheduler.outcomes import GroupOutcome, domain_metrics, outcomes_from_scores
from execrl.scheduler.prompt_cap import PromptCapSettings, PromptStage
from execrl.scheduler.static import (
    Scheduler,
    StagedScheduler,
    StaticScheduler,
    build_scheduler,
    tempered_weights,
)

__all__ = [
    "AdaptiveScheduler",
    "AdaptiveSettings",
    "GroupOutcome",
    "MixtureSampler",
    "PromptCapSettings",
    "PromptStage",
    "Scheduler",
    "StagedScheduler",
    "StaticScheduler",
    "build_scheduler",
    "domain_metrics",
    "outcomes_from_scores",
    "tempered_weights",
]
