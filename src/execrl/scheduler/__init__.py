"""Which tasks each step trains on: the multi-domain task mixture."""

from execrl.scheduler.mixture import MixtureSampler

__all__ = ["MixtureSampler"]
