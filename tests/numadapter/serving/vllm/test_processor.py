"""The plugin's logits processor beside vLLM's V2 model runner (the CUDA build's), in ``.venv-vllm``.

vLLM loads every installed ``vllm.logits_processors`` entry point for every model, and its V2 runner refuses at
startup any processor that does not implement the V2 interface: numadapter installed must not keep vLLM from serving
other models there. No V2 engine runs here (it needs Triton with a CPU backend); `tests/helpers/vllm_runner_v2.py`
calls what the runner calls.
"""

from __future__ import annotations

import pytest
from helpers.vllm_venv import run_helper


@pytest.fixture(scope="module")
def runner_v2() -> dict:
    return run_helper("vllm_runner_v2.py", [], 300)


def test_v2_runner_loads_the_processor_and_it_changes_nothing(runner_v2):
    assert "error" not in runner_v2, runner_v2["error"]
    assert runner_v2["loaded"] == ["NumberLogitsProcessor"]
    assert runner_v2["declines"] == [True] and runner_v2["unchanged"] == [True]


def test_v2_runner_refuses_a_number_export_by_name(runner_v2):
    message = runner_v2["refused"]
    assert "numadapter's vLLM plugin" in message and "VLLM_USE_V2_MODEL_RUNNER=0" in message
    assert "/exports/sums" in message and "numadapter.load_exported" in message
