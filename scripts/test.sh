#!/usr/bin/env bash
# Install everything (Python packages into .venv, plus Debian packages when root: chromium, bubblewrap and
# the sandbox languages' toolchains), then
# run the linters and the whole test suite. .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --system
.venv/bin/ruff check src tests
.venv/bin/mypy
.venv/bin/lint-imports  # the layers and the torch/ray contracts in pyproject.toml
# Both cores: the suite is CPU-bound on one (user+sys ~ wall); files stay whole per worker (module-scoped
# sandboxes and models). A plain `pytest` without -n runs it in one process, for a debugger.
.venv/bin/python -m pytest -q -n 2 --dist loadfile "$@"
