"""``import numadapter`` is lazy (PEP 562) and still registers with PEFT before any PEFT model is loaded.

Every check runs in a fresh interpreter (``python -c``) started in the repository root, because the test process
has long imported everything.
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


def run_python(code: str) -> list[str]:
    """Runs `code` in a fresh interpreter in the repository root; returns its stdout lines."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()


def test_import_numadapter_loads_no_heavy_dependency():
    loaded = json.loads(run_python(f"import numadapter; {LOADED}")[-1])
    assert loaded == [], f"`import numadapter` imported {loaded}"


@pytest.mark.parametrize("module", ["numadapter.app.cli"])  # the console script
def test_help_of_the_console_script_loads_no_heavy_dependency(module):
    code = (
        f"from {module} import main\ntry:\n    main(['--help'])\nexcept SystemExit as exit:\n"
        f"    assert exit.code == 0, exit.code\n{LOADED}"
    )
    assert json.loads(run_python(code)[-1]) == []


def test_every_public_name_resolves_as_before():
    code = (
        "import json, numadapter\nfrom numadapter import *\n"
        "names = {n: type(getattr(numadapter, n)).__name__ for n in numadapter.__all__}\n"
        "assert all(n in globals() for n in numadapter.__all__)\n"
        "print(json.dumps(names))"
    )
    kinds = json.loads(run_python(code)[-1])
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


@pytest.mark.parametrize(
    "code",
    [
        "import numadapter\nimport peft",  # the user imports PEFT after numadapter
        "import peft\nimport numadapter",  # ... or before it
        "from numadapter import NumberTokenizer",  # PEFT first imported by numadapter.config, half-executed
        "from numadapter.tokenization import NumberTokenizer",
        "from numadapter.tuner.model import NumberAdapterModel",
        "import transformers\nimport numadapter\nfrom peft import PeftModel",
    ],
)
def test_peft_registration_happens_whichever_imports_first(code):
    assert run_python(f"{code}\n{REGISTERED}")[-1] == "True"


def test_lazy_names_leave_peft_unregistered_until_it_is_imported():
    """`numbers` needs no PEFT: using it imports none, and the registration waits for PEFT's import."""
    out = run_python(f"import numadapter\nnumadapter.find_numbers('1 + 2')\n{LOADED}\n{REGISTERED}")
    assert json.loads(out[-2]) == [] and out[-1] == "True"
