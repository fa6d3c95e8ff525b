"""`numadapter.tokenization.matching`: one tokenizer <-> adapter config check, the same at every entry point.

Each field that must agree is changed on the tokenizer's side alone; export, generation, the trainers and
`get_peft_model` must each name it with both values. ``aggregate`` is the case the trainer used to let through.
`NumberTokenizer` runs the same check when it is built around a config already bound to token ids.
"""

from __future__ import annotations

import copy
import re

import datasets
import pytest
from helpers.adapter_cases import TARGETS, Store
from trl import SFTConfig

from numadapter import NumberSFTTrainer, export_merged, generate
from numadapter.config import NumberAdapterConfig
from numadapter.mapping import get_peft_model
from numadapter.tokenization import NumberTokenizer
from numadapter.tokenization.matching import tokenizer_mismatches

FONE = {"encoding": "fone"}
XVAL = {"encoding": "xval", "sign_policy": "feature", "xval_scale": 10.0}
AGGREGATE = {"encoding": "digits", "aggregate": True}
EXTRA = "extra_token"  # a token added before the marker, so the tokenizer's [NUM] / [AGG] gets the next id

# field -> (the adapter's settings, the tokenizer's settings, the tokenizer's value, the adapter's value);
# the values "<id+1>" / "<id>" stand for the marker id of a tokenizer with one extra token / the adapter's id.
MISMATCHES = {
    "encoding": (FONE, XVAL, "'xval'", "'fone'"),
    "int_digits": (FONE, {**FONE, "int_digits": 5}, "5", "4"),
    "frac_digits": (FONE, {**FONE, "frac_digits": 3}, "3", "2"),
    "sign_policy": (FONE, {**FONE, "sign_policy": "feature"}, "'feature'", "'text'"),
    "aggregate": (AGGREGATE, {"encoding": "digits"}, "False", "True"),
    "xval_center": (XVAL, {**XVAL, "xval_center": 1.5}, "1.5", "0.0"),
    "xval_scale": (XVAL, {**XVAL, "xval_scale": 20.0}, "20.0", "10.0"),
    "xval_clip": (XVAL, {**XVAL, "xval_clip": 4.0}, "4.0", "5.0"),
    "num_token_id": (FONE, {**FONE, EXTRA: True}, "<id+1>", "<id>"),
    "agg_token_id": (AGGREGATE, {**AGGREGATE, EXTRA: True}, "<id+1>", "<id>"),
    "digit_token_ids": (FONE, FONE, "<digits>", "<reversed digits>"),
}
ENTRY_POINTS = ["export_merged", "numadapter.generate", "the number trainer", "get_peft_model"]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("matching")))


def adapter(store: Store, settings: dict):
    config = NumberAdapterConfig(int_digits=4, frac_digits=2, r=2, target_modules=TARGETS["llama"], **settings)
    return get_peft_model(store.base("llama", False), config, tokenizer=store.tokenizer("digits"))


def number_tokenizer(store: Store, settings: dict) -> NumberTokenizer:
    settings = dict(settings)
    tokenizer = store.tokenizer("digits")
    if settings.pop(EXTRA, False):
        tokenizer.add_tokens([EXTRA])
    return NumberTokenizer(tokenizer, NumberAdapterConfig(**{"int_digits": 4, "frac_digits": 2, **settings}))


def call(entry: str, store: Store, model, ntok, tmp_path) -> None:
    if entry == "export_merged":
        export_merged(model, ntok, tmp_path / "export")
    elif entry == "numadapter.generate":
        generate(model, ntok, "Add 1 and 2", max_new_tokens=1)
    elif entry == "the number trainer":
        args = SFTConfig(output_dir=str(tmp_path / "sft"), report_to=[], use_cpu=True)
        data = datasets.Dataset.from_list([{"text": "1 + 2 = 3"}])
        NumberSFTTrainer(model=model, args=args, train_dataset=data, processing_class=ntok)
    else:
        config = copy.deepcopy(model.peft_config["default"])  # bound: it has the ids
        get_peft_model(store.base("llama", False), config, tokenizer=ntok)


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("field", list(MISMATCHES))
def test_each_field_is_checked_at_each_entry_point(store, tmp_path, field, entry):
    model_settings, tokenizer_settings, ours, theirs = MISMATCHES[field]
    model = adapter(store, model_settings)
    ntok = number_tokenizer(store, tokenizer_settings)
    marker = len(store.tokenizer("digits"))  # the adapter's [NUM] / [AGG]: the first id after the base vocabulary
    digits = [store.tokenizer("digits").convert_tokens_to_ids(d) for d in "0123456789"]
    if field == "digit_token_ids":
        model.peft_config["default"].digit_token_ids = digits[::-1]
    values = {"<id+1>": str(marker + 1), "<id>": str(marker), "<digits>": str(digits), "<reversed digits>": ""}
    values["<reversed digits>"] = str(digits[::-1])
    ours, theirs = values.get(ours, ours), values.get(theirs, theirs)
    message = rf"^{entry}: .*{field}: tokenizer {ours}, adapter config {theirs}.*NumberTokenizer\.from_pretrained"
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        call(entry, store, model, ntok, tmp_path)
    assert not (tmp_path / "export").exists()


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_matching_tokenizer_passes_the_check(store, tmp_path, entry):
    model = adapter(store, AGGREGATE)
    ntok = number_tokenizer(store, AGGREGATE)
    call(entry, store, model, ntok, tmp_path)


def test_an_unbound_config_takes_the_tokenizers_ids_but_not_other_settings(store):
    config = NumberAdapterConfig(int_digits=4, frac_digits=2, r=2, target_modules=TARGETS["llama"], **AGGREGATE)
    with pytest.raises(
        ValueError, match=r"get_peft_model: .* on \['aggregate'\] \(aggregate: tokenizer False, adapter config True\)"
    ):
        get_peft_model(store.base("llama", False), config, tokenizer=number_tokenizer(store, {"encoding": "digits"}))
    model = get_peft_model(store.base("llama", False), config, tokenizer=number_tokenizer(store, AGGREGATE))
    assert model.peft_config["default"].agg_token_id == len(store.tokenizer("digits"))


def test_mismatches_list_every_field_with_both_values(store):
    ntok = number_tokenizer(store, {**XVAL, "int_digits": 6, "xval_clip": 3.0})
    config = NumberAdapterConfig(int_digits=4, frac_digits=2, **XVAL)
    assert tokenizer_mismatches(ntok, config) == {"int_digits": (6, 4), "xval_clip": (3.0, 5.0)}
    fone = NumberAdapterConfig(int_digits=4, frac_digits=2, encoding="fone", xval_clip=3.0)
    assert tokenizer_mismatches(ntok, fone) == {"encoding": ("xval", "fone"), "int_digits": (6, 4),
                                                "sign_policy": ("feature", "text")}  # fmt: skip


@pytest.mark.parametrize("field", ["num_token_id", "digit_token_ids"])
def test_a_number_tokenizer_refuses_a_config_bound_to_another_tokenizer(store, field):
    """A saved adapter's config carries the ids of its tokenizer: a NumberTokenizer around another tokenizer is
    refused by the same check, naming the field with both values (the digit ids were not compared here before)."""
    config = adapter(store, FONE).peft_config["default"]  # bound: [NUM] and the digit ids of the "digits" tokenizer
    tokenizer = store.tokenizer("digits")  # a fresh copy
    digits = [tokenizer.convert_tokens_to_ids(d) for d in "0123456789"]
    if field == "num_token_id":
        tokenizer.add_tokens([EXTRA])  # this tokenizer's [NUM] gets the next id
        ours, theirs = len(tokenizer), config.num_token_id
    else:
        config = copy.deepcopy(config)
        config.digit_token_ids = digits[::-1]
        ours, theirs = digits, digits[::-1]
    expected = f"on ['{field}'] ({field}: tokenizer {ours}, adapter config {theirs})"
    with pytest.raises(
        ValueError, match=r"^NumberTokenizer: the NumberTokenizer does not match .*" + re.escape(expected)
    ):
        NumberTokenizer(tokenizer, config)
