"""Importers from public dataset formats to execrl tasks (``execrl tasks import FORMAT SRC DEST``).

Each ``import_<format>(url)`` reads a local path or fsspec URL (JSONL; SandboxFusion also a JSON array)
and returns ``list[Task]``; a malformed row raises ``TaskValidationError`` naming file, line and field,
with every bad row listed. Visible tests are the public/example cases, hidden tests the full set,
less an audit split where a task has enough tests (``execrl.tasks.audit_split.hold_back_audit``).
"""

from __future__ import annotations

from typing import Protocol

from execrl.tasks.errors import TaskSourceError
from execrl.tasks.importers.contests import import_apps, import_codecontests
from execrl.tasks.importers.livecodebench import import_livecodebench
from execrl.tasks.importers.mbpp import import_mbpp, import_mbpp_plus
from execrl.tasks.importers.sandboxfusion import import_sandboxfusion
from execrl.tasks.schema import Split, Task
from execrl.tasks.storage import PathLike


class Importer(Protocol):
    def __call__(self, url: PathLike, *, split: Split | None = None) -> list[Task]: ...


IMPORTERS: dict[str, Importer] = {
    "mbpp": import_mbpp,
    "mbpp_plus": import_mbpp_plus,
    "apps": import_apps,
    "codecontests": import_codecontests,
    "livecodebench": import_livecodebench,
    "sandboxfusion": import_sandboxfusion,
}


def get_importer(name: str) -> Importer:
    """The importer for format ``name``; an unknown name lists the known formats."""
    if name not in IMPORTERS:
        raise TaskSourceError(f"unknown task format {name!r}; known formats: {', '.join(sorted(IMPORTERS))}")
    return IMPORTERS[name]


__all__ = [
    "IMPORTERS",
    "get_importer",
    "import_apps",
    "import_codecontests",
    "import_livecodebench",
    "import_mbpp",
    "import_mbpp_plus",
    "import_sandboxfusion",
]
