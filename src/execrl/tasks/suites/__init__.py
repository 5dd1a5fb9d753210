"""Built-in task suites, each a seeded generator with reference and wrong solutions.

``BUILTIN_SUITES[name](split, seed)`` returns the tasks of one split ("train" or "test"); the same seed
always gives the same tasks and ids, and the two splits of one seed never share a task. The task registry
(``execrl.tasks.load_suite``) serves these by name.

| suite        | train | test | what                                                          |
|--------------|-------|------|---------------------------------------------------------------|
| functions    | 640   | 130  | write one Python function (19 families, ~30% difficulty 1)    |
| stdio        | 116   | 24   | stdin/stdout programs, 12 of them in C++17                    |
| repository   | 57    | 12   | change one function of a small project without breaking it    |
| repository-long | 57 | 12   | the same tasks with the whole repository (1,900-7,700 tokens) in the prompt |
| math         | 440   | 80   | word problems with exact answers                              |
| structured   | 120   | 30   | JSON answers checked against a schema and expected values     |
| functions-js | 10    | 2    | 12 ``functions`` problems in JavaScript (call tests)           |
| functions-java | 10  | 2    | the same in Java (call tests)                                  |
| functions-cpp | 10   | 2    | the same in C++17 (a generated ``main``, stdin/stdout tests)   |
| tools        | 120   | 24   | exact computations and CSV questions for a python tool session |

(counts for seed 0; other seeds hold out different instances, so they shift by a few.)
"""

from __future__ import annotations

from collections.abc import Callable

from execrl.tasks.schema import Task
from execrl.tasks.suites import (
    functions,
    math_word,
    multipl,
    repository,
    repository_long,
    stdio,
    structured,
    tools,
)

SuiteBuilder = Callable[[str, int], list[Task]]

BUILTIN_SUITES: dict[str, SuiteBuilder] = {
    "functions": functions.build,
    "stdio": stdio.build,
    "repository": repository.build,
    "repository-long": repository_long.build,
    "math": math_word.build,
    "structured": structured.build,
    "functions-js": multipl.build_js,
    "functions-java": multipl.build_java,
    "functions-cpp": multipl.build_cpp,
    "tools": tools.build,
}

__all__ = ["BUILTIN_SUITES", "SuiteBuilder"]
