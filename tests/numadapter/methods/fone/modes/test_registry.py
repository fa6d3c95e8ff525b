"""The FoNE head-mode registry, from outside the package: a mode defined here is one class and one
`register_head_mode` line, and it trains through `NumberSFTTrainer`, saves and loads; a context mode's `forms` is
what the tokenizer writes as [NUM] in answers mode."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from helpers.adapter_cases import Store
from helpers.answers_cases import SUMS_ONLY
from helpers.training_cases import arithmetic, sft_args
from peft import PeftModel
from torch import Tensor, nn

from numadapter.config import NumberAdapterConfig
from numadapter.mapping import get_peft_model
from numadapter.methods import (  # the public path: a head mode from outside the package
    HeadMode,
    get_head_mode,
    known_head_modes,
    register_head_mode,
    unregister_head_mode,
)
from numadapter.methods.fone.answer_mode import fone_numbers_in_effect
from numadapter.methods.fone.head import FoNEDigitHead
from numadapter.methods.fone.modes.context import ContextCombination
from numadapter.testing import toy
from numadapter.tokenization import NumberTokenizer
from numadapter.training.sft import NumberSFTTrainer

TWO_LAYER = "two_layer"
COPIES = "copies_only"


class TwoLayerReadout(HeadMode):
    """A read-out with one hidden layer: ``W2 gelu(W1 h)``, the 2-vectors of every place."""

    def build(self, head: nn.Module, hidden_size: int, config: Any) -> None:
        head.inner = nn.Linear(hidden_size, 16)
        head.outer = nn.Linear(16, 2 * head.num_places)

    def readout(self, head: nn.Module, h: Tensor) -> Tensor:
        x = F.gelu(F.linear(h, head.inner.weight.float(), head.inner.bias.float()))
        return F.linear(x, head.outer.weight.float(), head.outer.bias.float()).unflatten(-1, (head.num_places, 2))


class CopiesOnly(ContextCombination):
    """The context head, but it claims to form only the copies of a number before the answer."""

    def forms(self, context, value: int, config: Any) -> bool:
        return value in context


@pytest.fixture
def two_layer():
    mode = register_head_mode(TWO_LAYER, TwoLayerReadout(), replace=True)
    yield mode
    if TWO_LAYER in known_head_modes():
        unregister_head_mode(TWO_LAYER)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("modes")))


SETTINGS = dict(encoding="fone", int_digits=4, frac_digits=2, r=4, lora_alpha=8, lora_dropout=0.0,
                target_modules=["q_proj", "v_proj"], fone_numbers="all")  # fmt: skip


def test_the_builtin_modes_are_registered_and_build_the_heads_parameters():
    assert known_head_modes()[:4] == ("linear", "slice", "rotation", "context")
    names = {}
    for mode in ("linear", "slice", "rotation", "context"):
        config = NumberAdapterConfig(encoding="fone", int_digits=4, frac_digits=2, fone_head_input=mode,
                                     fone_numbers="all", fone_context_products=mode == "context" or None)  # fmt: skip
        head = FoNEDigitHead(32, config)
        assert head.mode is get_head_mode(mode) and head.mode.reads_context == (mode == "context")
        names[mode] = sorted(head.state_dict())
    assert names["linear"] == ["proj.bias", "proj.weight"] and names["slice"] == []
    assert names["rotation"] == ["proj.bias", "proj.weight", "rotation.bias", "rotation.weight"]
    assert names["context"] == [
        "coefficients.bias", "coefficients.weight", "operations.bias", "operations.weight", "proj.bias",
        "proj.weight",
    ]  # fmt: skip


def test_an_unknown_mode_names_the_known_ones_and_the_fix():
    with pytest.raises(ValueError, match=r"`fone_head_input` must be one of \['linear', 'slice', 'rotation', "):
        NumberAdapterConfig(encoding="fone", fone_head_input="spiral", fone_numbers="all")
    with pytest.raises(ValueError, match=r"register_head_mode\(name, mode\)"):
        get_head_mode("spiral")


def test_registering_twice_or_over_a_builtin_is_refused(two_layer):
    with pytest.raises(ValueError, match=f"{TWO_LAYER!r} is already registered .*replace=True"):
        register_head_mode(TWO_LAYER, TwoLayerReadout())
    with pytest.raises(ValueError, match="'linear' is a built-in head mode"):
        register_head_mode("linear", TwoLayerReadout(), replace=True)
    with pytest.raises(TypeError, match="HeadMode instance, got Linear"):
        register_head_mode("other", nn.Linear(2, 2))
    with pytest.raises(KeyError, match="'slice' is not a head mode added with register_head_mode"):
        unregister_head_mode("slice")


def test_a_mode_from_outside_trains_through_the_sft_trainer_saves_and_loads(two_layer, store, tmp_path):
    tokenizer = store.tokenizer("digits")
    config = NumberAdapterConfig(**SETTINGS, fone_head_input=TWO_LAYER)
    torch.manual_seed(0)
    model = get_peft_model(store.base("llama", tie=False, hidden=32), config, tokenizer=tokenizer)
    head = model.base_model.number_modules["default"].head
    assert head.mode is two_layer and {"inner.weight", "outer.weight"} <= set(head.state_dict())
    ntok = NumberTokenizer(tokenizer, config)
    before = {k: v.detach().clone() for k, v in head.state_dict().items()}
    trainer = NumberSFTTrainer(model=model, args=sft_args(tmp_path, max_steps=3), train_dataset=arithmetic(12),
                               processing_class=ntok)  # fmt: skip
    result = trainer.train()
    assert math.isfinite(result.training_loss)
    assert all(not torch.equal(before[k], v) for k, v in head.state_dict().items()), "the mode did not train"

    model.eval()
    batch = ntok(["It is 12.5 and 7.", "What is 3 plus 40? It is 43."], padding=True, return_tensors="pt")
    batch.pop("number_texts", None)
    with torch.no_grad():
        want = model(**batch).number_logits
    model.save_pretrained(tmp_path / "adapter")
    ntok.save_pretrained(tmp_path / "adapter")
    loaded = PeftModel.from_pretrained(store.base("llama", tie=False, hidden=32), tmp_path / "adapter").eval()
    with torch.no_grad():
        assert torch.equal(loaded(**batch).number_logits, want)

    unregister_head_mode(TWO_LAYER)  # a saved adapter needs its mode registered first, as an encoding does
    with pytest.raises(ValueError, match=rf"got '{TWO_LAYER}'.*register_head_mode"):
        PeftModel.from_pretrained(store.base("llama", tie=False, hidden=32), tmp_path / "adapter")


def test_the_tokenizer_writes_as_num_the_answers_the_mode_forms(tmp_path):
    tok = toy.build_tokenizer("digits", tmp_path / "tok")
    text, start = "In 2024: 12 + 345 = 357 and 12 ok", len("In 2024: 12 + 345 =")
    settings = dict(encoding="fone", int_digits=4, frac_digits=2, **SUMS_ONLY)
    builtin = NumberTokenizer(tok, NumberAdapterConfig(**settings))
    assert builtin(text, answer_start=start)["number_texts"] == ["357", "12"]  # a sum and a copy
    register_head_mode(COPIES, CopiesOnly())
    try:
        mine = NumberTokenizer(tok, NumberAdapterConfig(**settings, fone_head_input=COPIES))
        assert mine(text, answer_start=start)["number_texts"] == ["12"]  # the copy only: the mode's own `forms`
    finally:
        unregister_head_mode(COPIES)


@pytest.mark.parametrize("task_type, reads", [("CAUSAL_LM", "answers"), ("SEQ_2_SEQ_LM", "all"), (None, "answers")])
def test_auto_writes_answers_only_for_a_mode_that_reads_context(two_layer, task_type, reads):
    """``fone_numbers="auto"`` asks the mode, not its name: an outside mode that reads the numbers before it gets
    answers mode on a causal LM as the built-in context head does; a plain read-out gets every number a [NUM]."""
    register_head_mode(COPIES, CopiesOnly())
    try:
        for name, expected in [(COPIES, reads), ("context", reads), (TWO_LAYER, "all"), ("linear", "all")]:
            config = NumberAdapterConfig(encoding="fone", fone_head_input=name, fone_numbers="auto")
            config.task_type = task_type
            assert fone_numbers_in_effect(config) == expected, name
    finally:
        unregister_head_mode(COPIES)
