"""Executors: where generate-and-score runs. In-process (default) and Ray (``executor.kind="ray"``).

``ray`` is imported only by ``execrl.distributed.ray_executor``, and only when that executor is chosen.
"""

from execrl.distributed.executor import Executor, InProcessExecutor, build_executor
from execrl.distributed.faults import FaultCounters, RetryPolicy, TaskFailed

__all__ = ["Executor", "FaultCounters", "InProcessExecutor", "RetryPolicy", "TaskFailed", "build_executor"]
