#!/usr/bin/env bash
# Creates .venv (if missing) and installs numadapter with its test dependencies, keeping torch pinned.
# Usage: bash scripts/install.sh [extra ...]      e.g. bash scripts/install.sh deepspeed bnb
# Idempotent: a second run only checks that everything is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
extras="dev"
for e in "$@"; do extras="$extras,$e"; done
# torch first and pinned: an unpinned torch would download a multi-GB CUDA build.
python -m pip install -q "torch==2.13.0"
python -m pip install -q -c constraints.txt -e ".[$extras]"
