"""Generation with the pointer head (``fone_context_pointer=True``): each context number carries the key read at its
own position, in the prompt, at a fed-back [NUM] and at the last token of a number written in digits, so the cached
and uncached decode loops choose the same numbers as the training forward on the whole text."""

from __future__ import annotations

import pytest
import torch
from helpers.adapter_cases import Store
from helpers.answers_cases import SUMS_ONLY, agrees_with_the_training_forward
from helpers.generation_cases import PROMPTS, build, number_writer

from numadapter.generation import generate

POINTER = {**SUMS_ONLY, "fone_context_pointer": True, "fone_context_numbers": 8}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("pointer-generation")))


def point_by_keys(model, scale: float = 30.0) -> None:
    """Makes the pointer's choice depend on each number's key: random weights from the key to the coefficient
    logits, over a slot bias that copies the latest number (+1) and leaves the others out."""
    pointer = model.base_model.number_modules["default"].head.pointer
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        pointer.role.weight.copy_(torch.randn(pointer.role.weight.shape, generator=generator) * scale)
        pointer.slot.copy_(torch.tensor([[-4.0, -4.0, 4.0]] + [[-4.0, 4.0, -4.0]] * (pointer.count - 1)))


@pytest.fixture(scope="module")
def pointer_copier(store):
    return number_writer(store, point_by_keys, False, **POINTER)


@pytest.fixture(scope="module")
def pointer_writer(store):
    return number_writer(store, point_by_keys, True, **POINTER)


@pytest.mark.parametrize("use_cache,sample", [(True, False), (False, False), (True, True)])
def test_pointer_generation_agrees_with_the_training_forward(pointer_copier, pointer_writer, use_cache, sample):
    model, ntok = pointer_writer if sample else pointer_copier
    agrees_with_the_training_forward(model, ntok, use_cache, sample)


def test_the_keys_decide_which_numbers_are_combined(pointer_copier):
    """With the keys' weights zeroed the same prompts give other numbers: the test above checks the keys."""
    model, ntok = pointer_copier
    pointer = model.base_model.number_modules["default"].head.pointer
    out = generate(model, ntok, PROMPTS[:6], max_new_tokens=12, return_dict=True)
    saved = pointer.role.weight.detach().clone()
    try:
        with torch.no_grad():
            pointer.role.weight.zero_()
        plain = generate(model, ntok, PROMPTS[:6], max_new_tokens=12, return_dict=True)
    finally:
        with torch.no_grad():
            pointer.role.weight.copy_(saved)
    assert [c for c in out.combinations if c] != [c for c in plain.combinations if c]


def test_a_cached_forward_says_the_keys_are_missing(pointer_copier):
    """A user's own cached loop through the forward: the keys of the cached numbers are not kept, so the forward
    names the paths that keep them instead of choosing numbers without them."""
    model, ntok = pointer_copier
    enc = ntok("What is 7 + 8 =", return_tensors="pt")
    enc.pop("number_texts", None)
    with torch.no_grad():
        first = model(**enc, use_cache=True)
        step = {"input_ids": torch.tensor([[11]]), "past_key_values": first.past_key_values, "use_cache": True}
        with pytest.raises(ValueError, match=r"fone_context_pointer .*numadapter.generate / model.generate"):
            model(**step)


def test_t5_refuses_the_pointer_with_the_fix(store):
    with pytest.raises(ValueError, match=r"encoder-decoder.*fone_context_pointer=True .*leave fone_context_pointer"):
        build(store, "t5", "fone", fone_context_pointer=True, fone_context_numbers=8)
