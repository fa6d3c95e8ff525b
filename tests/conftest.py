"""Suite-wide settings: one torch thread (two on request: `two_threads`), and a DeepSpeed op build directory of
this environment's own.

The tests run tiny models whose ops are far too small to split across threads; on a 2-core machine idle OpenMP
threads spinning next to the work made whole files several times slower. One thread is faster and deterministic.

Every DeepSpeed launch on CPU JIT-compiles DeepSpeed's shared-memory op into ``TORCH_EXTENSIONS_DIR`` (default
``~/.cache/torch_extensions/py311_cpu``, one directory for every environment on the machine). Two environments (a CI
checkout's ``.venv`` and a developer's) compile it from different paths, so each rebuilt it, 35-40 s of the first
DeepSpeed test, whenever the other had built last. The tests and the processes they launch build it into a directory
keyed by this environment's ``sys.prefix`` instead, once; a ``TORCH_EXTENSIONS_DIR`` already set is kept.
"""

import hashlib
import os
import sys
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)
ENVIRONMENT_KEY = hashlib.sha1(sys.prefix.encode()).hexdigest()[:12]
os.environ.setdefault(
    "TORCH_EXTENSIONS_DIR", str(Path.home() / ".cache" / "torch_extensions" / f"numadapter-tests-{ENVIRONMENT_KEY}")
)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Each test module starts and ends with one thread, whatever code under test set in between."""
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(1)


@pytest.fixture
def two_threads():
    """Two threads for a test that trains the real 135M checkpoint, whose matrices split well over the 2 cores (the
    context head's learning test: 67 s -> 40 s; the load-and-generate tests gained nothing); one thread after it.
    A module asks for it with ``pytestmark = pytest.mark.usefixtures("two_threads")``."""
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``slow`` run only when ``-m`` names them (``pytest -m slow``); a plain run skips them."""
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with `pytest -m slow`")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
