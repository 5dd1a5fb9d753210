#!/usr/bin/env bash
# The sharded trainer's checks that need a CUDA GPU (issue 38), kept apart from scripts/gpu_check.sh (the
# vLLM engine's, issue 37) so the two merge without conflict; that script may call this one.
# Where no GPU is visible it says so in one line and exits 0, so it can sit in any pipeline.
#   bash scripts/gpu_check_fsdp.sh [OUT_DIR]     results (JSON, logs) go to OUT_DIR (default gpu-check/)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-gpu-check}"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check_fsdp: no CUDA GPU visible (nvidia-smi finds none): nothing to check here, exiting 0"
  exit 0
fi
mkdir -p "$out"
nvidia-smi -L | tee "$out/gpus.txt"
python="${EXECRL_PYTHON:-.venv/bin/python}"

# ---- section: the sharded trainer, FSDP2 over NCCL (issue 38) -------------------------------------------
# The CPU suite's parity test (tests/unit/trainer/test_sharded.py: 2 gloo ranks vs one process) on GPUs:
# one rank per GPU (at most 2) over NCCL vs policy_update in one process on cuda:0, GRPO (shared-prompt
# groups, gradient checkpointing), PPO (value head) and LoRA, three updates each, within 1e-6. Then the
# update alone at 1 and 2 ranks on SmolLM2-135M (bench train --ranks; 2 ranks only with 2 GPUs) and in
# fp32 vs bf16-mixed, for the per-rank model state and the step times on this GPU.
section_fsdp() {
  local gpus ranks
  gpus=$(nvidia-smi -L | wc -l)
  ranks=$([ "$gpus" -ge 2 ] && echo 1,2 || echo 1)
  echo "fsdp: $gpus GPU(s); NCCL parity on $([ "$gpus" -ge 2 ] && echo 2 || echo 1) rank(s)"
  "$python" -m pytest -q -p no:cacheprovider -m gpu -s tests/unit/trainer/test_sharded_gpu.py 2>&1 \
    | tee "$out/fsdp-parity.txt"
  "$python" -m execrl bench train --ranks "$ranks" --precision fp32,bf16-mixed --steps 3 --prompts 4 \
    --samples 8 --max-new-tokens 96 --json "$out/fsdp-bench-train.json" 2>&1 | tee "$out/fsdp-bench-train.txt"
}

section_fsdp
echo "gpu_check_fsdp: done; results in $out/"
