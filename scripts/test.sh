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
.venv/bin/python -m pytest -q "$@"
