"""NumberAdapterConfig: LoRA options pass through, number options validate and round-trip through JSON."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest
from peft import LoraConfig

from numadapter.config import NumberAdapterConfig


def test_is_a_lora_config_with_lora_options_intact():
    config = NumberAdapterConfig(r=16, lora_alpha=32, target_modules=["q_proj", "v_proj"], lora_dropout=0.1)
    assert isinstance(config, LoraConfig)
    assert config.r == 16 and config.lora_alpha == 32 and config.lora_dropout == 0.1
    assert set(config.target_modules) == {"q_proj", "v_proj"}
    assert config.encoding == "fone" and config.int_digits == 8 and config.frac_digits == 4
    assert config.num_places == 12


def test_round_trips_through_save_pretrained(tmp_path):
    config = NumberAdapterConfig(encoding="xval", int_digits=5, frac_digits=2, xval_scale=250.0, r=4)
    config.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "adapter_config.json").read_text())
    assert saved["encoding"] == "xval" and saved["int_digits"] == 5 and saved["xval_scale"] == 250.0
    known = {f.name for f in fields(NumberAdapterConfig) if f.init}
    loaded = NumberAdapterConfig(**{k: v for k, v in saved.items() if k in known})
    for f in ("encoding", "int_digits", "frac_digits", "xval_scale", "r"):
        assert getattr(loaded, f) == getattr(config, f)


def test_every_number_field_has_help_and_is_documented():
    lora_names = {f.name for f in fields(LoraConfig)}
    doc = NumberAdapterConfig.__doc__
    for f in fields(NumberAdapterConfig):
        if f.name in lora_names:
            continue
        assert f.metadata.get("help"), f"field {f.name} has no help"
        assert f"{f.name} (`" in doc, f"field {f.name} is not in the class docstring"


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"encoding": "bytes"}, ["encoding", "bytes", "fone"]),
        ({"sign_policy": "drop"}, ["sign_policy", "drop"]),
        ({"out_of_range": "wrap"}, ["out_of_range", "wrap"]),
        ({"fone_projection": "mlp"}, ["fone_projection", "mlp"]),
        ({"fone_head_input": "x"}, ["fone_head_input"]),
        ({"fone_head_target": "digits"}, ["fone_head_target", "digits", "feature"]),
        ({"xval_form": "log"}, ["xval_form", "log"]),
        ({"ntl_kind": "kl"}, ["ntl_kind", "kl"]),
        ({"int_digits": -1}, ["int_digits", "-1"]),
        ({"int_digits": 800}, ["int_digits", "800", "64"]),
        ({"frac_digits": 2.5}, ["frac_digits", "2.5"]),
        ({"int_digits": 0, "frac_digits": 0}, ["int_digits"]),
        ({"fone_bases": []}, ["fone_bases"]),
        ({"fone_bases": [1, 10]}, ["fone_bases", "1"]),
        # the digit head scores base 10 only: extra bases would reach the input side alone (issue 16)
        ({"fone_bases": [2, 5, 10]}, ["fone_bases", "[2, 5, 10]", "base 10", "fone_bases=[10]"]),
        ({"fone_bases": [10, 10]}, ["fone_bases", "fone_bases=[10]"]),
        ({"num_token": "[X]", "agg_token": "[X]"}, ["num_token", "agg_token"]),
        ({"fone_init_scale": 0.0}, ["fone_init_scale", "0.0"]),
        ({"xval_scale": -2.0}, ["xval_scale", "-2.0"]),
        ({"xval_clip": 0}, ["xval_clip"]),
        ({"number_loss_weight": -1.0}, ["number_loss_weight"]),
        ({"ntl_weight": -0.1}, ["ntl_weight"]),
        ({"xval_head_hidden": 0}, ["xval_head_hidden"]),
        ({"aggregate_loss_lambda": 1.5}, ["aggregate_loss_lambda", "1.5"]),
        ({"aggregate": True, "encoding": "fone"}, ["aggregate", "encoding='digits'"]),
        ({"aggregate_loss_lambda": 0.5, "encoding": "xval"}, ["aggregate_loss_lambda", "xval"]),
    ],
)
def test_invalid_settings_name_field_value_and_fix(kwargs, names):
    with pytest.raises(ValueError) as err:
        NumberAdapterConfig(**kwargs)
    for name in names:
        assert name in str(err.value), f"{name!r} missing from: {err.value}"


def test_valid_combinations_accepted():
    NumberAdapterConfig(encoding="digits", aggregate=True, aggregate_loss_lambda=0.8)
    NumberAdapterConfig(encoding="fone", fone_bases=[10], fone_projection="pad", fone_head_input="slice")
    NumberAdapterConfig(encoding="xval", xval_form="multiplicative", sign_policy="feature", ntl_weight=0.3)


@pytest.mark.parametrize("encoding", ["xval", "digits"])
def test_fone_head_settings_are_not_checked_against_each_other_on_other_encodings(encoding):
    """fone_head_target='digit' with the default fone_head_input='context' is refused for FoNE only: like fone_bases
    and fone_projection, FoNE settings are not used by the other encodings (before: refused with a message about the
    FoNE head input)."""
    config = NumberAdapterConfig(encoding=encoding, fone_head_target="digit")
    assert (config.fone_head_target, config.fone_head_input) == ("digit", "context")
    with pytest.raises(ValueError, match=r"fone_head_target='digit'.*set fone_head_input='linear'"):
        NumberAdapterConfig(encoding="fone", fone_head_target="digit")


def test_config_saved_before_round_7_keeps_its_head(tmp_path):
    """An adapter_config.json without `fone_head_in_use` (saved before it existed) loads with the head in use, as it
    was trained, not undecided (a trainer would decide again, and might leave the trained head out)."""
    NumberAdapterConfig(encoding="fone", number_lr_ratio=10.0).save_pretrained(str(tmp_path))
    saved = json.load(open(tmp_path / "adapter_config.json"))
    assert saved["fone_head_in_use"] is None  # today's default: undecided
    del saved["fone_head_in_use"]
    json.dump(saved, open(tmp_path / "adapter_config.json", "w"))
    assert NumberAdapterConfig.from_pretrained(str(tmp_path)).fone_head_in_use is True


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("fone_head_min_share", 1.5, "[0, 1]"),
        ("fone_head_min_share", True, "[0, 1]"),
        ("fone_head_min_confidence", -0.1, "[0, 1]"),
        ("fone_head_min_confidence", "high", "[0, 1]"),
        ("fone_head_digit_check", 11, "[0, 10]"),
        ("fone_head_digit_check", 1.5, "[0, 10]"),
        ("fone_head_in_use", "no", "None"),
    ],
)
def test_head_choice_settings_are_checked(field, value, words):
    with pytest.raises(ValueError, match=field) as caught:
        NumberAdapterConfig(encoding="fone", **{field: value})
    assert words in str(caught.value) and repr(value) in str(caught.value)


def test_field_roles_name_config_fields_and_the_field_lists_derive_from_them():
    from numadapter.config import ANSWERS, BOUND_ID, FIELD_ROLES, MATCHED, STAMPED, TOKENIZER, fields_with
    from numadapter.tokenization.matching import ANSWER_FIELDS, MATCHED_FIELDS, MATCHED_IDS
    from numadapter.tokenization.tokenizer import SAVED_FIELDS
    from numadapter.tuner.integrity import STAMP_FIELDS

    names = [f.name for f in fields(NumberAdapterConfig)]
    assert set(FIELD_ROLES) <= set(names)
    assert set().union(*FIELD_ROLES.values()) == {TOKENIZER, MATCHED, ANSWERS, BOUND_ID, STAMPED}
    stamped = fields_with(STAMPED)
    assert list(stamped) == sorted(stamped, key=names.index)  # declaration order
    assert "encoding" in stamped and "xval_clip" not in stamped  # what is encoded, not how: not stamped
    lists = (SAVED_FIELDS, MATCHED_FIELDS, ANSWER_FIELDS, MATCHED_IDS, STAMP_FIELDS)
    assert lists == tuple(fields_with(role) for role in (TOKENIZER, MATCHED, ANSWERS, BOUND_ID, STAMPED))


def test_every_field_the_tokenizer_role_names_survives_its_save_and_load(tmp_path):
    from numadapter.config import TOKENIZER, fields_with
    from numadapter.testing import toy
    from numadapter.tokenization import NumberTokenizer

    tokenizer = toy.build_tokenizer("llama3", tmp_path / "base")
    changed = {
        "int_digits": 6, "frac_digits": 2, "sign_policy": "feature", "out_of_range": "error",
        "fone_numbers": "answers", "fone_context_numbers": 3, "fone_context_pointer": False,
        "fone_context_products": True, "fone_digit_answers": 0.25, "fone_head_copies": True,
        "fone_head_in_use": False, "xval_center": 1.5, "xval_scale": 3.0, "xval_clip": 4.0,
    }  # fmt: skip
    config = NumberAdapterConfig(**changed)
    defaults = NumberAdapterConfig()
    assert all(getattr(defaults, name) != value for name, value in changed.items())  # each one is a change
    NumberTokenizer(tokenizer, config).save_pretrained(tmp_path / "saved")
    loaded = NumberTokenizer.from_pretrained(tmp_path / "saved").config
    for name in changed:  # the settings the tokenizer applies when it encodes: each one kept
        assert getattr(loaded, name) == getattr(config, name), name
    assert set(changed) < set(fields_with(TOKENIZER))


def test_the_settings_a_method_reads_are_config_fields_of_the_same_type():
    from typing import Literal, get_args, get_origin, get_type_hints

    from numadapter.methods.base import NumberSettings

    def plain(kind):  # a Literal of strings is a str to a method
        strings = get_origin(kind) is Literal and all(isinstance(arg, str) for arg in get_args(kind))
        return str if strings else kind

    protocol = get_type_hints(NumberSettings)
    config = {name: plain(kind) for name, kind in get_type_hints(NumberAdapterConfig).items()}
    assert len(protocol) > 20 and {"encoding", "int_digits", "fone_head_input", "xval_scale"} <= set(protocol)
    differ = {name: (kind, config.get(name)) for name, kind in protocol.items() if config.get(name) != kind}
    assert differ == {}, f"NumberSettings fields missing from NumberAdapterConfig or typed differently: {differ}"
