#!/usr/bin/env bash
# Checks that need a CUDA GPU, one section per subsystem (others add theirs below: e.g. FSDP2 over NCCL).
# Where no GPU is visible it says so in one line and exits 0, so it can sit in any pipeline.
#   bash scripts/gpu_check.sh [OUT_DIR]     results (JSON, logs) go to OUT_DIR (default gpu-check/)
# Needs a package registry for the first run on a machine (setup.sh installs the CUDA torch and vllm).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-gpu-check}"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no CUDA GPU visible (nvidia-smi finds none): nothing to check here, exiting 0"
  exit 0
fi
mkdir -p "$out"
nvidia-smi -L | tee "$out/gpus.txt"
bash scripts/setup.sh

# ---- section: the vLLM rollout engine (issue 37) --------------------------------------------------------
# The CUDA `vllm` in .venv-vllm (setup.sh --vllm picks it when nvidia-smi sees a GPU), then the same engine
# tests the CPU CI runs (generation, log-probs vs HF, sync + verify, the stale-state faults, LoRA versions,
# the rollout worker, one GRPO step) and `bench engines` with the engine in bf16. The weight transfer is
# vLLM's NCCL backend where two or more GPUs are visible (the engine on the last one), else execrl_shm.
section_vllm() {
  bash scripts/setup.sh --vllm
  local gpus
  gpus=$(nvidia-smi -L | wc -l)
  echo "vllm: $gpus GPU(s); transfer backend: $([ "$gpus" -ge 2 ] && echo nccl || echo execrl_shm)"
  .venv/bin/python -m pytest -q -p no:cacheprovider -m vllm \
    tests/integration/test_vllm_engine.py tests/integration/test_vllm_train.py 2>&1 | tee "$out/vllm-tests.txt"
  .venv/bin/execrl bench engines --sides vllm:bfloat16,hf:float32,generate:float32 --shapes bench \
    --json "$out/bench-engines.json" 2>&1 | tee "$out/bench-engines.txt"
}

section_vllm
echo "gpu_check: done; results in $out/"
