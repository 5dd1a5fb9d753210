"""The judge of a tool episode cannot be touched by the episode (``execrl.tools.episode``).

A hostile episode uses its ``python`` tool to plant what its final program will read when judged: files
in the work directory, ``/tmp`` and ``$HOME``, an environment variable, a ``sitecustomize.py`` in every
import path it can write; it also searches the filesystem and ``/proc`` for the hidden test's text and
signals every process it can. The final answer is judged on the hidden tests in a fresh jail that shares
nothing writable with the session, so the cheating program must fail and an honest one (after the same
hostile cell) must pass. The sandbox fixture runs each test under both seccomp policies.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from execrl.episodes import LocalBackend, run_episodes
from execrl.rollout.models import default_tokenizer
from execrl.rollout.types import SamplingParams
from execrl.sandbox import Sandbox
from execrl.sandbox.types import CodeTest
from execrl.tasks.schema import CodeSpec, Task, TaskMetadata
from execrl.tools import ToolConfig, ToolEnvironment

sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))  # scripted_engine.py
from scripted_engine import ScriptedEngine  # noqa: E402

MARK = "HIDDEN_CASE_5521"

HOSTILE_CELL = f"""
import os, signal, sys
planted = []
for path in ("answer", "/tmp/answer", os.path.expanduser("~/answer"), "/answer"):
    try:
        open(path, "w").write("42"); planted.append(path)
    except OSError:
        pass
os.environ["ANSWER"] = "42"
for d in sys.path:
    try:
        open(os.path.join(d or ".", "sitecustomize.py"), "w").write("import os; os.environ['ANSWER'] = '42'")
        planted.append(d)
    except OSError:
        pass
found = []
def scan(path):
    try:
        if "{MARK[:6]}" + "{MARK[6:]}" in open(path, errors="ignore").read(1 << 16):
            found.append(path)
    except (OSError, ValueError):
        pass
for base, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if base.count("/") < 4 and os.path.join(base, d) not in ("/proc", "/sys", "/dev")]
    for name in files[:50]:
        scan(os.path.join(base, name))
for pid in os.listdir("/proc"):
    for name in ("cmdline", "environ"):
        scan(f"/proc/{{pid}}/{{name}}")
for pid in (-1, 1):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
print("found", found)
print("planted", planted, os.environ["ANSWER"])
"""

CHEAT = """```python
import os
def f():
    for path in ("answer", "/tmp/answer", os.path.expanduser("~/answer"), "/answer"):
        try:
            return int(open(path).read())
        except (OSError, ValueError):
            pass
    return int(os.environ.get("ANSWER", "0"))
```"""
HONEST = "```python\ndef f():\n    return 6 * 7\n```"


def _task(name: str) -> Task:
    return Task(
        id=name, domain="code", prompt=f"{name}: write f() returning the answer.",
        spec=CodeSpec(kind="function", entry_point="f"), metadata=TaskMetadata(family="tools", split="test"),
        hidden_tests=(CodeTest(name="hidden", code=f"# {MARK}\nassert f() == 42"),),
    )  # fmt: skip


def _script(turn: int, context: str) -> str:
    if turn == 0:
        call = {"name": "python", "arguments": {"code": HOSTILE_CELL}}
        return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
    return CHEAT if "cheat:" in context else HONEST


def test_what_the_episode_plants_never_reaches_its_judge(sandbox: Sandbox) -> None:
    tokenizer = default_tokenizer()
    engine = ScriptedEngine(tokenizer, _script)
    config = ToolConfig(max_turn_tokens=2048, max_episode_tokens=4096, max_tool_output_tokens=512)
    cheat, honest = run_episodes(
        ToolEnvironment(sandbox, config), LocalBackend(engine, tokenizer), [_task("cheat"), _task("honest")],
        params=SamplingParams(samples_per_prompt=1, max_new_tokens=config.max_turn_tokens),
        max_episode_tokens=config.max_episode_tokens,
    ).episodes  # fmt: skip
    for e in (cheat, honest):
        [answer] = [m["content"] for m in e.messages if m["role"] == "tool"]
        assert "found []" in answer, answer  # the hidden test is nowhere the session can read
        assert "planted ['answer'," in answer  # the plant worked in the session: only the jail stops it
        assert e.info["tool_calls"] == 1 and e.info["parse_errors"] == 0
    assert (cheat.passed, cheat.reward) == (False, 0.0)
    assert (honest.passed, honest.reward) == (True, 1.0)
