"""The repository suite's projects are real files in the package: shipped, complete, and nothing stray."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from execrl.tasks.suites._repo_core import PROJECTS_DIR, Target, load_project
from execrl.tasks.suites._repo_targets import TARGETS
from execrl.tasks.suites.repository import projects

PACKAGE = Path(__file__).parents[4] / "src" / "execrl"
DATA = PACKAGE / "tasks" / "suites" / PROJECTS_DIR


def test_every_project_file_is_in_the_wheel() -> None:
    """Regression guard: files the package-data globs miss would load in a checkout but not once installed."""
    config = tomllib.loads((PACKAGE.parents[1] / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["execrl"]
    shipped = {p for pattern in patterns for p in PACKAGE.glob(pattern) if p.is_file()}
    on_disk = {p for p in DATA.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert len(on_disk) > 100 and on_disk <= shipped, sorted(map(str, on_disk - shipped))[:5]


def test_projects_load_with_their_variants() -> None:
    loaded = projects()
    assert [p.name for p in loaded] == list(TARGETS) and len(loaded) == 8
    shop = loaded[0]
    assert shop.files["shop/money.py"].startswith("def to_cents(amount: str) -> int:\n")
    to_cents = shop.targets[0]
    assert to_cents.wrong == "def to_cents(amount: str) -> int:\n    return int(float(amount) * 100)\n"
    assert to_cents.buggy and not to_cents.old  # no change task for to_cents
    assert sum(bool(t.old) for p in loaded for t in p.targets) == sum(bool(t.change_request) for t in _all())


def _all() -> list[Target]:
    return [t for targets in TARGETS.values() for t in targets]


def _project(tmp_path: Path, variants: dict[str, str]) -> Path:
    for path, text in {"project/m.py": "def f():\n    return 1\n", **variants}.items():
        (tmp_path / "p" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "p" / path).write_text(text)
    return tmp_path


TARGET = Target("m.py", "f", "returns 1", ("tests/test_m.py::test_f",))


@pytest.mark.parametrize(
    ("variants", "target", "error"),
    [
        ({"variants/f/wrong.py": "x"}, TARGET, "wrong.py and buggy.py are required"),
        ({"variants/f/wrong.py": "x", "variants/f/buggy.py": "y", "variants/f/old.py": "z"}, TARGET,
         "old.py and a change_request go together"),
        ({"variants/f/wrong.py": "x", "variants/f/buggy.py": "y", "variants/g/wrong.py": "z"}, TARGET,
         r"\['g/wrong.py'\] belong to no target"),
    ],
)  # fmt: skip
def test_incomplete_or_stray_variants_are_refused(
    tmp_path: Path, variants: dict[str, str], target: Target, error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        load_project("p", (target,), root=_project(tmp_path, variants))
