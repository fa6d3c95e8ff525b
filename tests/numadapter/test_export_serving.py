"""Serving an export with transformers: numbers written by numadapter, refused without it, never wrong in silence.

Three tiny Llama exports: FoNE (sharded, [NUM] emitted often and written by a head that copies the latest number,
so the answers depend on the prompt's numbers), FoNE in answers mode with the head left out
(``fone_head_in_use=False``; its [NUM] output row pushed up, so that only the export's ``suppress_tokens`` keeps a
plain engine from writing [NUM]) and digits without [AGG].

- Plain transformers, in a fresh interpreter that never imports numadapter (one for all checks; it starts as soon as
  the exports are written and runs while the other tests do): ``AutoConfig``, ``AutoModelForCausalLM`` and
  ``pipeline`` refuse the FoNE export with an error naming numadapter; the two digit exports load as ordinary
  checkpoints and answer as `numadapter.generate` on `numadapter.load_exported` does.
- In this process (numadapter imported): ``AutoModelForCausalLM.from_pretrained(DIR)`` + ``model.generate`` and
  ``pipeline("text-generation", model=DIR)`` give `numadapter.generate`'s answers.
- An export in the layout written before the marking (the base's config.json) still loads with `load_exported`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch
from helpers.adapter_cases import Store
from helpers.generation_cases import PROMPTS, build, copy_latest_number, encourage_numbers, output_rows
from helpers.paths import ROOT
from transformers import AutoConfig, AutoModelForCausalLM, pipeline

from numadapter.export import NUMBER_CONFIG_NAME, export_merged, load_exported
from numadapter.generation import generate
from numadapter.serving.marking import FIELD, base_config
from numadapter.tokenization import NumberTokenizer
from numadapter.tuner.patches import SUPPORTED_ARCHITECTURES, base_weight

ASKED = [PROMPTS[0], PROMPTS[2], PROMPTS[3]]  # each with numbers, so FoNE's answers depend on them
NEW = 6  # new tokens per answer

PLAIN = textwrap.dedent(
    """
    import json, sys
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, pipeline
    fone, digit_dirs, prompts, new = json.loads(sys.argv[1])
    errors = {}
    for name, load in [("AutoConfig", lambda: AutoConfig.from_pretrained(fone)),
                       ("AutoModelForCausalLM", lambda: AutoModelForCausalLM.from_pretrained(fone)),
                       ("pipeline", lambda: pipeline("text-generation", model=fone))]:
        try:
            load()
            errors[name] = None
        except Exception as error:
            errors[name] = f"{type(error).__name__}: {error}"
    answers = {}
    for path in digit_dirs:
        model, tokenizer = AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)
        answers[path] = []
        for prompt in prompts:
            ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
            out = model.generate(ids, max_new_tokens=new, do_sample=False, pad_token_id=tokenizer.pad_token_id)
            answers[path].append(out[0, ids.shape[1]:].tolist())
    print(json.dumps({"errors": errors, "answers": answers, "numadapter": "numadapter" in sys.modules}))
    """
)


class Exports:
    """The export directories, the answers `numadapter.generate` gives on each, and the plain interpreter."""

    def __init__(self, root: str, store: Store) -> None:
        self.fone, self.left_out, self.digits = (os.path.join(root, name) for name in ("fone", "left_out", "digits"))
        model, ntok = build(store, "llama", "fone")
        encourage_numbers(model, ntok)
        copy_latest_number(model)
        export_merged(model, ntok, self.fone, max_shard_size="100KB")
        model, ntok = build(store, "llama", "fone", fone_numbers="answers", fone_head_in_use=False)
        first = generate(model, ntok, ASKED, max_new_tokens=1, return_dict=True).token_ids[0][0]
        with torch.no_grad():  # [NUM] above the first answer: only the -inf (numadapter) or suppress_tokens stop it
            output_rows(model)[0] = base_weight(model.base_model.model.get_output_embeddings())[first] * 2
        export_merged(model, ntok, self.left_out)
        model, ntok = build(store, "llama", "digits", aggregate=False)
        export_merged(model, ntok, self.digits)
        arguments = json.dumps([self.fone, [self.left_out, self.digits], ASKED, NEW])
        self.plain = subprocess.Popen([sys.executable, "-c", PLAIN, arguments], cwd=ROOT, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)  # fmt: skip
        self.reference = {path: answers(path) for path in (self.fone, self.left_out, self.digits)}

    def plain_result(self) -> dict:
        out, err = self.plain.communicate(timeout=300)
        assert self.plain.returncode == 0, err[-3000:]
        return json.loads(out.strip().splitlines()[-1])


def answers(path: str):
    model, ntok = load_exported(path)
    return generate(model, ntok, ASKED, max_new_tokens=NEW, return_dict=True)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    built = Exports(str(tmp_path_factory.mktemp("serving")), Store(str(tmp_path_factory.mktemp("bases"))))
    yield built
    if built.plain.poll() is None:
        built.plain.kill()
        built.plain.communicate()


def test_auto_model_and_pipeline_write_the_numbers_after_import_numadapter(exports):
    want = exports.reference[exports.fone]
    assert sum(map(len, want.numbers)) >= 2  # the head wrote numbers, so the texts show its decoding
    assert AutoConfig.from_pretrained(exports.fone).model_type == "numadapter-llama"
    model = AutoModelForCausalLM.from_pretrained(exports.fone)
    ntok = NumberTokenizer.from_pretrained(exports.fone)
    batch = ntok(ASKED, return_tensors="pt", padding=True, padding_side="left")
    width = batch["input_ids"].shape[1]
    output = model.generate(**batch, max_new_tokens=NEW, do_sample=False)
    assert ntok.batch_decode(output[:, width:], skip_special_tokens=True) == want.completions
    pipe = pipeline("text-generation", model=exports.fone, do_sample=False)
    assert [row[0]["generated_text"] for row in pipe(ASKED, max_new_tokens=NEW)] == want.texts


def test_an_export_in_the_layout_before_marking_loads(exports, tmp_path):
    """config.json with the base's model_type, number_config.json recording it (as exports were written before)."""
    old = str(tmp_path / "old")
    shutil.copytree(exports.fone, old)
    base = base_config(json.load(open(os.path.join(old, "config.json"))))
    json.dump(base, open(os.path.join(old, "config.json"), "w"))
    info = json.load(open(os.path.join(old, NUMBER_CONFIG_NAME)))
    info["model_config"] = base
    json.dump(info, open(os.path.join(old, NUMBER_CONFIG_NAME), "w"))
    got = answers(old)
    want = exports.reference[exports.fone]
    assert got.token_ids == want.token_ids and got.texts == want.texts


def test_every_supported_family_is_registered():
    from transformers import CONFIG_MAPPING

    from numadapter.serving.auto import FAMILIES

    assert sorted(FAMILIES.values()) == sorted(SUPPORTED_ARCHITECTURES)
    assert {arch.name for arch in SUPPORTED_ARCHITECTURES.values()} == set(FAMILIES)
    assert all(f"numadapter-{family}" in CONFIG_MAPPING for family in FAMILIES)


def test_plain_transformers_refuses_a_number_export_naming_numadapter(exports):
    config = json.load(open(os.path.join(exports.fone, "config.json")))
    assert config["model_type"] == "numadapter-llama" and config["architectures"] == ["NumadapterLlamaForCausalLM"]
    assert config[FIELD]["base_model_type"] == "llama" and "import numadapter" in config[FIELD]["note"]
    assert os.path.isfile(os.path.join(exports.fone, "model.safetensors.index.json"))  # sharded, marked the same
    result = exports.plain_result()
    assert not result["numadapter"]
    for name, error in result["errors"].items():
        assert error is not None, f"plain transformers' {name} loaded a number export"
        assert "model type `numadapter-llama`" in error, error


def test_digit_exports_are_ordinary_checkpoints_with_numadapters_answers(exports):
    for path in (exports.left_out, exports.digits):
        config = json.load(open(os.path.join(path, "config.json")))
        assert config["model_type"] == "llama" and FIELD not in config
    num_id = json.load(open(os.path.join(exports.left_out, NUMBER_CONFIG_NAME)))["number_config"]["num_token_id"]
    suppressed = json.load(open(os.path.join(exports.left_out, "generation_config.json")))["suppress_tokens"]
    assert suppressed == [num_id]
    result = exports.plain_result()
    for path in (exports.left_out, exports.digits):
        assert result["answers"][path] == exports.reference[path].token_ids, path
