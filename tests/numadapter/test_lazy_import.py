"""``import numadapter`` is lazy (PEP 562) and still registers with PEFT before any PEFT model is loaded.

Every check runs in a fresh interpreter (``python -c``) started in the repository root, because the test process
has long imported everything. The interpreters of this module's checks start together at the first check (each
spends ~8 s importing; two cores run two at once), and each test reads its own.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers.paths import ROOT

HEAVY = ("torch", "transformers", "peft", "trl", "deepspeed", "bitsandbytes", "datasets", "accelerate")
LOADED = f"import json, sys; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
REGISTERED = "from peft.utils.peft_types import PeftType; print('NUMADAPTER' in PeftType.__members__)"

# numadapter.__all__ as it was when ``import numadapter`` imported everything eagerly: none may go missing
PUBLIC = {
    "AggregateEmbedding", "AnswerMetrics", "ExactNumber", "FoNEDigitHead", "FoNEEmbedding", "NTLoss",
    "NumberAdapterConfig", "NumberDataCollator", "NumberGenerationOutput", "NumberLossCallback",
    "NumberOutOfRangeError", "NumberSFTTrainer", "NumberSeq2SeqTrainer", "NumberSpan", "NumberTokenizer",
    "RegressionHead", "XValEmbedding", "aggregation_weights", "find_numbers", "fone_decode", "fone_features",
    "export_merged", "generate", "get_peft_model", "load_exported", "ntl_loss_func", "prepare_dataset",
}  # fmt: skip
ADDED = {"convert_gguf", "smollm2_path"}  # added since: the real checkpoint the install brings


IMPORT_ONLY = f"import numadapter; {LOADED}"
CLI_HELP = (
    "from numadapter.app.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit as exit:\n"
    f"    assert exit.code == 0, exit.code\n{LOADED}"
)  # the console script
PUBLIC_NAMES = (
    "import json, numadapter\nfrom numadapter import *\n"
    "names = {n: type(getattr(numadapter, n)).__name__ for n in numadapter.__all__}\n"
    "assert all(n in globals() for n in numadapter.__all__)\n"
    "print(json.dumps(names))"
)
IMPORT_ORDERS = [
    "import numadapter\nimport peft",  # the user imports PEFT after numadapter
    "import peft\nimport numadapter",  # ... or before it
    "from numadapter import NumberTokenizer",  # PEFT first imported by numadapter.config, half-executed
    "from numadapter.tokenization import NumberTokenizer",
    "from numadapter.tuner.model import NumberAdapterModel",
    "import transformers\nimport numadapter\nfrom peft import PeftModel",
]
LAZY_NAMES = f"import numadapter\nnumadapter.find_numbers('1 + 2')\n{LOADED}\n{REGISTERED}"
SCRIPTS = [IMPORT_ONLY, CLI_HELP, PUBLIC_NAMES, *(f"{code}\n{REGISTERED}" for code in IMPORT_ORDERS), LAZY_NAMES]
_running: dict[str, subprocess.Popen] = {}


def _start(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip


def run_python(code: str) -> list[str]:
    """Runs `code` in a fresh interpreter in the repository root; returns its stdout lines. The first call starts
    every script of `SCRIPTS` at once; a script's own call waits for it."""
    if not _running:
        _running.update((script, _start(script)) for script in SCRIPTS)
    proc = _running.pop(code, None) or _start(code)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    return out.strip().splitlines()


@pytest.fixture(scope="module", autouse=True)
def _stop_unread_scripts():
    """Scripts whose tests were deselected are stopped when the module ends."""
    yield
    for proc in _running.values():
        proc.kill()
        proc.communicate()
    _running.clear()


def test_import_numadapter_loads_no_heavy_dependency():
    loaded = json.loads(run_python(IMPORT_ONLY)[-1])
    assert loaded == [], f"`import numadapter` imported {loaded}"


def test_help_of_the_console_script_loads_no_heavy_dependency():
    assert json.loads(run_python(CLI_HELP)[-1]) == []


def test_every_public_name_resolves_as_before():
    kinds = json.loads(run_python(PUBLIC_NAMES)[-1])
    assert set(kinds) == PUBLIC | ADDED
    assert kinds["NumberSFTTrainer"] == "type" and kinds["generate"] == "function"
    assert kinds["NumberTokenizer"] == "type" and kinds["find_numbers"] == "function"


def test_names_are_the_objects_of_their_modules_and_submodules_are_attributes():
    import numadapter
    from numadapter.generation import numbers_of
    from numadapter.tokenization import NumberTokenizer
    from numadapter.training.sft import NumberSFTTrainer

    assert numadapter.NumberTokenizer is NumberTokenizer and numadapter.NumberSFTTrainer is NumberSFTTrainer
    assert numadapter.generation.numbers_of is numbers_of  # docs/guide.md, "Generation"
    assert set(numadapter.__all__) <= set(dir(numadapter))
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        numadapter.not_a_name  # noqa: B018


@pytest.mark.parametrize("code", IMPORT_ORDERS)
def test_peft_registration_happens_whichever_imports_first(code):
    assert run_python(f"{code}\n{REGISTERED}")[-1] == "True"


def test_lazy_names_leave_peft_unregistered_until_it_is_imported():
    """`numbers` needs no PEFT: using it imports none, and the registration waits for PEFT's import."""
    out = run_python(LAZY_NAMES)
    assert json.loads(out[-2]) == [] and out[-1] == "True"
