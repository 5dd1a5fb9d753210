#!/usr/bin/env bash
# Install everything (Python packages into .venv, plus Debian packages when root: chromium, bubblewrap and
# the sandbox languages' toolchains), then
# run the linters and the whole test suite. .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --system
# The vLLM engine's own venv (.venv-vllm, ~3.5 GiB, ~2 min the first time; idempotent): the `vllm`-marked
# tests drive the real engine with it (tests/integration/test_vllm_*.py), and skip only where it is absent.
bash scripts/setup.sh --vllm
.venv/bin/ruff check src tests
.venv/bin/mypy
.venv/bin/lint-imports  # the layers and the torch/ray contracts in pyproject.toml
# Both cores: the suite is CPU-bound on one (user+sys ~ wall); files stay whole per worker (module-scoped
# sandboxes and models). A plain `pytest` without -n runs it in one process, for a debugger.
.venv/bin/python -m pytest -q -n 2 --dist loadfile "$@"
