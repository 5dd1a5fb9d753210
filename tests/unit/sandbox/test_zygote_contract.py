"""The zygote rule as one contract: ``execrl.sandbox.zygote`` imports the standard library and itself only.

Why it matters: the zygote process imports every module of this package, and each fork of it (every
sandbox, every session kernel) starts as a copy, so a third-party import costs memory and start-up in
every sandbox and puts host code in every jail; ``typing`` alone adds about 2 MB. The rule used to be
seven ``TYPE_CHECKING = False`` comments; this test checks it for every module of the package,
including modules added later, and ``test_checker_catches`` shows it fails on each kind of violation.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import execrl.sandbox.zygote as zygote_package

PACKAGE = "execrl.sandbox.zygote"
ANNOTATION_ONLY = {"typing", "collections.abc", "types"}  # allowed under ``if TYPE_CHECKING:`` only


def _is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _imports(tree: ast.AST, guarded: bool = False) -> list[tuple[str, int, bool]]:
    """(module, line, under TYPE_CHECKING) for every import in ``tree``, at any depth."""
    found: list[tuple[str, int, bool]] = []
    for node in ast.iter_child_nodes(tree):
        inner = guarded or _is_type_checking_block(node)
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno, guarded) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative imports would dodge the bootstrap's module stubs
                found.append(("." * node.level + (node.module or ""), node.lineno, guarded))
            else:
                found.append((node.module or "", node.lineno, guarded))
        found += _imports(node, inner)
    return found


def problems(source: str, filename: str) -> list[str]:
    """Every violation of the rule in one module's source."""
    tree = ast.parse(source, filename)
    out = []
    for module, line, guarded in _imports(tree):
        top = module.split(".")[0]
        where = f"{filename}:{line}: {module}"
        if module.startswith("."):
            out.append(f"{where} is a relative import")
        elif module == PACKAGE or module.startswith(PACKAGE + ".") or top == "__future__":
            continue
        elif top not in sys.stdlib_module_names:
            out.append(f"{where} is not in the standard library")
        elif module in ANNOTATION_ONLY and not guarded:
            out.append(f"{where} outside `if TYPE_CHECKING:` (annotations only)")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "TYPE_CHECKING" for a in node.names):
            out.append(
                f"{filename}:{node.lineno}: TYPE_CHECKING from {node.module}: define `TYPE_CHECKING = False`"
            )
    return out


def test_every_zygote_module_is_stdlib_only() -> None:
    root = Path(zygote_package.__file__).parent
    modules = sorted(root.glob("*.py"))
    assert len(modules) > 10  # the package is where the test looks
    found = [p for path in modules for p in problems(path.read_text(), path.name)]
    assert found == []


def test_checker_catches() -> None:
    """The contract fails on each kind of violation (a contract that cannot fail checks nothing)."""
    assert problems("import numpy\n", "m.py") == ["m.py:1: numpy is not in the standard library"]
    assert problems("def f():\n    from execrl.sandbox import api\n", "m.py") == [
        "m.py:2: execrl.sandbox is not in the standard library"
    ]
    assert problems("from typing import Any\n", "m.py") == [
        "m.py:1: typing outside `if TYPE_CHECKING:` (annotations only)"
    ]
    assert problems("from . import child\n", "m.py") == ["m.py:1: . is a relative import"]
    assert (
        len(
            problems(
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from typing import Any\n", "m.py"
            )
        )
        == 2
    )
    ok = "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from typing import Any\nimport os\nfrom execrl.sandbox.zygote import child\n"
    assert problems(ok, "m.py") == []
