"""MultiPL-E-style suites: some of the ``functions`` suite's problems rendered for JavaScript, Java and
C++ (``functions-js``, ``functions-java``, ``functions-cpp``), with the Python task's own tests.

As MultiPL-E does (Cassano et al., 2023, "MultiPL-E: A Scalable and Polyglot Approach to Benchmarking
Neural Code Generation"), the problem statement and the test values are translated mechanically and the
solutions are written per language: here a reference and a wrong body per template and language
(``_multipl_bodies.py``, the Python template's bug ported, so the same hidden tests catch it). Ids,
splits and metadata are the Python task's (``functions/sum_list/0000`` -> ``functions-js/sum_list/0000``).

- JavaScript and Java are graded by call tests through the sandbox's call harnesses (Java methods are
  ``camelCase`` static methods of a class ``Problem``; integers are ``long``, lists ``ArrayList<Long>``).
- C++ has no call harness: ``prompt_code`` (prepended to the answer, as for a HumanEval continuation)
  declares the function, and its ``main`` reads a test number from stdin, calls the function with that
  test's arguments and prints the result as JSON; each test is an ``IOTest`` expecting the JSON of the
  Python expected value. The program is compiled once per execution, whatever the number of tests.

Limits: only the templates in ``_multipl_bodies.BODIES`` (12 of the ~100, with int, bool, str and
list[int] values); a C++ answer must keep the given signature exactly (an overload such as
``const vector<long long>&`` is a different function and fails to link) and must not define ``main``.
The C++ prelude includes the few standard headers the problems need rather than ``<bits/stdc++.h>``
(MultiPL-E's choice), which takes several times longer to compile.
"""

from __future__ import annotations

import dataclasses
import json
import re

from execrl.sandbox.types import CallTest, IOTest
from execrl.tasks.schema import CodeSpec, Task
from execrl.tasks.suites import functions
from execrl.tasks.suites._common import fence
from execrl.tasks.suites._multipl_bodies import BODIES

# suite language -> (suite name, fence tag, language name in prompts)
LANGUAGES: dict[str, tuple[str, str, str]] = {
    "javascript": ("functions-js", "javascript", "JavaScript"),
    "java": ("functions-java", "java", "Java"),
    "cpp": ("functions-cpp", "cpp", "C++17"),
}
TYPES: dict[str, dict[str, str]] = {  # Python annotation -> the language's type
    "java": {"int": "long", "bool": "boolean", "str": "String", "list[int]": "ArrayList<Long>"},
    "cpp": {"int": "long long", "bool": "bool", "str": "string", "list[int]": "vector<long long>"},
}
CPP_HEADERS = "<algorithm>, <cctype>, <cstdlib>, <iomanip>, <iostream>, <string> and <vector>"
CPP_PRELUDE = r"""#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>
using namespace std;

static void execrl_show(long long v) { cout << v; }
static void execrl_show(bool v) { cout << (v ? "true" : "false"); }
static void execrl_show(const string& s) {
    cout << '"';
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') cout << '\\' << c;
        else if (c < 0x20) cout << "\\u" << setw(4) << setfill('0') << hex << (int)c << dec;
        else cout << c;
    }
    cout << '"';
}
static void execrl_show(const vector<long long>& v) {
    cout << '[';
    for (size_t i = 0; i < v.size(); i++) { if (i) cout << ','; execrl_show(v[i]); }
    cout << ']';
}
"""
TEMPLATES = {t.name: t for t in functions.TEMPLATES}


def _parse_signature(signature: str) -> tuple[list[tuple[str, str]], str]:
    """``"(nums: list[int], k: int) -> int"`` -> ([("nums", "list[int]"), ("k", "int")], "int")."""
    match = re.fullmatch(r"\((.*)\) -> (.+)", signature)
    if match is None:
        raise ValueError(f"cannot translate the signature {signature!r}")
    params = [tuple(p.split(": ", 1)) for p in match.group(1).split(", ") if p]
    return [(name, kind) for name, kind in params], match.group(2)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _type(language: str, python_type: str, where: str) -> str:
    try:
        return TYPES[language][python_type]
    except KeyError:
        raise ValueError(f"{where}: no {language} type for {python_type!r}") from None


def declaration(language: str, template: str) -> str:
    """The function's header in ``language`` (without the opening brace)."""
    params, returns = _parse_signature(TEMPLATES[template].signature)
    if language == "javascript":
        return f"function {template}({', '.join(name for name, _ in params)})"
    typed = ", ".join(f"{_type(language, kind, template)} {name}" for name, kind in params)
    if language == "java":
        return f"public static {_type(language, returns, template)} {camel(template)}({typed})"
    return f"{_type(language, returns, template)} {template}({typed})"


def solution(language: str, template: str, body: str) -> str:
    """A whole answer: the declaration and ``body`` (inside ``class Problem`` for Java)."""
    if language == "java":
        inner = "\n".join("        " + line for line in body.splitlines())
        code = f"import java.util.*;\n\nclass Problem {{\n    {declaration(language, template)} {{\n{inner}\n    }}\n}}"
    else:
        inner = "\n".join("    " + line for line in body.splitlines())
        code = f"{declaration(language, template)} {{\n{inner}\n}}"
    return fence(code, LANGUAGES[language][1])


def cpp_literal(value: object, python_type: str, where: str) -> str:
    """``value`` as a C++ expression of the type ``TYPES["cpp"][python_type]``."""
    if python_type == "bool" and isinstance(value, bool):
        return "true" if value else "false"
    if python_type == "int" and isinstance(value, int) and not isinstance(value, bool):
        return f"{value}LL"
    if python_type == "str" and isinstance(value, str):
        if not all(" " <= c <= "~" for c in value):
            raise ValueError(f"{where}: {value!r} is not printable ASCII; the C++ harness cannot hold it")
        return f"string({json.dumps(value)})"
    if python_type == "list[int]" and isinstance(value, list):
        return "vector<long long>{" + ", ".join(cpp_literal(v, "int", where) for v in value) + "}"
    raise ValueError(f"{where}: cannot write {value!r} as a C++ {python_type}")


def cpp_prompt_code(template: str, tests: list[CallTest]) -> str:
    """Prelude, the function's declaration and a ``main`` that runs test number ``stdin`` (see the module
    doc); test ``i`` of ``tests`` is case ``i``."""
    params, _ = _parse_signature(TEMPLATES[template].signature)
    cases = []
    for number, test in enumerate(tests):
        where = f"{template}:{test.name}"
        args = ", ".join(cpp_literal(v, kind, where) for v, (_, kind) in zip(test.args, params, strict=True))
        cases.append(f"        case {number}: execrl_show({template}({args})); break;")
    main = "\n".join(
        ["int main() {", "    int test;", "    if (!(cin >> test)) return 2;", "    switch (test) {",
         *cases, "        default: return 2;", "    }", "    cout << '\\n';", "    return 0;", "}"]
    )  # fmt: skip
    return f"{CPP_PRELUDE}\n{declaration('cpp', template)};\n\n{main}\n"


def _prompt(language: str, template: str, python: Task) -> str:
    _, tag, label = LANGUAGES[language]
    doc = re.sub(r"\bTrue\b", "true", re.sub(r"\bFalse\b", "false", TEMPLATES[template].doc))
    name = camel(template) if language == "java" else template
    shown = "\n".join(
        f"{name}({', '.join(json.dumps(a) for a in t.args)}) == {json.dumps(t.expected)}"
        for t in python.visible_tests
        if isinstance(t, CallTest)
    )
    where = {
        "javascript": "",
        "java": " as a method of `class Problem` (`import java.util.*;` is allowed)",
        "cpp": f" ({CPP_HEADERS} are included and `using namespace std;` comes first; do not write `main`)",
    }[language]
    return (
        f"Write a {label} function `{declaration(language, template)}`{where}.\n{doc}\n\n"
        f"Examples:\n{shown}\n\nReply with the complete function in a ```{tag} code block."
    )


def translate(python: Task, language: str) -> Task:
    """The ``language`` version of a ``functions`` task whose template has bodies in ``BODIES``."""
    template = python.id.split("/")[1]
    reference, wrong = BODIES[template][language]
    groups = (python.visible_tests, python.hidden_tests, python.audit_tests)
    calls = [t for group in groups for t in group if isinstance(t, CallTest)]
    if len(calls) != sum(map(len, groups)):
        raise ValueError(f"{python.id}: only call tests can be translated")
    entry = camel(template) if language == "java" else template
    if language == "cpp":
        number = {t.name: i for i, t in enumerate(calls)}

        def convert(t: CallTest) -> IOTest | CallTest:
            return IOTest(
                t.name,
                f"{number[t.name]}\n",
                json.dumps(t.expected, separators=(",", ":")) + "\n",
                compare="exact",
            )

        spec = CodeSpec(kind="function", language="cpp", entry_point=template,
                        prompt_code=cpp_prompt_code(template, calls))  # fmt: skip
    else:

        def convert(t: CallTest) -> IOTest | CallTest:
            return dataclasses.replace(t, entry_point=entry)

        spec = CodeSpec(kind="function", language=language, entry_point=entry)
    return dataclasses.replace(
        python,
        id=f"{LANGUAGES[language][0]}/{python.id.split('/', 1)[1]}",
        prompt=_prompt(language, template, python),
        spec=spec,
        visible_tests=tuple(convert(t) for t in python.visible_tests if isinstance(t, CallTest)),
        hidden_tests=tuple(convert(t) for t in python.hidden_tests if isinstance(t, CallTest)),
        audit_tests=tuple(convert(t) for t in python.audit_tests if isinstance(t, CallTest)),
        reference_solution=solution(language, template, reference),
        wrong_solution=solution(language, template, wrong),
    )


def build_for(language: str, split: str = "train", seed: int = 0) -> list[Task]:
    """The ``functions`` tasks of ``split`` whose template has ``language`` bodies, translated."""
    return [translate(t, language) for t in functions.build(split, seed) if t.id.split("/")[1] in BODIES]


def build_js(split: str = "train", seed: int = 0) -> list[Task]:
    """``functions`` problems in JavaScript, graded by call tests (ids ``functions-js/sum_list/0000``)."""
    return build_for("javascript", split, seed)


def build_java(split: str = "train", seed: int = 0) -> list[Task]:
    """``functions`` problems in Java, graded by call tests (ids ``functions-java/sum_list/0000``)."""
    return build_for("java", split, seed)


def build_cpp(split: str = "train", seed: int = 0) -> list[Task]:
    """``functions`` problems in C++17, graded by a generated ``main`` (ids ``functions-cpp/...``)."""
    return build_for("cpp", split, seed)
