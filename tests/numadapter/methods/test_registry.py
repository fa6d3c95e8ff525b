"""The number-method registry and interface, from outside the package: a toy encoding registered here trains.

The toy method "signed_digits" is not part of numadapter: each number becomes one [NUM] whose embedding gets a
linear map of its place digits and sign added, and a one-output linear head regresses the value scaled by
10^-int_digits; generation reads the value back rounded to ``frac_digits`` places. If adding it needed any change
inside numadapter, this file and `tests/helpers/toy_method.py`, where the method is defined, could not exist.
`tests/numadapter/methods/test_outside_method.py` takes the same method through saving, loading, generation, export
and recipes.
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers.adapter_cases import Store
from helpers.toy_method import TOY, SignedDigitsEmbedding, SignedDigitsHead, SignedDigitsMethod
from helpers.training_cases import arithmetic, sft_args

from numadapter.config import NumberAdapterConfig
from numadapter.mapping import get_peft_model
from numadapter.methods import (
    get_method,
    known_methods,
    register_method,
    unregister_method,
)
from numadapter.tokenization import NumberTokenizer
from numadapter.training.sft import NumberSFTTrainer
from numadapter.tuner.inputs import needed_fields


@pytest.fixture
def toy():
    method = register_method(TOY, SignedDigitsMethod())
    yield method
    unregister_method(TOY)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("methods")))


def test_the_builtin_methods_are_registered():
    assert known_methods()[:3] == ("fone", "xval", "digits")
    assert [type(get_method(name)).__name__ for name in ("fone", "xval", "digits")] == [
        "FoNEMethod",
        "XValMethod",
        "DigitsMethod",
    ]
    assert get_method(NumberAdapterConfig(encoding="xval")) is get_method("xval")


def test_a_registered_method_is_a_valid_encoding(toy):
    assert TOY in known_methods() and get_method(TOY) is toy and toy.name == TOY
    config = NumberAdapterConfig(encoding=TOY, int_digits=4, frac_digits=2)
    assert needed_fields(config) == ("digits", "sign", "values")


def test_unknown_encodings_name_the_known_ones_and_the_fix():
    with pytest.raises(ValueError, match=r"`encoding` must be one of \['fone', 'xval', 'digits'\], got 'words'"):
        NumberAdapterConfig(encoding="words")
    with pytest.raises(ValueError, match=r"register_method\(name, method\)"):
        get_method("words")


def test_registering_twice_or_over_a_builtin_is_refused(toy):
    with pytest.raises(ValueError, match=f"{TOY!r} is already registered .*replace=True"):
        register_method(TOY, SignedDigitsMethod())
    other = SignedDigitsMethod()
    assert register_method(TOY, other, replace=True) is other and get_method(TOY) is other
    with pytest.raises(ValueError, match="'fone' is a built-in encoding"):
        register_method("fone", SignedDigitsMethod(), replace=True)
    with pytest.raises(TypeError, match="NumberMethod instance, got SignedDigitsEmbedding"):
        register_method("other", SignedDigitsEmbedding(2, 4))
    with pytest.raises(ValueError, match="non-empty string"):
        register_method("", SignedDigitsMethod())
    with pytest.raises(KeyError, match="'digits' is not an encoding added with register_method"):
        unregister_method("digits")


def test_a_toy_method_from_outside_trains_one_step(toy, store, tmp_path):
    tokenizer = store.tokenizer("digits")
    base = store.base("llama", tie=False, hidden=32)
    config = NumberAdapterConfig(
        encoding=TOY, int_digits=4, frac_digits=2, r=4, lora_alpha=8, lora_dropout=0.0,
        target_modules=["q_proj", "v_proj"],
    )  # fmt: skip
    torch.manual_seed(0)
    model = get_peft_model(base, config, tokenizer=tokenizer)
    modules = model.base_model.number_modules["default"]
    assert isinstance(modules.embedding, SignedDigitsEmbedding) and isinstance(modules.head, SignedDigitsHead)
    ntok = NumberTokenizer(tokenizer, config)
    assert ntok.num_token_id == config.num_token_id is not None

    # the model's own loss: the toy head loss is a component and both toy modules receive a gradient
    batch = ntok(["It is -12.5 and 7.", "Add 3 to 40."], padding=True, return_tensors="pt")
    batch.pop("number_texts", None)
    out = model(**batch, labels=batch["input_ids"].clone())
    assert torch.isfinite(out.loss) and out.number_loss > 0
    out.loss.backward()
    for name, module in (("embedding", modules.embedding), ("head", modules.head)):
        grads = [p.grad for p in module.parameters()]
        assert all(g is not None and g.abs().sum() > 0 for g in grads), f"the toy {name} got no gradient"
    model.zero_grad()

    # one NumberSFTTrainer step moves the toy modules
    before = {k: v.detach().clone() for k, v in modules.state_dict().items() if v.is_floating_point()}
    trainer = NumberSFTTrainer(model=model, args=sft_args(tmp_path, max_steps=1), train_dataset=arithmetic(4),
                               processing_class=ntok)  # fmt: skip
    result = trainer.train()
    assert math.isfinite(result.training_loss)
    after = modules.state_dict()
    assert all(not torch.equal(before[k], after[k]) for k in before), "a toy module did not change in one step"
