"""numadapter.integrations.command_line.parse_setting: one ``name=value`` item split and its value read (JSON or
text, a caller's reader, or one reader per accepted name); a bad item raises an error naming it, the form and a fix.
parse_settings: a list of items as one dict."""

from __future__ import annotations

import argparse

import pytest

from numadapter.integrations.command_line import parse_setting, parse_settings


def test_values_are_json_where_they_are_json_and_text_otherwise():
    items = {
        "r=64": ("r", 64),
        "lora_dropout=1e-3": ("lora_dropout", 0.001),
        "use_rslora=true": ("use_rslora", True),
        "revision=null": ("revision", None),
        'target_modules=["q_proj", "v_proj"]': ("target_modules", ["q_proj", "v_proj"]),
        'kwargs={"min_lr": 0}': ("kwargs", {"min_lr": 0}),
        'name="64"': ("name", "64"),
        "fone_projection=pad": ("fone_projection", "pad"),
        "target_modules=[q_proj]": ("target_modules", "[q_proj]"),  # not JSON: the text as given
        "empty=": ("empty", ""),
        " spaced =1": ("spaced", 1),  # the name loses its spaces
        "expression=a=b": ("expression", "a=b"),  # split at the first "="
    }
    for item, expected in items.items():
        assert parse_setting(item) == expected, item


def test_a_reader_or_one_reader_per_name_reads_the_value():
    assert parse_setting("name=abc", str.upper) == ("name", "ABC")
    gates = {"check": int, "confidence": float}
    assert parse_setting("check=2", gates) == ("check", 2)
    assert parse_setting(" confidence = 0.5", gates) == ("confidence", 0.5)


def test_an_item_without_a_name_and_value_names_the_item_the_form_and_an_example():
    for bad in ("r64", "=64", " =64"):
        with pytest.raises(ValueError) as info:
            parse_setting(bad, flag="--set", form="name=value (a NumberAdapterConfig field)", example="r=64")
        assert str(info.value) == f"--set {bad!r} must look like name=value (a NumberAdapterConfig field), e.g. r=64."


def test_an_unknown_name_or_a_refused_value_names_the_item_and_the_fix():
    gates = {"check": int, "confidence": float}
    with pytest.raises(
        ValueError, match=r"^--gate 'chek=2': unknown name 'chek'; use one of \['check', 'confidence'\]"
    ):
        parse_setting("chek=2", gates, flag="--gate", example="check=2")
    with pytest.raises(
        ValueError, match=r"^--gate 'check=two': 'two' is not a valid value of check .*e\.g\. check=2\.$"
    ):
        parse_setting("check=two", gates, flag="--gate", example="check=2")


def test_the_error_class_is_the_callers():
    class SettingError(ValueError):
        pass

    with pytest.raises(SettingError, match="'r64'"):
        parse_setting("r64", error=SettingError)
    with pytest.raises(argparse.ArgumentTypeError, match="'check=x'") as info:
        parse_setting("check=x", {"check": int}, error=argparse.ArgumentTypeError)
    assert isinstance(info.value.__cause__, ValueError)  # the reader's own error stays attached


def test_a_list_of_items_is_one_dict_the_last_value_of_a_name_kept():
    items = ["r=64", "fone_projection=pad", 'target_modules=["q_proj"]', "r=8"]
    assert parse_settings(items) == {"r": 8, "fone_projection": "pad", "target_modules": ["q_proj"]}
    assert parse_settings([]) == {}
    gates = {"check": int, "confidence": float}
    assert parse_settings(["check=2", "confidence=0.5"], gates) == {"check": 2, "confidence": 0.5}


def test_a_list_with_a_bad_item_raises_the_callers_error_naming_that_item():
    with pytest.raises(ValueError) as info:
        parse_settings(["r=64", "r64"], flag="--set", form="KEY=VALUE", example="r=64")
    assert str(info.value) == "--set 'r64' must look like KEY=VALUE, e.g. r=64."
    with pytest.raises(argparse.ArgumentTypeError, match=r"^--gate 'check=two': 'two' is not a valid value of check"):
        parse_settings(["check=two"], {"check": int}, flag="--gate", error=argparse.ArgumentTypeError)
