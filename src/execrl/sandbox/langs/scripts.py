"""Interpreted languages without a harness of their own: Python (the harness's own interpreter) and Bash."""

from __future__ import annotations

from execrl.sandbox.languages import Language, register_language

PYTHON = register_language(
    Language("python", "python", "main.py", frozenset({"code", "call", "io"}), package="python3")
)

# Bash: stdin/stdout tests only (a function-call harness would need a value encoding Bash does not have).
BASH = register_language(
    Language(
        "bash", "binary", "main.sh", frozenset({"io"}), run_argv=("/bin/bash", "{source}"), package="bash"
    )
)
