#!/usr/bin/env bash
# One prepared check for any single-GPU machine, in well under 10 minutes:
#   1. the embedded default end to end with the transformers backend on CUDA (bf16 GRPO, batched generation);
#   2. the scoring-throughput benchmark: batched vs one-at-a-time, and vLLM vs transformers where vLLM imports.
# Prints the figures; writes them under ${OUT:-gpu-check}/. Usage: bash perf/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-check}
mkdir -p "$out"
export PYTHONUNBUFFERED=1

if ! python3 -c "import grpo_budget" 2>/dev/null; then
    python3 -m pip install -q -e . 2>&1 | tail -2
fi
python3 - <<'PY'
import torch
assert torch.cuda.is_available(), "no CUDA device visible"
print("GPU:", torch.cuda.get_device_name(0), "| torch", torch.__version__)
PY

results="$out/results"
start=$(date +%s)
snakemake --cores 4 --config results="$results" > "$out/snakemake.log" 2>&1 || { tail -40 "$out/snakemake.log"; exit 1; }
echo "embedded default on GPU: $(( $(date +%s) - start )) s wall"
cat "$results/summary.md"
for f in "$results"/benchmarks/*/*.tsv; do printf '%-70s %s s\n' "${f#$results/benchmarks/}" "$(tail -1 "$f" | cut -f1)"; done

backends=transformers
python3 -c "import vllm" 2>/dev/null && backends="transformers vllm"
python3 perf/scoring_throughput.py --model "$results/models/tiny" --prompts 1024 --backends $backends \
    | tee "$out/throughput-tiny.json"
if [ -n "${THROUGHPUT_MODEL:-}" ]; then  # a real model already on the machine, e.g. a local Qwen2.5-0.5B-Instruct
    python3 perf/scoring_throughput.py --model "$THROUGHPUT_MODEL" --prompts 256 --max-new-tokens 256 \
        --batch-size 256 --backends $backends | tee "$out/throughput-model.json"
fi
