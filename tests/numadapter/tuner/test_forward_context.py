"""Every forward path gives the context head (``fone_head_input="context"``) the numbers the full forward gives it:
a cached call continues from the numbers behind its cache (`numadapter.tuner.cache_numbers`), T5 given
``encoder_outputs`` reads the encoder numbers passed beside them, and a call whose earlier numbers cannot be known is
refused with the way out, never answered without them."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from helpers.adapter_cases import Case, Store, build
from transformers.modeling_outputs import BaseModelOutput

from numadapter.schema import NumberInputs

TEXTS = ["a 12 and -30 then 5 plus 7.25 x", "b 4 - 9 ="]  # right padded; every row has numbers early and late
TARGETS = ["It is 19.5 or 7 and 3", "Say 42"]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(tmp_path_factory.mktemp("forward-context"))


def fone(store: Store, family: str, **overrides):
    model, ntok, config = build(store, Case(family, "fone", tie=True), init_lora_weights=False, **overrides)
    assert config.fone_head_input == overrides.get("fone_head_input", "context")
    return model.eval(), ntok


def encode(ntok, texts, **kwargs) -> dict:
    enc = ntok(texts, return_tensors="pt", padding=True, **kwargs)
    return {k: v for k, v in enc.items() if k != "number_texts"}


def cut(batch: dict, start: int, stop: int) -> dict:
    """The ids and number tensors of positions ``[start, stop)`` (no attention mask: a cached call gets it whole)."""
    return {k: v[:, start:stop] for k, v in batch.items() if k != "attention_mask"}


@pytest.mark.parametrize("family", ["llama", "granite"])
def test_cached_forward_gives_the_full_forward_number_logits(store, family):
    """The prompt in three pieces (the second and third behind a cache holding numbers) reads every position as the
    whole prompt does; before numadapter kept the cache's numbers, the later pieces saw only their own."""
    model, ntok = fone(store, family)
    batch = encode(ntok, TEXTS[:1])
    length = batch["input_ids"].shape[1]
    first, second = length // 3, 2 * length // 3
    assert batch["num_mask"][0, :first].sum() >= 1 and batch["num_mask"][0, first:second].sum() >= 1
    with torch.no_grad():
        full = model(**batch)
        out = model(**cut(batch, 0, first), use_cache=True)
        pieces = [out]
        for start, stop in ((first, second), (second, length)):
            out = model(**cut(batch, start, stop), past_key_values=out.past_key_values, use_cache=True)
            pieces.append(out)
    for name in ("logits", "number_logits", "number_sign_logits"):
        got = torch.cat([getattr(piece, name) for piece in pieces], 1)
        torch.testing.assert_close(got, getattr(full, name), rtol=0, atol=1e-5, msg=name)


def test_cached_steps_of_a_left_padded_batch_match_the_full_forward(store):
    """One token per step, as a custom decode loop feeds them, on two left-padded rows."""
    model, ntok = fone(store, "llama")
    ntok.tokenizer.padding_side = "left"
    batch = encode(ntok, TEXTS)
    mask = batch["attention_mask"]
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    length, start = batch["input_ids"].shape[1], batch["input_ids"].shape[1] - 4
    with torch.no_grad():
        full = model(**batch, position_ids=positions)
        out = model(
            **cut(batch, 0, start), attention_mask=mask[:, :start], position_ids=positions[:, :start], use_cache=True
        )
        for t in range(start, length):
            out = model(
                **cut(batch, t, t + 1), attention_mask=mask[:, : t + 1], position_ids=positions[:, t : t + 1],
                past_key_values=out.past_key_values,
            )  # fmt: skip
            torch.testing.assert_close(out.number_logits[:, 0], full.number_logits[:, t], rtol=0, atol=1e-5)


def lean_prefix(model, batch: dict, stop: int):
    """The cache of positions ``[0, stop)`` filled as the decode loop's cached steps fill it: the transformers model
    with the number hooks (`NumberRuntime`), not the public forward."""
    runtime = model.base_model.number_runtime()
    mask = batch["num_mask"][:, :stop]
    side = NumberInputs(mask, batch["num_digits"][:, :stop], batch["num_sign"][:, :stop], None, bool(mask.any()))
    with runtime.hooks(capture_hidden=False), runtime.step({"input": side}, current="input"):
        return runtime.inner(input_ids=batch["input_ids"][:, :stop], use_cache=True).past_key_values


def test_a_cache_whose_numbers_are_unknown_is_refused(store):
    model, ntok = fone(store, "llama")
    batch = encode(ntok, TEXTS[:1])
    step = cut(batch, 6, 7)
    fix = r"numadapter\.generate\(model, ntok, prompts\) / model\.generate"
    with torch.no_grad():
        with pytest.raises(ValueError, match=rf"hold 6 earlier tokens whose numbers are unknown \(it was not .*{fix}"):
            model(**step, past_key_values=lean_prefix(model, batch, 6))
        prefix = model(**cut(batch, 0, 7), use_cache=True)
        prefix.past_key_values.crop(-1)
        with pytest.raises(ValueError, match=rf"returned it with 7 tokens: it was filled or cropped elsewhere.*{fix}"):
            model(**step, past_key_values=prefix.past_key_values)
        prefix = model(**cut(batch, 0, 6), use_cache=True)
        with pytest.raises(ValueError, match=r"recorded for 1 rows and K=4, this call has 2 and K=4"):
            model(**{k: v.expand(2, *v.shape[1:]) for k, v in step.items()}, past_key_values=prefix.past_key_values)
        with pytest.raises(ValueError, match=r"`past_key_values` is a tuple, not a transformers Cache"):
            model(**step, past_key_values=((torch.zeros(1),),))


def test_a_head_without_context_takes_a_cache_filled_elsewhere(store):
    """Only the context head needs the earlier numbers: the linear read-out continues a cache the forward did not
    fill."""
    model, ntok = fone(store, "llama", fone_head_input="linear")
    batch = encode(ntok, TEXTS[:1])
    with torch.no_grad():
        full = model(**batch)
        step = model(**cut(batch, 6, 7), past_key_values=lean_prefix(model, batch, 6))
    torch.testing.assert_close(step.number_logits[:, 0], full.number_logits[:, 6], rtol=0, atol=1e-5)


def t5_inputs(ntok):
    encoder = encode(ntok, TEXTS)
    target = encode(ntok, TARGETS)
    decoder = {"decoder_input_ids": target["input_ids"]}
    decoder.update({f"decoder_{k}": v for k, v in target.items() if k.startswith("num_")})
    return encoder, decoder


def test_t5_with_encoder_outputs_reads_the_encoder_numbers_passed_beside_them(store):
    model, ntok = fone(store, "t5")
    encoder, decoder = t5_inputs(ntok)
    numbers = {k: v for k, v in encoder.items() if k.startswith("num_")}
    with torch.no_grad():
        full = model(**encoder, **decoder)
        outputs = BaseModelOutput(last_hidden_state=full.encoder_last_hidden_state)
        mask = encoder["attention_mask"]
        alone = model(encoder_outputs=outputs, attention_mask=mask, **numbers, **decoder)
        with_ids = model(encoder_outputs=outputs, input_ids=encoder["input_ids"], attention_mask=mask, **numbers,
                         **decoder)  # fmt: skip
        with pytest.raises(
            ValueError, match=r"called with `encoder_outputs` and without the encoder's number tensors"
        ):
            model(encoder_outputs=outputs, attention_mask=mask, **decoder)
        with pytest.raises(ValueError, match=r"`num_mask` has shape \(2, 5\) but `encoder_outputs` hold \(2, \d+\)"):
            model(encoder_outputs=outputs, attention_mask=mask, **{k: v[:, :5] for k, v in numbers.items()}, **decoder)
    for got in (alone, with_ids):
        torch.testing.assert_close(got.logits, full.logits, rtol=0, atol=1e-5)
        torch.testing.assert_close(got.number_logits, full.number_logits, rtol=0, atol=1e-5)


def test_t5_cached_decoder_steps_match_the_full_forward(store):
    """The decoder step by step behind its cache, given ``encoder_outputs`` only: the cache carries the encoder's and
    the earlier decoder numbers."""
    model, ntok = fone(store, "t5")
    encoder, decoder = t5_inputs(ntok)
    length = decoder["decoder_input_ids"].shape[1]
    with torch.no_grad():
        full = model(**encoder, **decoder)
        out = model(**encoder, **{k: v[:, :1] for k, v in decoder.items()}, use_cache=True)
        outputs = BaseModelOutput(last_hidden_state=out.encoder_last_hidden_state)
        for t in range(1, length):
            out = model(
                encoder_outputs=outputs, attention_mask=encoder["attention_mask"], past_key_values=out.past_key_values,
                **{k: v[:, t : t + 1] for k, v in decoder.items()},
            )  # fmt: skip
            torch.testing.assert_close(out.number_logits[:, 0], full.number_logits[:, t], rtol=0, atol=1e-5)


def test_a_copied_or_pickled_model_starts_without_records(store):
    """The records follow live caches of one model object: a copy refuses the original's cache (it did not fill
    it), works on its own, and the model still pickles."""
    model, ntok = fone(store, "llama")
    batch = encode(ntok, TEXTS[:1])
    with torch.no_grad():
        full = model(**batch)
        prefix = model(**cut(batch, 0, 6), use_cache=True)
        for twin in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
            with pytest.raises(ValueError, match=r"it was not returned by this model's forward"):
                twin(**cut(batch, 6, 7), past_key_values=copy.deepcopy(prefix.past_key_values))
            own = twin(**cut(batch, 0, 6), use_cache=True)
            step = twin(**cut(batch, 6, 7), past_key_values=own.past_key_values)
            torch.testing.assert_close(step.number_logits[:, 0], full.number_logits[:, 6], rtol=0, atol=1e-5)
