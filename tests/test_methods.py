"""The number-method registry and interface, from outside the package: a toy encoding registered here trains.

The toy method "signed_digits" is not part of numadapter: each number becomes one [NUM] whose embedding gets a
linear map of its place digits and sign added, and a one-output linear head regresses the value scaled by
10^-int_digits; generation reads the value back rounded to ``frac_digits`` places. If adding it needed any change
inside numadapter, this file could not exist. `tests/test_outside_method.py` takes the same method through saving,
loading, generation, export and recipes.
"""

from __future__ import annotations

import math

import pytest
import torch
from adapter_cases import Store
from test_trainer import arithmetic, sft_args
from torch import nn

from numadapter.config import NumberAdapterConfig
from numadapter.mapping import get_peft_model
from numadapter.methods import (
    HeadReading,
    LossInputs,
    NumberMethod,
    get_method,
    known_methods,
    register_method,
    unregister_method,
)
from numadapter.tokenization import NumberTokenizer
from numadapter.training.sft import NumberSFTTrainer
from numadapter.wire import needed_fields

TOY = "signed_digits"


class SignedDigitsEmbedding(nn.Module):
    """Adds ``W [digits / 9, sign]`` to the [NUM] rows: ``[B, T, H]`` in, ``[B, T, H]`` out."""

    def __init__(self, places: int, hidden: int) -> None:
        super().__init__()
        self.proj = nn.Linear(places + 1, hidden, bias=False)

    def forward(self, embeds, num_mask, num_digits, num_sign=None, num_values=None):
        features = torch.cat([num_digits.float() / 9.0, num_sign.float().unsqueeze(-1)], dim=-1)  # (B, T, P + 1)
        mixed = (embeds.float() + self.proj(features)).to(embeds.dtype)
        return torch.where(num_mask.bool().unsqueeze(-1), mixed, embeds)


class SignedDigitsHead(nn.Module):
    """One linear output: hidden ``[..., H]`` -> the value scaled by ``10^-int_digits``, ``[..., 1]``."""

    def __init__(self, hidden: int, int_digits: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden, 1)
        self.scale = 10.0**int_digits  # a plain number, not a weight: it comes from the config

    def forward(self, hidden):
        return self.linear(hidden)


def place_digits(magnitude: float, int_digits: int, frac_digits: int) -> list[int]:
    """The ``int_digits + frac_digits`` place digits of ``|x| < 10^int_digits``, most significant first."""
    units = round(abs(magnitude) * 10**frac_digits)
    return [int(d) for d in str(units).zfill(int_digits + frac_digits)[-(int_digits + frac_digits) :]]


class SignedDigitsMethod(NumberMethod):
    """The toy method: digits and sign in, the scaled value out (squared error), read back to frac_digits places."""

    def fields(self, config):
        return ("digits", "sign", "values")

    def build_modules(self, config, hidden_size, model_config):
        return SignedDigitsEmbedding(config.num_places, hidden_size), SignedDigitsHead(hidden_size, config.int_digits)

    def head_outputs(self, head, hidden):
        return head(hidden.float()).squeeze(-1)  # (...) scaled values

    def report(self, head, outputs):
        return {"number_values": outputs.double() * head.scale}  # (...) values

    def predict(self, config, head, outputs):
        limit = 10.0**config.int_digits - 10.0**-config.frac_digits
        values = torch.cat([out[:, -1] for out in outputs]).double() * head.scale  # (N,)
        values = (values * 10**config.frac_digits).round().div(10**config.frac_digits).clamp(-limit, limit)
        digits = torch.tensor(
            [place_digits(v, config.int_digits, config.frac_digits) for v in values.tolist()],
            dtype=torch.long,
            device=values.device,
        ).view(len(values), config.num_places)  # (N, P)
        return HeadReading(digits=digits, sign=torch.where(values < 0, -1, 1), values=values)

    def read_numbers(self, config, head, digits, signs, values):
        from numadapter.generation.readout import GeneratedNumber

        out = []
        for row, sign in zip(digits, signs):
            whole = "".join(map(str, row[: config.int_digits])).lstrip("0") or "0"
            frac = "".join(map(str, row[config.int_digits :])).rstrip("0")
            text = ("-" if sign < 0 else "") + whole + ("." + frac if frac else "")
            out.append(GeneratedNumber(value=float(text), text=text))
        return out

    def head_loss(self, inputs: LossInputs):
        b, t = inputs.plan.target_index
        target = inputs.plan.targets.values[b, t].float() / 10.0**inputs.config.int_digits  # (N,)
        return (inputs.outputs - target).pow(2).sum() / inputs.denom


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
