"""xVal's head over the numbers before it (``xval_context_numbers = K``): ``z = mlp(h) + sum_k w_k(h) z_k``.

A head wired by hand (the MLP silent, slot weights fixed) must write exactly the combination of the numbers before
it, in `numadapter.generate` with and without the cache, in transformers' ``model.generate``, in teacher forcing, and
after ``save_pretrained`` / ``PeftModel.from_pretrained``; a fresh head writes its read-out plus the latest number;
where no number comes before, the LM writes the number."""

from __future__ import annotations

import pytest
import torch
from helpers.adapter_cases import Store
from helpers.generation_cases import PROMPTS, build, encourage_numbers

from numadapter.config import NumberAdapterConfig
from numadapter.generation import generate
from numadapter.generation.hf import numbers_of
from numadapter.methods.context import ContextNumbers
from numadapter.methods.xval import RegressionHead
from numadapter.methods.xval.head import fit_start

FOUR = [PROMPTS[0], PROMPTS[3], PROMPTS[7], PROMPTS[2]]  # each with numbers: 12.5 | 3, 2.25 | 4.5, 0.05 | 7, 8


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("xval_context")))


def doubling(store, family: str = "llama", **overrides):
    """A random xVal adapter whose head writes twice the latest number before it (MLP output 0, w = (2, 0))."""
    store.base_path(family, False)
    torch.manual_seed(0)
    model, ntok = build(store, family, "xval", torch.float64, xval_scale=2000.0, xval_context_numbers=2, **overrides)
    encourage_numbers(model, ntok, prompts=FOUR)
    head = model.base_model.number_modules["default"].head
    with torch.no_grad():
        head.fc2.weight.zero_()
        head.fc2.bias.zero_()
        head.weights.bias.copy_(torch.tensor([2.0, 0.0]))
    return model, ntok


def latest_numbers(prompt: str) -> float:
    return float([w for w in prompt.replace(",", " ").replace(";", " ").split() if w[0].isdigit()][-1])


def test_config_limits_name_the_field():
    for bad in (-1, 17, 2.0, True):
        with pytest.raises(ValueError, match=r"`xval_context_numbers` must be an integer in \[0, 16\]"):
            NumberAdapterConfig(encoding="xval", xval_context_numbers=bad)


def test_a_fresh_head_adds_the_latest_number_and_reads_signed_exact_values():
    config = NumberAdapterConfig(encoding="xval", int_digits=4, frac_digits=2, xval_scale=10.0, xval_center=1.0,
                                 xval_context_numbers=2)  # fmt: skip
    head = RegressionHead(8, config)
    hidden = torch.randn(3, 8)
    digits = torch.tensor([[[0, 0, 1, 2, 5, 0], [9, 9, 9, 9, 9, 9]]] * 3)  # 12.5 and 9999.99
    context = ContextNumbers(digits, torch.tensor([[1, -1]] * 3), torch.tensor([[True, True], [True, False]] * 1
                                                                               + [[False, False]]))  # fmt: skip
    want = torch.tensor([[1.15, (-9999.99 - 1) / 10], [1.15, 0.0], [0.0, 0.0]])
    assert torch.allclose(head.context_values(context), want)
    # a fresh head: the paper's read-out plus the latest number (weights 1, 0)
    assert torch.allclose(head(hidden, context), head(hidden) + torch.tensor([1.15, 1.15, 0.0]), atol=1e-6)
    with torch.no_grad():
        head.weights.bias.copy_(torch.tensor([3.0, 0.5]))
    want = head(hidden) + torch.tensor([3 * 1.15 + 0.5 * (-9999.99 - 1) / 10, 3 * 1.15, 0.0])
    assert torch.allclose(head(hidden, context), want, atol=1e-4)


def test_the_least_squares_start_recovers_a_conversion_and_an_affine_scale():
    miles = [[m / 300] for m in range(5, 800, 7)]  # one number before each answer, normalised
    offset, weights = fit_start(miles, [1.609344 * row[0] for row in miles], 4)
    assert offset == pytest.approx(0.0, abs=1e-5) and weights[0] == pytest.approx(1.609344, rel=1e-5)
    assert weights[1:] == [0.0, 0.0, 0.0]  # empty slots: the ridge keeps them at zero
    fahrenheit = [[f / 200, 3.0] for f in range(33, 1000, 11)]  # a constant second slot must not take the offset
    offset, weights = fit_start(fahrenheit, [(row[0] * 200 - 32) * 5 / 9 / 200 for row in fahrenheit], 2)
    assert weights[0] == pytest.approx(5 / 9, rel=1e-5)
    assert offset + 3.0 * weights[1] == pytest.approx(-32 * 5 / 9 / 200, abs=1e-5)
    with pytest.raises(ValueError, match=r"at least K \+ 1 = 5 answers with a number before them, got 2"):
        fit_start([[1.0], [2.0]], [1.0, 2.0], 4)


def test_start_at_makes_the_head_write_the_combination_whatever_the_hidden_state():
    config = NumberAdapterConfig(encoding="xval", int_digits=4, frac_digits=2, xval_scale=10.0, xval_context_numbers=2)
    head = RegressionHead(8, config)
    head.start_at(-0.25, [1.5, 0.5])
    digits = torch.tensor([[[0, 0, 1, 2, 5, 0], [0, 0, 0, 4, 0, 0]]] * 3)  # 12.5 and 4
    context = ContextNumbers(digits, torch.ones(3, 2, dtype=torch.long), torch.ones(3, 2, dtype=torch.bool))
    want = torch.full((3,), -0.25 + 1.5 * 1.25 + 0.5 * 0.4)
    assert torch.allclose(head(torch.randn(3, 8) * 10, context), want, atol=1e-6)
    with pytest.raises(ValueError, match=r"one weight per context slot \(xval_context_numbers=2\), got 3"):
        head.start_at(0.0, [1.0, 0.0, 0.0])


@pytest.mark.parametrize("use_cache", [True, False])
def test_generation_writes_the_combination_and_feeds_it_back(store, use_cache):
    model, ntok = doubling(store)
    out = generate(model, ntok, FOUR, max_new_tokens=8, return_dict=True, use_cache=use_cache)
    assert any(len(numbers) >= 2 for numbers in out.numbers)  # a generated number was read back by the next
    for prompt, numbers in zip(FOUR, out.numbers):
        latest = latest_numbers(prompt)
        for number in numbers:
            assert number == pytest.approx(2 * latest, rel=1e-6)  # the head computes in float32
            latest = round(number, 2)  # it joins the context as its text reads
    cached = generate(model, ntok, FOUR, max_new_tokens=8, return_dict=True)
    assert out.token_ids == cached.token_ids


def test_transformers_generate_and_teacher_forcing_agree(store):
    model, ntok = doubling(store)
    ref = generate(model, ntok, FOUR, max_new_tokens=8, return_dict=True)
    batch = ntok(FOUR, return_tensors="pt", padding=True)
    out = model.generate(**batch, max_new_tokens=8)
    assert numbers_of(out).numbers == ref.numbers
    marker = ntok.num_token_id
    row = max(range(len(FOUR)), key=lambda r: len(ref.numbers[r]))
    text = FOUR[row] + ref.completions[row]
    enc = ntok(text, return_tensors="pt")
    with torch.no_grad():
        forced = model(**{k: v for k, v in enc.items() if k != "number_texts"})
    ids = enc["input_ids"][0].tolist()
    at = [t - 1 for t, i in enumerate(ids) if i == marker and t >= len(ntok(FOUR[row])["input_ids"])]
    assert at and forced.number_values[0, at].tolist() == pytest.approx(ref.numbers[row], rel=1e-6)


def test_saved_and_loaded_adapter_keeps_the_weights(store, tmp_path):
    from peft import PeftModel

    model, ntok = doubling(store)
    ref = generate(model, ntok, FOUR, max_new_tokens=6, return_dict=True)
    model.save_pretrained(tmp_path / "adapter")
    loaded = PeftModel.from_pretrained(store.base("llama", False).to(torch.float64), tmp_path / "adapter").eval()
    assert loaded.peft_config["default"].xval_context_numbers == 2
    again = generate(loaded, ntok, FOUR, max_new_tokens=6, return_dict=True)
    assert again.numbers == ref.numbers and again.token_ids == ref.token_ids


@pytest.mark.parametrize("use_cache", [True, False])
def test_with_no_number_before_it_the_lm_writes_the_number(store, use_cache):
    """Where no number comes before, the head has nothing to weigh: [NUM] is never written there, the LM's own
    tokens are (facts the base knew stay its own), while the prompts with numbers still get the head's [NUM]."""
    model, ntok = doubling(store)
    blank = ["hi", "x", "Paris is nice and"]
    marker = ntok.num_token_id
    out = generate(model, ntok, blank + FOUR[:2], max_new_tokens=6, return_dict=True, use_cache=use_cache)
    for row in range(len(blank)):
        assert marker not in out.token_ids[row] and out.numbers[row] == []
    assert any(marker in ids for ids in out.token_ids[len(blank) :])
    first = model(**{k: v for k, v in ntok(["hi"], return_tensors="pt").items() if k != "number_texts"})
    assert first.logits[0, -1].argmax().item() == marker  # the LM alone would have written [NUM] there
    assert out.token_ids[0][0] == first.logits[0, -1].topk(2).indices[1].item()  # its next choice instead


def test_an_adapter_saved_before_the_field_loads_as_the_papers_head(store, tmp_path):
    """An xVal adapter saved before ``xval_context_numbers`` / ``xval_fit`` existed has neither in its config: it
    loads as trained (the paper's head, no fit), not with today's defaults, whose head has other parameters."""
    import json

    from peft import PeftModel

    store.base_path("llama", False)
    model, ntok = build(store, "llama", "xval", torch.float64, xval_scale=2000.0)  # the helper's paper head (K=0)
    model.save_pretrained(tmp_path / "old")
    path = tmp_path / "old" / "adapter_config.json"
    saved = json.loads(path.read_text())
    assert saved.pop("xval_context_numbers") == 0 and saved.pop("xval_fit") == "absmax"
    path.write_text(json.dumps(saved))
    loaded = PeftModel.from_pretrained(store.base("llama", False).to(torch.float64), tmp_path / "old")
    config = loaded.peft_config["default"]
    assert config.xval_context_numbers == 0 and config.xval_fit is None
    assert loaded.base_model.number_modules["default"].head.weights is None
