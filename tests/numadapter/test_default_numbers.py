"""The default FoNE adapter (round 6): ``fone_numbers="auto"`` writes only the answers the head computes as [NUM] on
a causal LM (numbers stay the base's digit tokens, products on, half the training answers in digits, copies left to
the LM) and every number as a [NUM] on an encoder-decoder, where answers mode is not built."""

from __future__ import annotations

import datasets
import pytest
from helpers.adapter_cases import TARGETS, Store

from numadapter import NumberAdapterConfig, NumberTokenizer, get_peft_model
from numadapter.data import prepare_dataset
from numadapter.methods.fone.answer_mode import answers_mode, context_products, fone_numbers_in_effect


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("default-numbers")))


def test_the_defaults_and_what_auto_means():
    config = NumberAdapterConfig()
    assert (config.fone_numbers, config.fone_context_products) == ("auto", None)
    assert (config.fone_digit_answers, config.fone_head_copies) == (0.5, False)
    assert fone_numbers_in_effect(config) == "answers" and answers_mode(config) and context_products(config)
    config.task_type = "SEQ_2_SEQ_LM"  # what get_peft_model sets for T5
    assert fone_numbers_in_effect(config) == "all" and not answers_mode(config) and not context_products(config)
    linear = NumberAdapterConfig(fone_head_input="linear", fone_head_target="digit")
    assert fone_numbers_in_effect(linear) == "all" and not context_products(linear)
    assert not answers_mode(NumberAdapterConfig(encoding="xval"))
    explicit = NumberAdapterConfig(fone_numbers="all", fone_context_products=True)
    assert fone_numbers_in_effect(explicit) == "all" and context_products(explicit)
    with pytest.raises(ValueError, match="fone_context_products.*True, False or None"):
        NumberAdapterConfig(fone_context_products="yes")


def test_a_causal_lm_keeps_digits_and_writes_computed_answers_as_num(store):
    config = NumberAdapterConfig(int_digits=4, frac_digits=2, r=4, lora_alpha=8, target_modules=TARGETS["llama"])
    tokenizer = store.tokenizer("digits")
    ntok = NumberTokenizer(tokenizer, config)  # built before the model, as the README does
    model = get_peft_model(store.base("llama", False), config, tokenizer=tokenizer)
    assert model.peft_config["default"].task_type == "CAUSAL_LM" and answers_mode(ntok.config)
    assert model.base_model.number_modules["default"].head.products
    prompt = "Order 12: 7 * 8 ="
    for answer, written in ((" 56", ["56"]), (" 8", []), (" 15", ["15"])):  # a product; a copy (digits); a sum
        enc = ntok(prompt + answer, answer_start=len(prompt))
        assert enc["number_texts"] == written, answer
        assert [m for m in enc["num_mask"] if m] == [2, 2, 2, 1 if written else 2]
    assert ntok.num_token_id not in ntok(prompt)["input_ids"]  # a prompt keeps its numbers in digits


def test_t5_makes_every_number_a_num_and_prepare_decides_before_the_model(store):
    config = NumberAdapterConfig(int_digits=4, frac_digits=2, r=4, lora_alpha=8, target_modules=TARGETS["t5"])
    tokenizer = store.tokenizer("t5")
    ntok = NumberTokenizer(tokenizer, config)
    rows = datasets.Dataset.from_list([{"prompt": "Add 12 and 30:", "completion": " 42"}])
    prepared = prepare_dataset(rows, ntok, seq2seq=True)  # no refusal: seq2seq decides 'auto' is 'all'
    assert config.task_type == "SEQ_2_SEQ_LM" and fone_numbers_in_effect(config) == "all"
    assert sum(prepared[0]["labels"][i] == ntok.num_token_id for i in range(len(prepared[0]["labels"]))) == 1
    model = get_peft_model(store.base("t5", False), config, tokenizer=tokenizer)
    assert not model.base_model.number_modules["default"].head.products
    assert ntok("Add 12 and 30:")["input_ids"].count(ntok.num_token_id) == 2
    fresh = NumberAdapterConfig(int_digits=4, frac_digits=2, r=4, lora_alpha=8, target_modules=TARGETS["t5"])
    model = get_peft_model(store.base("t5", False), fresh, tokenizer=store.tokenizer("t5"))
    assert fresh.task_type == "SEQ_2_SEQ_LM" and not answers_mode(fresh)


def test_a_saved_tokenizer_keeps_the_mode_in_effect(store, tmp_path):
    config = NumberAdapterConfig(int_digits=4, frac_digits=2, r=4, lora_alpha=8, target_modules=TARGETS["llama"])
    tokenizer = store.tokenizer("digits")
    ntok = NumberTokenizer(tokenizer, config)
    ntok.save_pretrained(tmp_path / "before")  # the architecture is not known yet: 'auto' is saved
    get_peft_model(store.base("llama", False), config, tokenizer=tokenizer)
    ntok.save_pretrained(tmp_path / "after")
    assert NumberTokenizer.from_pretrained(tmp_path / "before").config.fone_numbers == "auto"
    assert NumberTokenizer.from_pretrained(tmp_path / "after").config.fone_numbers == "answers"
    assert NumberTokenizer.from_pretrained(tmp_path / "after", config=config).config is config
    t5 = NumberAdapterConfig(int_digits=4, frac_digits=2, task_type="SEQ_2_SEQ_LM")  # 'auto' is 'all' here
    with pytest.raises(ValueError, match="fone_numbers"):
        NumberTokenizer.from_pretrained(tmp_path / "after", config=t5)
    assert NumberTokenizer.from_pretrained(tmp_path / "before", config=t5).config is t5
