#!/usr/bin/env bash
# The wheelhouse perf/gpu-check.sh installs on a GPU node without network: exactly the wheels the node lacks.
# Run on a connected machine:
#   bash perf/gpu-check-wheelhouse.sh OUT NODE_PACKAGES [PYTHON_VERSION]
# NODE_PACKAGES: the node image's `pip freeze` (or a list of names): those are left out. PYTHON_VERSION: the node's
# (default 3.12). What goes in: this project's wheel, and every package of the project's resolved dependencies
# (`pip install --dry-run --report` here, as pip would resolve it) that the node does not have, as binary wheels for
# manylinux x86_64 (pure-Python ones built here where no wheel exists). vLLM and the SLURM plugin are left out (the
# check runs the transformers backend on one node).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1; node=$2; pyver=${3:-3.12}
mkdir -p "$out"
have=$(sed -E 's/[<>=!~ ;\[].*//' "$node" | tr 'A-Z_' 'a-z-' | sort -u)
python3 -m pip install -q --dry-run --ignore-installed --report "$out/report.json" . > /dev/null
python3 - "$out/report.json" "$pyver" > "$out/requirements.txt" <<'PY'
import json, sys
for item in json.load(open(sys.argv[1]))["install"]:
    m = item["metadata"]
    if m["name"].lower() not in {"grpo-budget", "vllm", "snakemake-executor-plugin-slurm"}:
        print(f"{m['name']}=={m['version']}")
PY
while read -r req; do
    name=$(echo "${req%%==*}" | tr 'A-Z_' 'a-z-')
    grep -qx "$name" <<< "$have" && continue
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$out" "$req" 2>/dev/null || python3 -m pip wheel -q --no-deps -w "$out" "$req"
done < "$out/requirements.txt"
python3 -m pip wheel -q --no-deps --no-build-isolation -w "$out" .
ls "$out"/*.whl | wc -l | xargs echo "wheels:"; du -sh "$out"
