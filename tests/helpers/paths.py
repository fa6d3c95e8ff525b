"""Where things are in the repository, for tests that read files or run scripts (paths absolute, from this file)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository: README.md, numadapter/, eval_harness/, recipes/
TESTS = ROOT / "tests"
FIXTURES = TESTS / "fixtures"  # committed checkpoints and prepared datasets of earlier versions
DIST_SCRIPTS = TESTS / "dist_scripts"  # training scripts that torchrun / accelerate launch in the distributed tests
