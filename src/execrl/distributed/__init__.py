"""Executors: where a step's rollout runs. In-process (default) and Ray (``executor.kind="ray"``).

Modules: ``executor.py`` (the interface, the in-process executor, ``build_executor``); ``faults.py``
(retry policy, ``executor/*`` counters) and ``versions.py`` (the weight-version rule), both pure;
``ray_workers.py`` (the actors' roles as plain classes); ``ray_actors.py`` (starting Ray, ``ActorGroup``:
replace and retry), ``ray_backend.py`` (engine calls on rollout actors), ``ray_environment.py`` (the
environment partitioned over sandbox actors) and ``ray_executor.py`` (the map, ``RayExecutor``): these
run on ``ray`` and are imported only when that executor is chosen.
"""

from execrl.distributed.executor import Executor, InProcessExecutor, build_executor
from execrl.distributed.faults import FaultCounters, RetryPolicy, TaskFailed

__all__ = ["Executor", "FaultCounters", "InProcessExecutor", "RetryPolicy", "TaskFailed", "build_executor"]
