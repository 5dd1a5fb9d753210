"""Interpreted languages without a harness of their own: Python (the harness's own interpreter), pytest
(SandboxFusion's mode: Python's test runner on the program) and Bash."""

from __future__ import annotations

from execrl.sandbox.langs.registry import Language, WarmStart, register_language

PYTHON = register_language(
    Language("python", "python", "main.py", frozenset({"code", "call", "io"}), package="python3")
)

# SandboxFusion's ``pytest`` mode: ``python -m pytest`` on the program (a file of tests and the code they
# test), in the ``python-data`` runtime, which pins pytest; run in the harness's forked interpreter like
# any Python program (``child.run_main`` runs the module as ``python -m`` would). Plain runs only; the
# verdict is pytest's exit status: 0 when every collected test passed, 1 when one failed, 5 when none
# was collected (a failed run, as on SandboxFusion, whose runner is plain ``pytest FILE``).
PYTEST = register_language(
    Language(
        "pytest",
        "python",
        "test_main.py",
        frozenset(),
        run_argv=("-m", "pytest", "-p", "no:cacheprovider", "{source}"),
        package="python3",
        runtime="python-data",
    )
)

# Bash: stdin/stdout tests only (a function-call harness would need a value encoding Bash does not have).
# Warm start (``warm.py``): a non-interactive bash sources ``$BASH_ENV`` after its initialisation and
# before it opens the script, so ``BASH_ENV=/dev/fd/9`` parks it on the gate pipe. The gate's text closes
# fd 9, unsets the variable (no child shell inherits it) and ends on ``: "$BASH"`` so that ``$_`` is the
# shell's path as in a cold start (the sandbox's environment has no ``_``); then bash opens ``main.sh`` as
# a cold one would (``tests/integration/test_sandbox_warm.py`` compares the two).
BASH = register_language(
    Language(
        "bash",
        "binary",
        "main.sh",
        frozenset({"io"}),
        run_argv=("/bin/bash", "{source}"),
        package="bash",
        warm=WarmStart(env=(("BASH_ENV", "/dev/fd/9"),), gate='exec 9<&-; unset BASH_ENV; : "$BASH"\n'),
    )
)
