"""``.venv-vllm`` for the vLLM plugin's tests: its interpreter, and a helper script run inside it.

vLLM's CPU build pins transformers below the project's, so vLLM runs in its own venv (``bash scripts/install.sh
vllm``; CI installs it) and each check in its own interpreter there. A missing venv fails the test with the command
that installs it, never skips it.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from helpers.paths import ROOT

VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
INSTALL = "bash scripts/install.sh vllm"


def vllm_python() -> str:
    """The venv's interpreter; fails the test, naming the install command, when the venv is missing."""
    if not VLLM_PYTHON.exists():
        pytest.fail(f"vLLM is not installed in {VLLM_PYTHON.parent.parent}: run `{INSTALL}` (CI does).")
    return str(VLLM_PYTHON)


def run_helper(script: str, args: list[str], timeout: int, env: dict[str, str] | None = None) -> dict:
    """Runs ``tests/helpers/<script>`` in the venv; its last JSON line on stdout, with ``"log"`` (stdout and stderr,
    where vLLM logs)."""
    done = subprocess.run(
        [vllm_python(), str(ROOT / "tests" / "helpers" / script), *args],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=str(ROOT),
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"{script} printed no result (exit {done.returncode}):\n{done.stderr[-4000:]}"
    return {**json.loads(lines[-1]), "log": done.stdout + done.stderr}
