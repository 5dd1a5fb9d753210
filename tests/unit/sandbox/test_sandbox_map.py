"""The sandbox's maps (the docstrings of ``execrl.sandbox`` and its sub-packages) name files that exist.

Regression (issue 36): the map in ``sandbox/__init__.py`` sent readers to ``sessions/userns.py``, which had
moved to ``zygote/session_userns.py``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SANDBOX = Path(__file__).resolve().parents[3] / "src" / "execrl" / "sandbox"
REPO = SANDBOX.parents[2]


def _missing(package: Path) -> list[str]:
    """``name.py`` / ``dir/name.py`` references of ``package``'s docstring that name no file: a path is
    looked up from the package, the sandbox and the repository root; a bare name anywhere in the sandbox."""
    names = {p.name for p in SANDBOX.rglob("*.py")}
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
    missing = []
    for ref in re.findall(r"``([\w/.-]+\.py)``", docstring):
        bases = (package, SANDBOX, REPO)
        found = any((base / ref).is_file() for base in bases) if "/" in ref else ref in names
        if not found:
            missing.append(ref)
    return missing


def test_every_file_a_sandbox_map_names_exists() -> None:
    packages = [SANDBOX, *(p.parent for p in SANDBOX.rglob("*/__init__.py"))]
    missing = {str(p.relative_to(SANDBOX.parent)): _missing(p) for p in packages}
    assert {name: refs for name, refs in missing.items() if refs} == {}
