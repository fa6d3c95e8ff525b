"""Every misuse gets an error naming value and fix (docs/DESIGN.md, "Bad input never corrupts silently")."""

from __future__ import annotations

import peft
import pytest
import torch
from helpers.adapter_cases import TOKENIZER_OF, Case, Store, build, make_batch, make_config

from numadapter.mapping import get_peft_model


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("errors")))


@pytest.fixture(scope="module")
def llama(store):
    case = Case("llama", "fone", tie=False)
    model, ntok, config = build(store, case)
    return case, model, ntok, config


def test_num_mask_shifted_by_one_is_refused(llama):
    case, model, ntok, _ = llama
    batch = make_batch(case, ntok)
    batch["num_mask"] = torch.roll(batch["num_mask"], 1, dims=1)
    with pytest.raises(ValueError, match=r"`num_mask` does not match the \[NUM\] positions of `input_ids`"):
        model(**batch)


def test_number_tensors_missing_while_ids_hold_num(llama):
    case, model, ntok, _ = llama
    batch = make_batch(case, ntok)
    for key in ("num_mask", "num_digits", "num_sign", "num_values"):
        del batch[key]
    with pytest.raises(ValueError, match=r"contains \[NUM\] .* but no `num_mask`"):
        model(**batch)


def test_digit_width_must_match_config(llama):
    case, model, ntok, config = llama
    batch = make_batch(case, ntok)
    batch["num_digits"] = batch["num_digits"][..., :-1]
    with pytest.raises(ValueError, match=rf"P = int_digits \+ frac_digits = {config.num_places}"):
        model(**batch)


def test_number_tensors_padded_differently_from_ids(llama):
    case, model, ntok, _ = llama
    batch = make_batch(case, ntok)
    batch["num_sign"] = torch.nn.functional.pad(batch["num_sign"], (0, 1))
    with pytest.raises(ValueError, match=r"`num_sign` has shape .* pad / truncate / shift"):
        model(**batch)


def test_digits_outside_0_to_9(llama):
    case, model, ntok, _ = llama
    batch = make_batch(case, ntok)
    b, t = batch["num_mask"].nonzero()[0].tolist()
    batch["num_digits"][b, t, 0] = 12
    with pytest.raises(ValueError, match=r"place digits must be 0\.\.9"):
        model(**batch)


def test_labels_with_num_where_ids_have_none(llama):
    case, model, ntok, config = llama
    batch = make_batch(case, ntok)
    batch["labels"] = batch["labels"].clone()
    batch["labels"][1, 1] = config.num_token_id
    with pytest.raises(ValueError, match=r"`labels` has the number token .* labels must be a \(masked\) copy"):
        model(**batch)


def test_number_tensors_with_inputs_embeds_only(llama):
    case, model, ntok, _ = llama
    batch = make_batch(case, ntok)
    embeds = model.get_input_embeddings()(batch.pop("input_ids"))
    with pytest.raises(ValueError, match="number tensors need `input_ids`"):
        model(inputs_embeds=embeds, **batch)


def test_t5_label_numbers_must_match_labels(store):
    case = Case("t5", "fone", tie=True)
    model, ntok, _ = build(store, case)
    batch = make_batch(case, ntok)
    batch["labels_num_mask"] = torch.zeros_like(batch["labels_num_mask"])
    with pytest.raises(ValueError, match=r"`labels_num_mask` does not match the \[NUM\] positions of `labels`"):
        model(**batch)


def test_unsupported_architecture_lists_the_supported_ones(store):
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=100))
    config = make_config(Case("llama", "fone", False), target_modules=["c_attn"], num_token_id=99)
    with pytest.raises(ValueError, match=r"does not support GPT2LMHeadModel.*LlamaForCausalLM"):
        get_peft_model(model, config)


def test_peft_path_without_ids_points_to_numadapter_get_peft_model(store):
    config = make_config(Case("llama", "fone", False), task_type="CAUSAL_LM")
    with pytest.raises(ValueError, match=r"needs `num_token_id`.*numadapter\.get_peft_model"):
        peft.get_peft_model(store.base("llama", False), config)


def test_peft_path_without_task_type(store):
    config = make_config(Case("llama", "fone", False), num_token_id=5)
    with pytest.raises(ValueError, match=r"task_type='CAUSAL_LM'.*got task_type=None"):
        peft.get_peft_model(store.base("llama", False), config)


def test_wrong_task_type_for_t5(store):
    config = make_config(Case("t5", "fone", False), task_type="CAUSAL_LM", num_token_id=5)
    with pytest.raises(ValueError, match=r"task_type='SEQ_2_SEQ_LM'"):
        peft.get_peft_model(store.base("t5", False), config)


def test_trainable_token_indices_as_dict_is_refused(store):
    config = make_config(Case("llama", "fone", False), trainable_token_indices={"embed_tokens": [3]})
    with pytest.raises(ValueError, match="as a list of input-embedding token ids, got a dict"):
        get_peft_model(store.base("llama", False), config, tokenizer=store.tokenizer(TOKENIZER_OF["llama"]))


def test_peft_path_with_explicit_ids_works(store):
    """Without a tokenizer the config must name the ids; then `peft.get_peft_model` alone does the rest."""
    base = store.base("llama", False)
    rows = base.get_input_embeddings().weight.shape[0]
    config = make_config(Case("llama", "fone", False), task_type="CAUSAL_LM", num_token_id=rows)
    model = peft.get_peft_model(base, config)
    assert isinstance(model, peft.PeftModelForCausalLM)
    assert (config.original_vocab_size, config.resized_vocab_size) == (rows, rows + 1)
    assert model.get_input_embeddings().weight.shape[0] == rows + 1


def test_buffer_and_hooks_are_cleared_when_the_model_raises(store):
    case = Case("t5", "fone", tie=False)
    model, ntok, _ = build(store, case)
    batch = make_batch(case, ntok)
    inner = model.get_base_model()
    watched = [inner.encoder, inner.decoder, inner.encoder.embed_tokens, inner.decoder.embed_tokens, inner.lm_head]
    before = [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in watched]

    def explode(module, args):
        raise RuntimeError("boom inside the decoder")

    handle = inner.decoder.block[0].register_forward_pre_hook(explode)
    with pytest.raises(RuntimeError, match="boom inside the decoder"):
        model(**batch)
    handle.remove()
    tuner = model.base_model
    assert not tuner._buffer.armed and tuner._buffer.sides == {} and tuner._buffer.current is None
    assert [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in watched] == before
    assert torch.isfinite(model(**batch).loss)  # and the next call works


def _shifted(batch: dict, num_id: int) -> dict:
    shift_labels = torch.full_like(batch["input_ids"], -100)
    shift_labels[:, -1] = num_id
    return dict(batch, shift_labels=shift_labels)


def test_shift_labels_errors_name_the_fix(store):
    case = Case("llama", "fone", tie=False)
    model, ntok, config = build(store, case)
    enc = ntok(["a 12.5 + 7 = 19.5"], return_tensors="pt")
    batch = {k: v for k, v in enc.items() if k != "number_texts"}
    shifted = _shifted(batch, config.num_token_id)
    with pytest.raises(ValueError, match="got both `labels` and `shift_labels`"):
        model(**shifted, labels=batch["input_ids"])
    with pytest.raises(ValueError, match="`shift_labels` contains .* no `labels_num_mask`"):
        model(**shifted)
    sides = {f"labels_num_{k}": batch[f"num_{k}"] for k in ("mask", "digits", "sign", "values")}
    with pytest.raises(ValueError, match=r"`labels_num_mask` does not match the \[NUM\] positions of `shift_labels`"):
        model(**shifted, **sides)  # the input's numbers, not aligned with the labels
    with pytest.raises(ValueError, match=r"`shift_labels` has shape \(1, 5\)"):
        model(**dict(shifted, shift_labels=shifted["shift_labels"][:, :5]))
    with pytest.raises(ValueError, match="`labels_num_\\*` go with `shift_labels`"):
        model(**batch, labels=batch["input_ids"], **sides)


def test_shift_labels_are_refused_for_t5(store):
    case = Case("t5", "fone", tie=False)
    model, ntok, _ = build(store, case)
    batch = make_batch(case, ntok)
    labels = batch.pop("labels")
    with pytest.raises(ValueError, match="`shift_labels` is for causal LMs"):
        model(**batch, shift_labels=labels)


@pytest.mark.parametrize("family", ["llama", "t5"])
def test_add_adapter_without_ids_names_num_token_id(store, family):
    """A second adapter on an adapted model: the fix is the first adapter's ids, not get_peft_model again."""
    case = Case(family, "fone", tie=False)
    model, ntok, config = build(store, case)
    second = make_config(case, task_type=config.task_type)
    with pytest.raises(ValueError, match=rf"num_token_id={ntok.num_token_id}\b") as info:
        model.add_adapter("second", second)
    assert "numadapter.get_peft_model(model, config, tokenizer" not in str(info.value)
    fixed = make_config(case, task_type=config.task_type, num_token_id=ntok.num_token_id)
    model.add_adapter("third", fixed)
    assert "third" in model.base_model.number_modules
