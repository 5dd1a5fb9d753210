"""Language registry: adding a language is one ``register_language`` call.

A language is either run in-process by the Python harness (``mode="python"``: the host interpreter and
its standard library, no site-packages) or compiled inside the sandbox and executed (``mode="binary"``),
under a compile time limit (the request's ``Limits.compile_timeout_s``, else the language's default);
compiler output comes back as ``compile_output`` and a failed compile is ``Verdict.COMPILE_ERROR``.
``test_kinds`` says which test styles make sense for the language.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from execrl.sandbox.errors import InvalidRequestError


@dataclass(frozen=True)
class Language:
    name: str
    mode: Literal["python", "binary"]
    default_path: str  # where the program is written in the work directory
    test_kinds: frozenset[str]  # among "code", "call", "io"
    compile_argv: tuple[str, ...] = ()  # "{source}" is replaced by the program path
    run_argv: tuple[str, ...] = ()
    compile_timeout_s: float = 0.0

    def compile_limit_s(self, requested_s: float | None) -> float:
        """The compile step's CPU and wall-clock limit: the request's (``Limits.compile_timeout_s``) or,
        when it sets none, the language's default; 0 for a language without a compile step."""
        if not self.compile_argv:
            return 0.0
        return self.compile_timeout_s if requested_s is None else requested_s

    def job_spec(self, program_path: str, compile_timeout_s: float | None = None) -> dict[str, Any]:
        compile_argv = [arg.replace("{source}", program_path) for arg in self.compile_argv]
        return {
            "name": self.name,
            "mode": self.mode,
            "compile": compile_argv or None,
            "run": list(self.run_argv) or None,
            "compile_timeout_s": self.compile_limit_s(compile_timeout_s),
        }


_LANGUAGES: dict[str, Language] = {}


def register_language(language: Language) -> Language:
    if language.name in _LANGUAGES:
        raise ValueError(f"language {language.name!r} is already registered")
    _LANGUAGES[language.name] = language
    return language


def get_language(name: str) -> Language:
    try:
        return _LANGUAGES[name]
    except KeyError:
        known = ", ".join(sorted(_LANGUAGES))
        raise InvalidRequestError(f"unknown language {name!r}; known languages: {known}") from None


def list_languages() -> list[str]:
    return sorted(_LANGUAGES)


register_language(Language("python", "python", "main.py", frozenset({"code", "call", "io"})))
register_language(
    Language(
        "cpp",
        "binary",
        "main.cpp",
        frozenset({"io"}),
        compile_argv=("/usr/bin/g++", "-O2", "-std=c++17", "-pipe", "-o", "main", "{source}"),
        run_argv=("./main",),
        compile_timeout_s=30.0,
    )
)
