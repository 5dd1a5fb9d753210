"""The public surface of execrl.refine and execrl.serve is curated, and importing them stays light: no
torch, transformers or aiohttp until a function that needs them runs (``execrl --help`` stays fast)."""

from __future__ import annotations

import subprocess
import sys

import execrl.refine
import execrl.serve


def test_all_names_exist_and_are_unique() -> None:
    for module in (execrl.refine, execrl.serve):
        names = module.__all__
        assert len(names) == len(set(names)), module.__name__
        assert all(hasattr(module, name) for name in names), module.__name__
    for required in ("evaluate_refine", "run_condition", "RefineConfig", "SharedFirstTurns"):
        assert required in execrl.refine.__all__
    assert {"export_model", "load_any_model"} <= set(execrl.serve.__all__)


def test_import_does_not_load_torch_or_aiohttp() -> None:
    code = (
        "import sys, execrl.refine, execrl.serve, execrl.refine.cli, execrl.serve.cli\n"
        "print(sorted(m for m in ('torch', 'transformers', 'aiohttp') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
