"""Config values that must be refused (NaN, infinity, non-integers, absurd token ids) and fone_decode of NaN."""

from __future__ import annotations

import math
from decimal import Decimal

import peft
import pytest
import torch
from helpers.adapter_cases import Case

from numadapter import NumberAdapterConfig, NumberTokenizer, fone_decode, fone_features
from numadapter.mapping import get_peft_model

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("xval_scale", NAN, r"`xval_scale` must be a finite number, got nan"),
        ("xval_scale", INF, r"`xval_scale` must be a finite number, got inf"),
        ("xval_center", NAN, r"`xval_center` must be a finite number, got nan"),
        ("xval_center", -INF, r"`xval_center` must be a finite number, got -inf"),
        ("xval_clip", NAN, r"`xval_clip` must be a finite number"),
        ("number_loss_weight", NAN, r"`number_loss_weight` must be a finite number, got nan"),
        ("ntl_weight", INF, r"`ntl_weight` must be a finite number"),
        ("fone_init_scale", NAN, r"`fone_init_scale` must be a finite number"),
        ("aggregate_loss_lambda", NAN, r"`aggregate_loss_lambda` must be a finite number"),
        ("xval_head_hidden", 2.5, r"`xval_head_hidden` must be an integer in \[1, 65536\], got 2.5"),
        ("xval_head_hidden", True, r"`xval_head_hidden` must be an integer"),
        ("int_digits", 4.0, r"`int_digits` must be an integer in \[0, 64\], got 4.0"),
        ("xval_scale", "10", r"`xval_scale` must be a number, got '10'"),
        ("num_token_id", 10**7, r"`num_token_id` is 10000000, beyond the largest vocabulary .* tokenizer=tokenizer"),
        ("resized_vocab_size", 2**30, r"`resized_vocab_size` is 1073741824, beyond the largest vocabulary"),
        ("digit_token_ids", list(range(10**7, 10**7 + 10)), r"`digit_token_ids` must be 10 distinct token ids"),
    ],
)
def test_bad_values_are_refused_with_field_and_value(field, value, match):
    with pytest.raises(ValueError, match=match):
        NumberAdapterConfig(**{field: value})


def test_edge_values_still_accepted():
    config = NumberAdapterConfig(encoding="xval", xval_center=-1e6, xval_scale=1e-3, xval_head_hidden=None)
    assert (config.xval_center, config.xval_scale, config.xval_head_hidden) == (-1e6, 1e-3, None)
    assert NumberAdapterConfig(number_loss_weight=0, num_token_id=2**22).num_token_id == 2**22


def test_huge_token_id_through_peft_get_peft_model_is_refused(store):
    """peft.get_peft_model with an id from no tokenizer: refused before the embedding grows to a million rows."""
    case = Case("llama", "fone", tie=False)
    base = store.base(case.family, case.tie)
    rows = base.get_input_embeddings().weight.shape[0]
    config = NumberAdapterConfig(num_token_id=10**6, target_modules=["q_proj"], task_type="CAUSAL_LM")
    match = rf"num_token_id=1000000 would grow the input embedding from {rows} to 1000001 rows"
    with pytest.raises(ValueError, match=match):
        peft.get_peft_model(base, config)
    assert base.get_input_embeddings().weight.shape[0] == rows  # nothing was resized


def test_next_free_id_through_peft_get_peft_model_still_works(store):
    case = Case("llama", "fone", tie=False)
    base = store.base(case.family, case.tie)
    rows = base.get_input_embeddings().weight.shape[0]
    config = NumberAdapterConfig(num_token_id=rows, target_modules=["q_proj"], task_type="CAUSAL_LM")
    model = peft.get_peft_model(base, config)
    assert model.get_base_model().get_input_embeddings().weight.shape[0] == rows + 1


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("num_token", "5", r"`num_token`='5' holds the number '5'.*set num_token='\[NUM\]'"),
        ("num_token", "[NUM2]", r"`num_token`='\[NUM2\]' holds the number '2'.*set num_token='\[NUM\]'"),
        ("agg_token", "<1>", r"`agg_token`='<1>' holds the number '1'.*set agg_token='\[AGG\]'"),
        ("num_token", "", r"`num_token` must be a non-blank string .*got '': set num_token='\[NUM\]'"),
        ("agg_token", " ", r"`agg_token` must be a non-blank string .*got ' ': set agg_token='\[AGG\]'"),
        ("num_token", None, r"`num_token` must be a non-blank string .*got None"),
        ("agg_token", "[NUM]", r"must differ, both are '\[NUM\]': set agg_token='\[AGG\]'"),
    ],
)
def test_bad_marker_strings_are_refused_when_the_config_is_made(field, value, match):
    """Before: num_token="5" bound [NUM] to the digit token '5' ("a 12 b" and "a 1 b" encoded alike) and "" failed
    only later, inside the tokenizer."""
    with pytest.raises(ValueError, match=match):
        NumberAdapterConfig(**{field: value})


@pytest.mark.parametrize(
    "value,use",
    [("Ġyear", r"an ordinary token of the base vocabulary \(id \d+\)"), ("</s>", "the tokenizer's eos_token"),
     ("<pad>", "the tokenizer's pad_token"), ("<unk>", "the tokenizer's unk_token")],
)  # fmt: skip
def test_marker_already_used_by_the_tokenizer_is_refused(store, value, use):
    tokenizer = store.tokenizer("digits")
    before = len(tokenizer)
    config = NumberAdapterConfig(num_token=value, target_modules=["q_proj"])
    match = rf"`num_token`='{value}' is {use} in .* Set num_token='\[NUM\]' \(a new token numadapter adds\)"
    with pytest.raises(ValueError, match=match):
        NumberTokenizer(tokenizer, config)
    with pytest.raises(ValueError, match=match):  # the same check where get_peft_model binds the tokenizer
        get_peft_model(store.base("llama", False), config, tokenizer=tokenizer)
    assert len(tokenizer) == before and config.num_token_id is None  # nothing was added or bound


def test_marker_refused_in_the_vocabulary_names_a_free_choice(store):
    tokenizer = store.tokenizer("digits")
    tokenizer.add_tokens(["[NUM]"])  # an ordinary (not special) added token: the default is taken too
    with pytest.raises(ValueError, match=r"`num_token`='\[NUM\]' is an ordinary token .* Set num_token='<\|num\|>'"):
        NumberTokenizer(tokenizer, NumberAdapterConfig())


def test_a_free_special_token_and_a_saved_marker_are_accepted(store, tmp_path):
    tokenizer = store.tokenizer("digits")
    tokenizer.add_special_tokens({"additional_special_tokens": ["<reserved>"]})
    ntok = NumberTokenizer(tokenizer, NumberAdapterConfig(num_token="<reserved>"))
    assert ntok.num_token_id == tokenizer.convert_tokens_to_ids("<reserved>")
    fresh = NumberTokenizer(store.tokenizer("digits"), NumberAdapterConfig())
    fresh.save_pretrained(tmp_path)  # [NUM] is now an added special token of the saved tokenizer
    assert NumberTokenizer.from_pretrained(tmp_path).num_token_id == fresh.num_token_id


@pytest.mark.parametrize("bad", [NAN, INF, -INF])
def test_fone_decode_refuses_non_finite_features(bad):
    feats = fone_features(["4.17", "12"], int_digits=2, frac_digits=2)
    assert fone_decode(feats, int_digits=2, frac_digits=2) == ["4.17", "12"]
    feats[1, 3] = bad
    with pytest.raises(ValueError, match=r"rows \[1\] hold NaN or infinite values"):
        fone_decode(feats, int_digits=2, frac_digits=2)


def test_fone_decode_all_nan_is_not_zero():
    feats = torch.full((1, 8), math.nan)
    with pytest.raises(ValueError, match="NaN or infinite"):
        fone_decode(feats, int_digits=2, frac_digits=2)


@pytest.mark.parametrize(("int_digits", "frac_digits"), [(8, 4), (6, 3), (3, 0), (0, 3), (15, 0)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fone_decode_is_exact_at_its_limits_in_low_precision(int_digits, frac_digits, dtype):
    """The outside tester's finding that held: FoNE features rounded to bf16 / fp16 still decode exactly, also the
    largest and smallest numbers of the range and the places where a digit carries."""
    top = "9" * int_digits + ("." + "9" * frac_digits if frac_digits else "")
    step = "0." + "0" * (frac_digits - 1) + "1" if frac_digits else "1"
    numbers = ["0", top or "0", step]
    if int_digits:
        numbers += ["1" + "0" * (int_digits - 1), "9" * int_digits, "5" * int_digits]
    if int_digits and frac_digits:
        numbers += ["9" * (int_digits - 1) + "0." + "0" * frac_digits, "1." + "0" * (frac_digits - 1) + "1"]
    features = fone_features(numbers, int_digits, frac_digits).to(dtype)  # (N, 2 * (int_digits + frac_digits))
    decoded = fone_decode(features.float(), int_digits=int_digits, frac_digits=frac_digits)
    assert [Decimal(x) for x in decoded] == [Decimal(x) for x in numbers], list(zip(numbers, decoded))
