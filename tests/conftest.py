"""Suite-wide settings: one torch thread.

The tests run tiny models whose ops are far too small to split across threads; on a 2-core machine idle OpenMP
threads spinning next to the work made whole files several times slower. One thread is faster and deterministic.
"""

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Each test module starts and ends with one thread, whatever code under test set in between."""
    torch.set_num_threads(1)
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
