"""No file of ``src/execrl`` imports itself through other files (issue 36, item 5).

The import-linter contracts order packages and layers, so two files of one layer that import each other
passed them: issue 36 counted 7 such circles (11 elementary cycles), e.g. the sandbox's ``languages.py``
-> ``langs/native.py`` -> ``host/gocache.py`` -> ``runtimes.py`` -> ``languages.py``, and rollout's
``engine`` <-> ``hf_engine``. The rules of the graph (imports inside functions count, those under
``if TYPE_CHECKING:`` do not) are in ``scripts/import_graph.py``, which ``scripts/arch_metrics.py`` also
reports from.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _import_graph() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("import_graph", module)  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_no_file_level_import_circle_in_src() -> None:
    """Guards against a new circle (7 on main at 3d7660c, before issue 36's restructuring)."""
    components, cycles = _import_graph().circles(ROOT / "src")
    listed = "\n".join(" -> ".join([*cycle, cycle[0]]) for cycle in cycles)
    assert not components, f"file-level import circles ({len(components)}):\n{listed}"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "src" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp_path / "src"


def test_the_graph_sees_lazy_and_relative_imports_but_not_type_checking_ones(tmp_path: Path) -> None:
    """The detector itself: a circle closed by an import inside a function, or by a relative one, is
    found; one closed only under ``if TYPE_CHECKING:`` is not; ``from pkg import name`` points at the
    package's ``__init__`` unless ``name`` is a module."""
    src = _tree(
        tmp_path,
        {
            "execrl/__init__.py": "",
            "execrl/a.py": "from execrl import b\n",
            "execrl/b.py": "def f():\n    from execrl.a import x\n",
            "execrl/pkg/__init__.py": "from execrl.pkg.c import C\n",
            "execrl/pkg/c.py": "from . import d\nclass C: ...\n",
            "execrl/pkg/d.py": "from execrl.pkg import C\n",
            "execrl/t.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from execrl import u\n",
            "execrl/u.py": "import execrl.t\n",
        },
    )
    graph = _import_graph()
    components, cycles = graph.circles(src)
    assert components == [["execrl.a", "execrl.b"], ["execrl.pkg", "execrl.pkg.c", "execrl.pkg.d"]]
    assert cycles == [["execrl.a", "execrl.b"], ["execrl.pkg", "execrl.pkg.c", "execrl.pkg.d"]]


def test_elementary_cycles_of_one_component_are_each_counted_once() -> None:
    graph = _import_graph()
    edges = {"a": {"b", "c"}, "b": {"a", "c"}, "c": {"a"}, "d": {"a"}}
    assert graph.components(edges) == [["a", "b", "c"]]
    assert graph.elementary_cycles(edges) == [["a", "b"], ["a", "b", "c"], ["a", "c"]]
