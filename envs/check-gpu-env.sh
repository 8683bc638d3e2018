#!/usr/bin/env bash
# Resolve the GPU environment (the `gpu` extra on Python 3.13, Linux x86-64) from package metadata alone -- no CUDA
# wheel is downloaded -- and check the versions the workflow is tested with. Prints the resolved key versions.
#   bash envs/check-gpu-env.sh [PYTHON]      # PYTHON: an interpreter to install uv with (default .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${1:-.venv/bin/python}
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
"$python" -m venv "$tools/venv"
"$tools/venv/bin/pip" install -q --disable-pip-version-check uv 2>&1 | grep -v "^WARNING: Location" || true
lock="$tools/gpu-lock.txt"
# PIP_CONSTRAINT is this machine's cap on its local torch files; a cluster node has none.
PIP_CONSTRAINT= "$tools/venv/bin/uv" pip compile pyproject.toml --extra gpu --python-version 3.13 \
    --python-platform x86_64-manylinux_2_28 --quiet -o "$lock"
grep -E "^(torch|vllm|trl|transformers|peft|numpy|snakemake|snakemake-executor-plugin-slurm)==" "$lock"
grep -qE "^snakemake-executor-plugin-slurm==2\.8\." "$lock" || { echo "GPU env: the SLURM plugin is not 2.8.x"; exit 1; }
grep -qE "^vllm==0\.(2[2-9]|3[01])\." "$lock" || { echo "GPU env: vLLM is outside TRL 1.16's 0.22-0.31"; exit 1; }
echo "GPU environment resolves ($(grep -c '==' "$lock") packages)"
