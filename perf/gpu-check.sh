#!/usr/bin/env bash
# One prepared call for a single-GPU node, offline (what ran on an H200 on 2026-12-04, docs/results.md#gpu):
#   0. installs the wheelhouse (exactly the wheels the node lacks, this project's among them: see
#      perf/gpu-check-wheelhouse.sh) into a private folder;
#   1. the training memory plan against the card: one GRPO-shaped LoRA step of each paper model, random weights in
#      real shapes (perf/memory_check.py);
#   2. the whole DAG on CUDA: random weights in SmolLM2-1.7B's shape with SmolLM2's real tokenizer and chat template,
#      real BBH items, score -> select -> train (TRL GRPO + LoRA, dynamic sampling off and on) -> evaluate ->
#      aggregate, each process's peak CUDA memory recorded (perf/gpu_check_site/sitecustomize.py);
#   3. the table of measured against planned memory and time per rule (perf/gpu_check.py table).
# Usage: WHEELHOUSE=DIR TOKENIZER=SMOLLM2_DIR BBH=.../tracking_shuffled_objects_three_objects.json \
#          bash perf/gpu-check.sh                       # prints the figures; writes them under ${OUT:-gpu-check}/
#        MODE=cpu ... bash perf/gpu-check.sh            # the rehearsal: the same steps on the CPU, shrunk
#        DRY=1 ... bash perf/gpu-check.sh               # the DAG planned only (snakemake -n); the fast tests run it
# Time limits per step: MEM_S (memory check, default 170 s) and DAG_S (the workflow, 330 s).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
MODE=${MODE:-cuda}; DRY=${DRY:-0}; python=${PYTHON:-python3}
out=$(mkdir -p "${OUT:-gpu-check}" && cd "${OUT:-gpu-check}" && pwd)
work=$out/work; rm -rf "$work"; mkdir -p "$work/site"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$out/steps.log"; }
: > "$out/steps.log"; : > "$out/peaks.jsonl"

# 0. the wheels the node lacks, into a private folder ahead of the node's own packages
if [ -n "${WHEELHOUSE:-}" ]; then
    "$python" -m pip install -q --no-index --no-deps --no-compile --target "$work/site" "$WHEELHOUSE"/*.whl \
        > "$out/pip.log" 2>&1 || { stamp "wheelhouse install failed"; tail -5 "$out/pip.log"; exit 1; }
fi
export PYTHONPATH="$root/perf/gpu_check_site:$work/site${PYTHONPATH:+:$PYTHONPATH}" GPUCHECK_PEAKS=$out/peaks.jsonl
export PATH="$work/site/bin:$PATH"
# without the project's wheel, the checkout's package
"$python" -c "import grpo_budget" 2>/dev/null || export PYTHONPATH="$PYTHONPATH:$root/workflow"
if [ "$DRY" != 1 ] && ! command -v grpo-budget > /dev/null; then
    echo "no grpo-budget command: give WHEELHOUSE (with this project's wheel) or run from its environment"; exit 1
fi
if [ "$MODE" = cuda ]; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.txt" 2>&1
    device_args=(); shrink=()
else
    device_args=(--device cpu); shrink=(--device cpu --dtype float32 --layers 1 --hidden 64 --models Qwen--Qwen3-4B)
fi
versions='import grpo_budget, torch; print("grpo_budget", grpo_budget.__file__, "| torch", torch.__version__)'
stamp "start: mode $MODE, $("$python" -c "$versions")"

# 1. the memory plan against the card (paper 1's training job: 1 prompt x G=8 completions of 250 after <= 1024)
if [ "$MODE" = cuda ]; then
    mem=(--models Qwen--Qwen3-4B meta-llama--Llama-3.1-8B-Instruct Qwen--Qwen3-14B microsoft--phi-4 --micro-batch 8
         --prompt 1024 --completion 250 --lora-r 32)
else
    mem=("${shrink[@]}" --micro-batch 2 --prompt 16 --completion 8 --lora-r 4)
fi
timeout "${MEM_S:-170}" "$python" perf/memory_check.py "${mem[@]}" > "$out/memory.jsonl" 2> "$out/memory.err"
stamp "memory check rc=$? ($(wc -l < "$out/memory.jsonl") rows in memory.jsonl)"

# 2. the whole DAG
"$python" perf/gpu_check.py model "${TOKENIZER:?set TOKENIZER to a model folder with the SmolLM2 tokenizer}" \
    "$work/model" "${device_args[@]}" > "$out/model.json" 2> "$out/model.err" \
    || { stamp "model failed"; tail -5 "$out/model.err"; exit 1; }
"$python" perf/gpu_check.py config "$work/model" "${BBH:?set BBH to tracking_shuffled_objects_three_objects.json}" \
    "$work/results" "${device_args[@]}" > "$out/config.yaml"
"$python" -m grpo_budget.cli plan --configfile "$out/config.yaml" > "$out/plan.txt" 2>&1; stamp "plan rc=$?"
if [ "$DRY" = 1 ]; then
    "$python" -m snakemake -n --quiet rules --configfile "$out/config.yaml" > "$out/snakemake.log" 2>&1
    stamp "dry run rc=$?: $(grep -c . "$out/snakemake.log") lines"
else
    timeout "${DAG_S:-330}" "$python" -m snakemake --cores "$(nproc)" --keep-going --configfile "$out/config.yaml" \
        > "$out/snakemake.log" 2>&1
    stamp "snakemake rc=$?: $(grep -E 'steps \(' "$out/snakemake.log" | tail -1)"
    grep -E -A3 '^(Error in rule|cause )' "$out/snakemake.log" | head -40
fi

# 3. measured against planned
"$python" perf/gpu_check.py table "$out/config.yaml" "$out/peaks.jsonl" | tee "$out/table.md"
stamp done
