"""How far ``execrl train`` travels to the policy loss, traced from one real step (for ``arch_metrics.py``).

One step of ``execrl train`` runs in a subprocess on a tiny random Llama (``rollout.models.tiny_model``,
SmolLM2's tokenizer, as ``tests/integration/conftest.py`` builds it) under ``sys.setprofile``, for each
recipe of ``RECIPES``: ``grpo`` (the default recipe on the default suites) and ``tools``
(``tools.enabled=true`` on the ``tools`` suite). Evaluation is off (the base model's evaluation would run
before the first loss and be counted). Recorded from entering ``execrl.cli.main`` until the first call of
any function registered in ``execrl.trainer.losses.POLICY_LOSSES``, on the main thread only (the sandbox's
helper threads and its jailed processes are not the path a reader follows):

* ``files``: the distinct execrl source files in which a function ran, in the order first entered
  (module and class bodies are not counted: importing a file is not a step a reader follows, but a
  function an import calls, such as a registration, is);
* ``switches``: how many times the file executing changed (a call into another execrl file, or a return
  to an execrl caller in another file; frames outside execrl leave it unchanged). Repeated work (one
  decode step per token, one test per program) counts every time, so this grows with the run's size,
  which is fixed here; ``switch_pairs`` counts each (from, to) pair once;
* ``chain``/``hops``: the execrl frames on the stack when the loss is first called, from
  ``execrl.cli.main`` down (comprehension, generator-expression and lambda frames skipped); hops =
  frames - 1 (issue 22's measure).

Stdlib only here; the child needs the measured tree's own dependencies (torch, transformers) and a
sandbox, like ``execrl train``. A tool step needs session support (namespace backend).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

COMMON = (
    "run.total_steps=1", "eval.enabled=false", "rollout.prompts_per_step=2",
    "rollout.samples_per_prompt=4", "rollout.max_new_tokens=16", "telemetry.tensorboard=false",
    "model.torch_threads=1", "sandbox.workers=2",
)  # fmt: skip
RECIPES: dict[str, tuple[str, ...]] = {
    "grpo": (),
    "tools": (
        'tasks.suites={"tools"=1.0}',
        "tools.enabled=true",
        "tools.max_turn_tokens=16",
        "tools.max_episode_tokens=64",
        "tools.max_tool_calls=1",
    ),  # fmt: skip
}

_CHILD = r"""
import json, sys, threading
from inspect import CO_NEWLOCALS
from pathlib import Path

src, out_dir, extra = Path(sys.argv[1]).resolve(), Path(sys.argv[2]), json.loads(sys.argv[3])
from execrl.rollout.models import default_tokenizer, tiny_model

model_dir = out_dir / "tiny"
tiny_model(seed=0).save_pretrained(model_dir)
default_tokenizer().save_pretrained(model_dir)
from execrl.trainer.losses import POLICY_LOSSES

loss_codes = {POLICY_LOSSES.get(name).__code__ for name in POLICY_LOSSES.names()}
SKIP = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<lambda>"}
main_thread = threading.main_thread()
state = {"started": False, "current": None, "order": [], "seen": set(), "switches": 0, "pairs": {},
         "chain": None}
files_of = {}

def rel(code):
    if not code.co_flags & CO_NEWLOCALS:  # a module or class body: an import, not a call a reader follows
        return None
    name = code.co_filename
    if name not in files_of:
        try:
            path = Path(name).resolve()
            files_of[name] = str(path.relative_to(src)) if path.is_relative_to(src) else None
        except (OSError, ValueError):
            files_of[name] = None
    return files_of[name]

def enter(path):
    if path is None or path == state["current"]:
        return
    if state["current"] is not None:
        state["switches"] += 1
        pair = (state["current"], path)
        state["pairs"][pair] = state["pairs"].get(pair, 0) + 1
    state["current"] = path
    if path not in state["seen"]:
        state["seen"].add(path)
        state["order"].append(path)

def chain_of(frame):
    chain, f = [], frame
    while f is not None:
        if rel(f.f_code) is not None and f.f_code.co_name not in SKIP:
            chain.append(f"{f.f_globals.get('__name__', '?')}.{f.f_code.co_qualname}")
        if f.f_code.co_name == "main" and f.f_globals.get("__name__") == "execrl.cli":
            break
        f = f.f_back
    return list(reversed(chain))

def profile(frame, event, arg):
    if event == "call":
        code = frame.f_code
        if not state["started"]:
            if code.co_name != "main" or frame.f_globals.get("__name__") != "execrl.cli":
                return
            state["started"] = True
        enter(rel(code))
        if code in loss_codes:
            state["chain"] = chain_of(frame)
            sys.setprofile(None)
    elif event == "return" and state["started"] and frame.f_back is not None:
        enter(rel(frame.f_back.f_code))

from execrl.cli import main
sys.setprofile(profile)
try:
    rc = main(["train", "--no-progress", f"model.path={json.dumps(str(model_dir))}",
               f"run.output_dir={json.dumps(str(out_dir / 'runs'))}", *extra])
finally:
    sys.setprofile(None)
print("ARCH-TRACE " + json.dumps({
    "rc": rc, "chain": state["chain"], "files": state["order"], "switches": state["switches"],
    "switch_pairs": len(state["pairs"]),
    "top_pairs": sorted(([a, b, n] for (a, b), n in state["pairs"].items()), key=lambda x: -x[2])[:8],
}))
"""


def traced_step(root: Path, recipe: str) -> dict[str, Any]:
    """One traced step of ``recipe`` (a key of ``RECIPES``) in the tree at ``root``."""
    src = root / "src"
    env = {**os.environ, "PYTHONPATH": str(src)}
    extra = json.dumps([*COMMON, *RECIPES[recipe]])
    with tempfile.TemporaryDirectory(prefix="execrl-arch-") as tmp:
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, str(src / "execrl"), tmp, extra],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("ARCH-TRACE ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"traced {recipe} step failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    data: dict[str, Any] = json.loads(lines[-1].removeprefix("ARCH-TRACE "))
    if data["chain"] is None:
        raise SystemExit(f"traced {recipe} step never called a policy loss:\n{proc.stderr[-4000:]}")
    data["hops"] = len(data["chain"]) - 1
    data["distinct_files"] = len(data["files"])
    return data
