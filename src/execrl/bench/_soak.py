"""Soak: many executions through one sandbox, then count what was left behind.

The mix is mostly HumanEval programs (canonical and mutant) with a hostile program every
``HOSTILE_EVERY`` executions, because leaks come from abnormal endings: a child that outlives its
parent, a run killed at its time limit, a memory blow-up, files written to every writable place.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from execrl.bench._contenders import Job
from execrl.bench._leftovers import leak_marker, leftovers, private_tempdir, snapshot

HOSTILE_EVERY = 200
CHUNK = 500  # executions per run_batch call

# (name, program, limits overrides) - each ends abnormally in its own way.
HOSTILE: tuple[tuple[str, str, dict[str, Any]], ...] = (
    (
        "orphan",
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\nprint('parent done')\n",
        {},
    ),
    ("busy_loop", "while True:\n    pass\n", {"timeout_s": 0.3, "cpu_time_s": 0.3}),
    ("memory_hog", "x = bytearray(1 << 30)\nprint(len(x))\n", {"memory_mb": 64}),
    (
        "file_writer",  # {marker} names the files so that leftovers() can attribute them to this process
        "import os, tempfile\n"
        "for d in ('/tmp', '/dev/shm', '/var/tmp', '.', tempfile.gettempdir()):\n"
        "    try:\n        open(os.path.join(d, '{marker}soak-leak'), 'w').write('x')\n"
        "    except OSError:\n        pass\n",
        {},
    ),
)


@dataclass(frozen=True)
class SoakReport:
    executions: int
    elapsed_s: float
    verdicts: dict[str, int]
    sandbox_errors: int
    leftovers: dict[str, int]

    @property
    def exec_per_s(self) -> float:
        return self.executions / self.elapsed_s if self.elapsed_s > 0 else 0.0


def soak_requests(jobs: list[Job], executions: int, hostile_every: int = HOSTILE_EVERY) -> list[Any]:
    """``executions`` requests cycling through ``jobs`` with a hostile program every ``hostile_every``."""
    from execrl.sandbox import CodeTest, ExecutionRequest, Limits

    out = []
    for i in range(executions):
        if i % hostile_every == hostile_every - 1:
            _, program, overrides = HOSTILE[(i // hostile_every) % len(HOSTILE)]
            program = program.replace("{marker}", leak_marker())
            out.append(ExecutionRequest(language="python", program=program, limits=Limits(**overrides)))
        else:
            job = jobs[i % len(jobs)]
            test = CodeTest("check", job.test)
            out.append(ExecutionRequest(language="python", program=job.program, tests=(test,)))
    return out


def run_soak(
    jobs: list[Job],
    executions: int,
    workers: int,
    *,
    hostile_every: int = HOSTILE_EVERY,
    progress: Callable[[int, float], None] | None = None,
) -> SoakReport:
    """Run ``executions`` requests through a fresh ``Sandbox(workers)``, close it, count leftovers.

    ``progress(done, elapsed_s)`` is called after every chunk of ``CHUNK`` executions.
    """
    from execrl.sandbox import Sandbox, SandboxConfig

    requests = soak_requests(jobs, executions, hostile_every)
    verdicts: collections.Counter[str] = collections.Counter()
    with private_tempdir() as private:
        before = snapshot(private)
        start = time.perf_counter()
        with Sandbox(SandboxConfig(workers=workers)) as sandbox:
            for offset in range(0, len(requests), CHUNK):
                results = sandbox.run_batch(requests[offset : offset + CHUNK])
                verdicts.update(r.verdict.value for r in results)
                if progress is not None:
                    progress(offset + len(results), time.perf_counter() - start)
        elapsed = time.perf_counter() - start
        found = leftovers(before)
    return SoakReport(
        executions=executions,
        elapsed_s=elapsed,
        verdicts=dict(verdicts),
        sandbox_errors=verdicts.get("sandbox_error", 0),
        leftovers=found,
    )
