#!/usr/bin/env bash
# One prepared check for a single-GPU node, offline, in well under 10 minutes:
#   1. the memory plan against the card: one GRPO-shaped LoRA training step of each paper model, random-initialised
#      from its real shapes (no download), measured peak GPU memory and seconds per step beside the memory plan's and
#      the cost plan's predictions (perf/memory_check.py);
#   2. where the full environment is installed (snakemake, trl, datasets...): the embedded default end to end on CUDA
#      (device=cuda) and the scoring-throughput benchmark (vLLM too where it imports).
# Step 1 needs only torch, transformers, peft and accelerate on the node: the package itself runs from the checkout
# (PYTHONPATH=workflow), and its memory-plan modules import nothing else. Wheels beyond those four, for a node
# without them, come from a wheelhouse prepared on a connected machine (a few MiB, no vLLM):
#   pip download -d wheelhouse --only-binary=:all: --python-version 3.11 --platform manylinux2014_x86_64 \
#       peft accelerate
#   WHEELHOUSE=wheelhouse bash perf/gpu-check.sh
# Prints the figures; writes them under ${OUT:-gpu-check}/.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-check}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 PYTHONPATH="$PWD/workflow${PYTHONPATH:+:$PYTHONPATH}"
python=${PYTHON:-python3}

if [ -n "${WHEELHOUSE:-}" ]; then
    "$python" -m pip install -q --no-index --find-links "$WHEELHOUSE" peft accelerate 2>&1 | tail -2
fi
"$python" - <<'PY'
import torch
assert torch.cuda.is_available(), "no CUDA device visible"
p = torch.cuda.get_device_properties(0)
print(f"GPU: {p.name}, {p.total_memory / 2**30:.1f} GiB | torch {torch.__version__} (CUDA {torch.version.cuda})")
PY

# 1. Paper 1's training job: 1 prompt x G=8 completions of 250 tokens after prompts of up to 1024 (gpu.max_prompt_tokens)
"$python" perf/memory_check.py --micro-batch 8 --prompt 1024 --completion 250 --lora-r 32 | tee "$out/memory.jsonl"

# 2. The full environment, where it is installed
if ! "$python" -c "import snakemake, trl, datasets" 2>/dev/null; then
    echo "snakemake/trl/datasets not installed: skipping the end-to-end run and the throughput benchmark"
    exit 0
fi
results="$out/results"
start=$(date +%s)
"$python" -m snakemake --cores 4 --config results="$results" device=cuda > "$out/snakemake.log" 2>&1 \
    || { tail -40 "$out/snakemake.log"; exit 1; }
echo "embedded default on GPU: $(( $(date +%s) - start )) s wall"
cat "$results/summary.md"
for f in "$results"/benchmarks/*/*.tsv; do printf '%-70s %s s\n' "${f#$results/benchmarks/}" "$(tail -1 "$f" | cut -f1)"; done

backends=transformers
"$python" -c "import vllm" 2>/dev/null && backends="transformers vllm"
"$python" perf/scoring_throughput.py --model "$results/models/tiny" --prompts 1024 --backends $backends \
    | tee "$out/throughput-tiny.json"
