"""numadapter.generation.generate: cached == uncached, batch == single, HF parity, hand-wired copying, stopping.

Models are the tiny random Llama / Granite / T5 of `tests/helpers/tiny.py` with a number adapter whose LoRA is random
(so the adapter path is exercised), built by `tests/helpers/generation_cases.py`; its `encourage_numbers` makes the
random models emit [NUM].

Float precision: token ids and FoNE digits (argmaxes) are compared in float32. xVal values are floats: in float32
the cached and uncached paths differ in the last bits after the first fed-back number (attention over a cache vs
over the whole sequence rounds differently), so bit-identity of xVal values is checked in float64 and float32 is
checked to 1e-5 relative.
"""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
import torch
from helpers.adapter_cases import Store
from helpers.generation_cases import PROMPTS, build, encourage_numbers, fed_back, output_rows
from peft import LoraModel

from numadapter.config import NumberAdapterConfig
from numadapter.generation import generate
from numadapter.generation.prompts import encode_prompts, position_ids
from numadapter.numbers import ExactNumber, NumberOutOfRangeError, find_numbers
from numadapter.tokenization import NumberTokenizer
from numadapter.tuner.patches import base_weight
from numadapter.tuner.side_buffer import NumberInputs

PLAIN = ["Hello there, how are you today?", "No numbers in this one either.", "hi", "Alice and Bob went to Paris"]
FAMILIES = ["llama", "granite", "t5"]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("generation")))


# -- cached == uncached, batch == single, parity with transformers ---------------------------------------------------
CACHE_CASES = [(f, e, torch.float32) for f in FAMILIES for e in ("fone", "xval", "digits")]
CACHE_CASES += [(f, "xval", torch.float64) for f in ("llama", "t5")]


def case_ids(cases) -> list[str]:
    return [f"{f}-{e}-{str(d)[6:]}" for f, e, d in cases]


@pytest.mark.parametrize("family,encoding,dtype", CACHE_CASES, ids=case_ids(CACHE_CASES))
def test_cached_matches_uncached(store, family, encoding, dtype):
    model, ntok = build(store, family, encoding, dtype)
    if encoding != "digits":
        encourage_numbers(model, ntok)
    cached = generate(model, ntok, PROMPTS[:6], max_new_tokens=8, return_dict=True)
    uncached = generate(model, ntok, PROMPTS[:6], max_new_tokens=8, return_dict=True, use_cache=False)
    assert cached.token_ids == uncached.token_ids
    assert cached.texts == uncached.texts
    if encoding != "digits":
        assert fed_back(cached, ntok.num_token_id) >= 2  # the number path was exercised
    if encoding == "xval" and dtype == torch.float32:
        # float32: the cached path sums attention in another order, so the head's output moves by a few ulp of its
        # O(1) inputs (seen: 1.7e-7 on a value of 0.008, where abs 1e-7 failed). abs 1e-6 is ~8 ulp at 1; the
        # float64 cases check exact equality instead.
        for mine, theirs in zip(cached.numbers, uncached.numbers):
            assert mine == pytest.approx(theirs, rel=1e-5, abs=1e-6)
    else:
        assert cached.numbers == uncached.numbers


BATCH_CASES = [("llama", "fone", torch.float32), ("llama", "digits", torch.float32), ("t5", "fone", torch.float32)]
BATCH_CASES += [("granite", "xval", torch.float64), ("t5", "xval", torch.float64)]


@pytest.mark.parametrize("family,encoding,dtype", BATCH_CASES, ids=case_ids(BATCH_CASES))
def test_batch_of_eight_matches_batch_of_one(store, family, encoding, dtype):
    model, ntok = build(store, family, encoding, dtype)
    if encoding != "digits":
        encourage_numbers(model, ntok)
    batch = generate(model, ntok, PROMPTS, max_new_tokens=10, return_dict=True)
    assert len({len(ntok(p)["input_ids"]) for p in PROMPTS}) > 1  # the batch really is padded
    if encoding != "digits":
        assert fed_back(batch, ntok.num_token_id) >= 2
    for row, prompt in enumerate(PROMPTS):
        single = generate(model, ntok, [prompt], max_new_tokens=10, return_dict=True)
        assert single.token_ids[0] == batch.token_ids[row]
        assert single.texts[0] == batch.texts[row]
        assert single.numbers[0] == batch.numbers[row]


@pytest.mark.parametrize("family", FAMILIES)
def test_matches_transformers_generate_on_text_without_numbers(store, family):
    """Greedy and seeded sampling give exactly the ids of model.generate (its own loop, the same LoRA weights)."""
    model, ntok = build(store, family, "fone")
    side = "right" if family == "t5" else "left"
    enc = ntok.tokenizer(PLAIN, padding=True, padding_side=side, return_tensors="pt")
    start = 1 if family == "t5" else enc["input_ids"].shape[1]
    settings = [dict(do_sample=False), dict(do_sample=True, temperature=0.8, top_k=20, top_p=0.9)]
    for kwargs in settings:
        torch.manual_seed(123)
        mine = generate(model, ntok, PLAIN, max_new_tokens=8, min_new_tokens=8, return_dict=True, **kwargs)
        torch.manual_seed(123)
        with torch.no_grad():  # transformers' own loop on the LoRA-injected model (text without numbers)
            theirs = model.get_base_model().generate(**enc, max_new_tokens=8, min_new_tokens=8, **kwargs)
        assert mine.token_ids == theirs[:, start:].tolist()
        torch.manual_seed(123)
        routed = model.generate(**enc, max_new_tokens=8, min_new_tokens=8, **kwargs)  # numadapter's loop
        assert torch.equal(routed, theirs)


def test_prompts_are_padded_with_their_number_tensors(store):
    """Left padding (causal) / right padding (T5) moves ids, mask and every side tensor together, exactly as the
    NumberTokenizer's own padding does; positions count real tokens only."""
    _, ntok = build(store, "llama", "fone")
    prompts = ["pay 12.5 and 3", "x", "-7 then 0.25"]
    for side in ("left", "right"):
        batch = encode_prompts(ntok, prompts, ntok.tokenizer.pad_token_id, side, torch.device("cpu"))
        want = ntok(prompts, padding=True, padding_side=side, return_tensors="pt")
        assert torch.equal(batch.input_ids, want["input_ids"])
        assert torch.equal(batch.attention_mask, want["attention_mask"])
        for key in ("num_mask", "num_digits", "num_sign", "num_values"):
            assert torch.equal(batch.numbers[key], want[key]), key
        assert batch.number_texts == [["12.5", "3"], [], ["-7", "0.25"]]  # sign_policy="feature"
        assert batch.has_padding
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1], [0, 1, 1, 1]])
    assert position_ids(mask).tolist() == [[0, 0, 0, 1], [0, 1, 2, 3], [0, 0, 1, 2]]


# -- hand-wired models: the number really travels prompt -> features -> head -> fed back ---------------------------
def rotation_head(head: torch.nn.Module, places: int, digit_shift: int) -> None:
    """A FoNE digit head reading feature pair q (hidden dims 2q, 2q+1) rotated so its argmax is digit + shift.

    Feature pair q has angle 2*pi*(d + f)/10 (d: the digit of place q, f in [0, 1): the lower digits as a
    fraction, a multiple of 10^-q). Rotating by -2*pi*(0.5 - 0.5*10^-q)/10 puts d + f into the middle of digit d's
    sector (margin 0.5*10^-q either side); another 2*pi*shift/10 adds `shift` to every digit (mod 10, no carry).
    """
    weight = torch.zeros_like(head.proj.weight)  # (2P, H)
    for q in range(places):
        angle = -2 * math.pi * (0.5 - 0.5 * 10.0**-q) / 10 + 2 * math.pi * digit_shift / 10
        cos, sin = math.cos(angle), math.sin(angle)
        weight[2 * q : 2 * q + 2, 2 * q : 2 * q + 2] = torch.tensor([[cos, -sin], [sin, cos]])
    with torch.no_grad():
        head.proj.weight.copy_(weight)
        head.proj.bias.zero_()


def wire_llama(model, ntok, eq_token: int, mode: str) -> None:
    """Llama whose hidden state carries the FoNE features of the prompt number (see the two modes).

    Dims 0..11 hold the features (``fone_projection="pad"``), dim 12 makes the LM head emit [NUM], dim 13 eos.
    ``"copy"``: uniform attention (q = 0) in layer 0 copies the features of the prompt's [NUM] to the "=" position,
    whose embedding has dim 12 set; the generated [NUM] has dim 13 set, so eos follows. ``"chain"``: no attention;
    every [NUM] input has dim 12 set, so [NUM] follows [NUM], and the head adds 1 to every digit: the only place a
    generated [NUM]'s number can come from is its own fed-back features.
    """
    inner = model.base_model.model
    config = model.peft_config["default"]
    with torch.no_grad():
        embed = base_weight(inner.get_input_embeddings())
        embed[:, :14] = 0
        num_row = inner.get_input_embeddings().token_adapter.trainable_tokens_delta["default"][0]
        num_row[:14] = 0
        if mode == "copy":
            embed[eq_token, 12] = 5.0
            num_row[13] = 5.0
        else:
            num_row[12] = 5.0
        for i, layer in enumerate(inner.model.layers):
            base_weight(layer.self_attn.q_proj).zero_()
            base_weight(layer.self_attn.o_proj).zero_()
            base_weight(layer.mlp.down_proj).zero_()
            if i == 0 and mode == "copy":
                value = base_weight(layer.self_attn.v_proj)
                value.zero_()
                value[:12, :12] = torch.eye(12)
                base_weight(layer.self_attn.o_proj)[:12, :12] = torch.eye(12)
        lm_head = base_weight(inner.get_output_embeddings())
        lm_head.zero_()
        lm_head[ntok.tokenizer.eos_token_id, 13] = 10.0
        output_rows(model)[0].zero_()
        output_rows(model)[0, 12] = 10.0
    rotation_head(model.base_model.number_modules["default"].head, config.num_places, 1 if mode == "chain" else 0)


def wire_t5(model, ntok, mode: str, cross_scale: float) -> None:
    """T5 whose decoder reads the encoder's [NUM] features through uniform cross-attention (layer 0).

    Encoder: no attention / FF output, so its output is the normalised embeddings (the prompt's features at [NUM]).
    Decoder: no self-attention / FF output; layer 0 cross-attention with q = 0 averages the encoder positions and
    writes dims 0..11 scaled by `cross_scale`. The start token has dim 12 set ([NUM] first). ``"copy"``: [NUM] has
    dim 13 set (eos next). ``"chain"``: [NUM] has dim 12 set ([NUM] again), the head adds 1 to every digit, and the
    cross-attention copy is scaled down to 1e-9, far below the head's margins next to a fed-back number's own
    features, so each later number can only come from the previous one fed back on the decoder side.
    """
    inner = model.base_model.model
    config = model.peft_config["default"]
    with torch.no_grad():
        embed = base_weight(inner.get_input_embeddings())
        embed[:, :14] = 0
        embed[inner.config.decoder_start_token_id, 12] = 5.0
        num_row = inner.get_input_embeddings().token_adapter.trainable_tokens_delta["default"][0]
        num_row[:14] = 0
        num_row[13 if mode == "copy" else 12] = 5.0
        for block in list(inner.encoder.block) + list(inner.decoder.block):
            base_weight(block.layer[0].SelfAttention.o).zero_()
            base_weight(block.layer[-1].DenseReluDense.wo).zero_()
        for i, block in enumerate(inner.decoder.block):
            cross = block.layer[1].EncDecAttention
            base_weight(cross.q).zero_()
            base_weight(cross.o).zero_()
            if i == 0:
                base_weight(cross.v).zero_()
                base_weight(cross.v)[:12, :12] = torch.eye(12)
                base_weight(cross.o)[:12, :12] = torch.eye(12) * cross_scale
        lm_head = base_weight(inner.get_output_embeddings())
        lm_head.zero_()
        lm_head[ntok.tokenizer.eos_token_id, 13] = 10.0
        output_rows(model)[0].zero_()
        output_rows(model)[0, 12] = 10.0
    rotation_head(model.base_model.number_modules["default"].head, config.num_places, 1 if mode == "chain" else 0)


WIRED = dict(
    sign_policy="text",
    fone_projection="pad",
    init_lora_weights=True,
    train_eos_row=False,
    fone_head_target="digit",
    fone_head_input="linear",
)  # hand-set rows, the paper's head


@pytest.mark.parametrize("use_cache", [True, False])
def test_hand_wired_llama_copies_the_prompt_number(store, use_cache):
    model, ntok = build(store, "llama", "fone", **WIRED)
    prompts = ["copy 1234.5 =", "copy 7 =", "so copy 90.09 ="]
    eq_token = ntok(prompts[0])["input_ids"][-1]
    wire_llama(model, ntok, eq_token, "copy")
    texts, numbers = generate(model, ntok, prompts, max_new_tokens=5, return_numbers=True, use_cache=use_cache)
    assert texts == ["copy 1234.5 =1234.5", "copy 7 =7", "so copy 90.09 =90.09"]
    assert numbers == [[ExactNumber(1, "1234", "5")], [ExactNumber(1, "7", "")], [ExactNumber(1, "90", "09")]]


@pytest.mark.parametrize("use_cache", [True, False])
def test_hand_wired_llama_feeds_each_number_back(store, use_cache):
    model, ntok = build(store, "llama", "fone", **WIRED)
    wire_llama(model, ntok, -1, "chain")
    prompts = ["copy 1234.5", "a b c copy 90.09"]
    out = generate(model, ntok, prompts, max_new_tokens=3, return_dict=True, use_cache=use_cache)
    # every digit + 1 (mod 10) per step, 4 + 2 places: 1234.50 -> 2345.61 -> 3456.72 -> 4567.83
    assert [[str(n) for n in row] for row in out.numbers] == [
        ["2345.61", "3456.72", "4567.83"],
        ["1101.1", "2212.21", "3323.32"],
    ]
    # adjacent numbers are decoded with a space between them, so the text reads back as these numbers
    assert out.texts == ["copy 1234.5 2345.61 3456.72 4567.83", "a b c copy 90.09 1101.1 2212.21 3323.32"]
    assert out.stop_reasons == ["length", "length"]


@pytest.mark.parametrize("mode,cross_scale", [("copy", 1.0), ("chain", 1e-9)])
@pytest.mark.parametrize("use_cache", [True, False])
def test_hand_wired_t5(store, mode, cross_scale, use_cache):
    model, ntok = build(store, "t5", "fone", **WIRED)
    wire_t5(model, ntok, mode, cross_scale)
    prompts = ["copy 1234.5", "please copy 90.09 now"]
    out = generate(model, ntok, prompts, max_new_tokens=3, return_dict=True, use_cache=use_cache)
    if mode == "copy":
        assert out.texts == ["1234.5", "90.09"]
        assert out.stop_reasons == ["eos", "eos"]
    else:
        assert out.texts == ["2345.61 3456.72 4567.83", "1101.1 2212.21 3323.32"]  # adjacent: spaced


# -- consistency with teacher forcing on the generated sequence ----------------------------------------------------
def _number_rows(numbers: list, ids: list[int], marker: int, places: tuple[int, int], fone: bool) -> dict:
    """Side tensors for `ids` from the given numbers (an independent encoding of what the text says)."""
    length = len(ids)
    digits = torch.zeros(1, length, sum(places), dtype=torch.long)
    sign, values, mask = (torch.zeros(1, length, dtype=torch.long) for _ in range(3))
    values = values.float()
    positions = [t for t, i in enumerate(ids) if i == marker]
    assert len(positions) == len(numbers)
    for t, number in zip(positions, numbers):
        mask[0, t] = 1
        if fone:
            digits[0, t] = torch.tensor(number.place_digits(*places))
            sign[0, t] = number.sign
            values[0, t] = number.to_float()
        else:
            sign[0, t] = -1 if number < 0 else 1
            values[0, t] = number
    return {"mask": mask, "digits": digits, "sign": sign, "values": values}


@pytest.mark.parametrize("family,encoding,dtype", [("llama", "fone", torch.float32), ("t5", "fone", torch.float32),
                                                   ("granite", "xval", torch.float64)])  # fmt: skip
def test_generation_agrees_with_teacher_forcing(store, family, encoding, dtype):
    """Re-running the public forward on prompt + generated ids, with the returned numbers as side tensors, picks
    every generated token as its argmax and predicts every generated number at the position before it."""
    model, ntok = build(store, family, encoding, dtype)
    encourage_numbers(model, ntok, PROMPTS[:4])
    out = generate(model, ntok, PROMPTS[:4], max_new_tokens=8, min_new_tokens=8, return_dict=True)
    assert fed_back(out, ntok.num_token_id) >= 2
    marker, places = ntok.num_token_id, (4, 2)
    for row, prompt in enumerate(PROMPTS[:4]):
        enc = ntok(prompt, return_tensors="pt")
        prompt_side = {k[4:]: enc[k] for k in ("num_mask", "num_digits", "num_sign", "num_values")}
        generated = out.token_ids[row]
        if family == "t5":
            decoder_ids = [model.base_model.model.config.decoder_start_token_id] + generated[:-1]
            side = _number_rows(out.numbers[row][: generated[:-1].count(marker)], decoder_ids, marker, places,
                                encoding == "fone")  # fmt: skip
            kwargs = {"input_ids": enc["input_ids"], "decoder_input_ids": torch.tensor([decoder_ids])}
            kwargs.update({"num_" + k: v for k, v in prompt_side.items()})
            kwargs.update({"decoder_num_" + k: v for k, v in side.items()})
            offset = 0
        else:
            ids = enc["input_ids"][0].tolist() + generated[:-1]
            side = _number_rows(out.numbers[row][: generated[:-1].count(marker)], generated[:-1], marker, places,
                                encoding == "fone")  # fmt: skip
            kwargs = {"input_ids": torch.tensor([ids])}
            kwargs.update({"num_" + k: torch.cat((prompt_side[k], side[k]), dim=1) for k in side})
            offset = enc["input_ids"].shape[1] - 1
        with torch.no_grad():
            forced = model(**kwargs)
        chosen = forced.logits[0, offset:].argmax(-1).tolist()
        assert chosen == generated
        at = [offset + t for t, i in enumerate(generated) if i == marker]
        if encoding == "fone":
            digits = forced.number_logits[0, at].argmax(-1)  # (N, P)
            signs = torch.where(forced.number_sign_logits[0, at].argmax(-1) == 1, -1, 1)
            want = [ExactNumber.from_place_digits(d, 4, 2, s) for d, s in zip(digits.tolist(), signs.tolist())]
            assert want == out.numbers[row]
        else:  # the forward runs the float32 head on all T rows at once, generation on one: ~1 ulp apart
            assert forced.number_values[0, at].tolist() == pytest.approx(out.numbers[row], rel=1e-5)


# -- stopping ------------------------------------------------------------------------------------------------------
def _first_prefix_with(ntok, ids: list[int], numbers: list[str], marker: int, stop: str) -> int | None:
    """Length of the shortest prefix of `ids` whose decoded text contains `stop` (full decode, no window)."""
    for end in range(1, len(ids) + 1):
        prefix = ids[:end]
        text = ntok.decode(prefix, number_texts=numbers[: prefix.count(marker)])
        if stop in text:
            return end
    return None


@pytest.mark.parametrize("family", ["llama", "t5"])
def test_stop_strings_and_eos_stop_each_sequence(store, family):
    # the linear read-out: a random context head can combine fed-back numbers beyond int_digits, which stops a row
    # with "number_out_of_range" (tests/numadapter/methods/fone/test_context_range.py); here only eos and stop
    # strings may stop one
    model, ntok = build(store, family, "fone", fone_head_input="linear")
    encourage_numbers(model, ntok)
    free = generate(model, ntok, PROMPTS, max_new_tokens=12, eos_token_id=[], return_dict=True)
    assert free.stop_reasons == ["length"] * len(PROMPTS)
    marker = ntok.num_token_id
    # eos: the token row 0 generates third ends every row at its first occurrence, and no other row changes
    eos = free.token_ids[0][2]
    out = generate(model, ntok, PROMPTS, max_new_tokens=12, eos_token_id=eos, return_dict=True)
    for row, ids in enumerate(free.token_ids):
        end = ids.index(eos) + 1 if eos in ids else len(ids)
        assert out.token_ids[row] == ids[:end]
        assert out.stop_reasons[row] == ("eos" if eos in ids else "length")
    assert out.stop_reasons[0] == "eos" and len(out.token_ids[0]) <= 3
    # stop strings: a piece of row 1's completion; every row stops after the shortest prefix containing it
    stop = free.completions[1][-6:-2]
    texts = [[str(n) for n in row] for row in free.numbers]  # FoNE: the canonical text is what was rendered
    out = generate(model, ntok, PROMPTS, max_new_tokens=12, eos_token_id=[], stop_strings=[stop], return_dict=True)
    for row, ids in enumerate(free.token_ids):
        end = _first_prefix_with(ntok, ids, texts[row], marker, stop)
        assert out.token_ids[row] == ids[: end or len(ids)]
        assert out.stop_reasons[row] == ("stop_string" if end else "length")
        if end:
            assert stop in out.completions[row]
    assert out.stop_reasons[1] == "stop_string"


def test_min_new_tokens_blocks_eos(store):
    model, ntok = build(store, "llama", "fone")
    free = generate(model, ntok, PROMPTS[:2], max_new_tokens=8, eos_token_id=[], return_dict=True)
    eos = free.token_ids[0][0]
    out = generate(model, ntok, PROMPTS[:2], max_new_tokens=8, eos_token_id=eos, min_new_tokens=5, return_dict=True)
    assert len(out.token_ids[0]) >= 5
    assert eos not in out.token_ids[0][:5]


def test_sampling_is_reproducible_with_a_seed(store):
    model, ntok = build(store, "llama", "fone")
    encourage_numbers(model, ntok)
    kwargs = dict(max_new_tokens=12, do_sample=True, temperature=1.5, return_dict=True)
    state = torch.random.get_rng_state()
    first = generate(model, ntok, PROMPTS, seed=7, **kwargs)
    again = generate(model, ntok, PROMPTS, seed=7, **kwargs)
    other = generate(model, ntok, PROMPTS, seed=8, **kwargs)
    assert torch.equal(torch.random.get_rng_state(), state)  # the global RNG is untouched
    assert first.token_ids == again.token_ids and first.numbers == again.numbers and first.texts == again.texts
    assert first.token_ids != other.token_ids


# -- numbers that cannot be fed back, [AGG], return forms ----------------------------------------------------------
def _constant_xval(model, ntok, normalised: float) -> None:
    """[NUM] where the most generated token was, and a regression head that always predicts `normalised`."""
    encourage_numbers(model, ntok)
    head = model.base_model.number_modules["default"].head
    with torch.no_grad():
        head.fc2.weight.zero_()
        head.fc2.bias.fill_(normalised)


def test_xval_value_out_of_range_stops_that_sequence_or_raises(store):
    model, ntok = build(store, "llama", "xval", xval_clip=5.0, xval_scale=2.0)
    _constant_xval(model, ntok, 100.0)  # value 200, normalised 100 > 5
    with pytest.warns(UserWarning, match=r"xval_clip.*never clamped"):
        out = generate(model, ntok, PROMPTS, max_new_tokens=8, return_dict=True)
    marker = ntok.num_token_id
    emitted = [row for row, ids in enumerate(out.token_ids) if marker in ids]
    assert emitted
    for row, ids in enumerate(out.token_ids):
        if row in emitted:  # stopped right after its first number, rendered as predicted
            assert ids[-1] == marker and ids.count(marker) == 1
            assert out.stop_reasons[row] == "number_out_of_range"
            assert out.completions[row].endswith("200") and out.numbers[row] == [200.0]
        else:
            assert out.stop_reasons[row] == "length" and len(ids) == 8
    with pytest.raises(NumberOutOfRangeError, match=r"200\.0.*xval_clip"):
        generate(model, ntok, PROMPTS, max_new_tokens=8, xval_out_of_range="error")


def test_xval_value_in_range_is_fed_back(store):
    model, ntok = build(store, "t5", "xval", xval_scale=2.0)
    _constant_xval(model, ntok, 0.25)  # value 0.5
    out = generate(model, ntok, PROMPTS, max_new_tokens=8, eos_token_id=[], return_dict=True)
    marker = ntok.num_token_id
    assert out.stop_reasons == ["length"] * len(PROMPTS)
    assert any(marker in ids[:-1] for ids in out.token_ids)  # some [NUM] was fed back and generation went on
    for row, ids in enumerate(out.token_ids):
        assert out.numbers[row] == [0.5] * ids.count(marker)
        assert out.completions[row].count("0.5") >= ids.count(marker)


def test_agg_is_never_generated(store):
    model, ntok = build(store, "llama", "digits")
    with torch.no_grad():
        output_rows(model)[0] = base_weight(model.base_model.model.get_output_embeddings()).abs().max() * 50
        output_rows(model)[0, 1::2] *= -1
    agg = ntok.agg_token_id
    out = generate(model, ntok, PLAIN, max_new_tokens=8, min_new_tokens=8, return_dict=True)
    assert all(agg not in ids for ids in out.token_ids)
    enc = ntok.tokenizer(PLAIN, padding=True, padding_side="left", return_tensors="pt")
    with torch.no_grad():
        theirs = model.get_base_model().generate(
            **enc, max_new_tokens=8, min_new_tokens=8, do_sample=False, suppress_tokens=[agg]
        )
    assert out.token_ids == theirs[:, enc["input_ids"].shape[1] :].tolist()


def test_return_forms(store):
    model, ntok = build(store, "llama", "fone")
    encourage_numbers(model, ntok)
    out = generate(model, ntok, PROMPTS, max_new_tokens=6, return_dict=True)
    text = generate(model, ntok, PROMPTS[0], max_new_tokens=6)
    assert text == out.texts[0] and text.startswith(PROMPTS[0])
    assert text == PROMPTS[0] + out.completions[0]
    texts, numbers = generate(model, ntok, PROMPTS, max_new_tokens=6, return_numbers=True)
    assert texts == out.texts and numbers == out.numbers
    alone = generate(model, ntok, PROMPTS[:2], max_new_tokens=6, return_full_text=False)
    assert alone == out.completions[:2]
    chunked = generate(model, ntok, PROMPTS, max_new_tokens=6, batch_size=3, return_dict=True)
    assert chunked.token_ids == out.token_ids
    for row, numbers in enumerate(out.numbers):
        for number in numbers:
            assert isinstance(number, ExactNumber) and str(number) in out.completions[row]
    t5, t5_ntok = build(store, "t5", "fone")
    t5_text = generate(t5, t5_ntok, PROMPTS[0], max_new_tokens=4)
    assert not t5_text.startswith(PROMPTS[0])  # T5 returns the completion, like text2text pipelines
    assert generate(t5, t5_ntok, PROMPTS[0], max_new_tokens=4, return_full_text=True) == PROMPTS[0] + t5_text


def test_digits_encoding_returns_numbers_found_in_the_text(store):
    model, ntok = build(store, "t5", "digits")
    out = generate(model, ntok, PROMPTS, max_new_tokens=12, return_dict=True)
    from numadapter.numbers import find_numbers

    assert out.numbers == [[s.exact for s in find_numbers(c)] for c in out.completions]
    assert any(out.numbers)


def test_disabled_adapter_generates_like_the_base_model(store):
    model, ntok = build(store, "llama", "fone")
    encourage_numbers(model, ntok)  # the adapted model emits [NUM] ...
    with model.disable_adapter():  # ... the base model cannot (no head): [NUM] is never chosen
        out = generate(model, ntok, PLAIN, max_new_tokens=6, min_new_tokens=6, return_dict=True)
    base = store.base("llama", False)
    enc = ntok.tokenizer(PLAIN, padding=True, padding_side="left", return_tensors="pt")
    with torch.no_grad():
        theirs = base.generate(**enc, max_new_tokens=6, min_new_tokens=6, do_sample=False)
    assert out.token_ids == theirs[:, enc["input_ids"].shape[1] :].tolist()
    assert out.numbers == [[]] * len(PLAIN)


@pytest.mark.parametrize("family,encoding", [("llama", "fone"), ("t5", "fone"), ("llama", "digits")])
def test_disabled_adapter_reads_prompt_numbers_as_the_base_tokens(store, family, encoding):
    """Under ``disable_adapter`` the base model has no number embedding: both entry points give it the prompt as its
    own tokenizer tokenizes the text, and generate what the plain base generates. Before, it was fed [NUM] / [AGG]
    as bare token rows (other tokens), and numadapter.generate then failed on the prompt's number_texts."""
    model, ntok = build(store, family, encoding)
    prompts = [PROMPTS[0], PROMPTS[3], PROMPTS[1]]  # two with numbers, one without
    side = "right" if family == "t5" else "left"
    enc = ntok.tokenizer(prompts, padding=True, padding_side=side, return_tensors="pt")
    with torch.no_grad():
        theirs = store.base(family, False).generate(**enc, max_new_tokens=6, min_new_tokens=6, do_sample=False)
    start = 1 if family == "t5" else enc["input_ids"].shape[1]
    want = theirs[:, start:].tolist()
    batch = ntok(prompts, return_tensors="pt", padding=True, padding_side=side)
    assert (batch["input_ids"] == ntok.marker_token_id).sum() == 3  # the markers the base must not see
    with model.disable_adapter():
        out = generate(model, ntok, prompts, max_new_tokens=6, min_new_tokens=6, return_dict=True)
        seq = model.generate(**batch, max_new_tokens=6, min_new_tokens=6)
        with pytest.raises(ValueError, match=r"under `with model.disable_adapter\(\):` runs the base model.*"
                           r"tokenizer=ntok"):  # fmt: skip
            model.generate(**{k: v.clone() for k, v in batch.items() if k != "number_texts"}, max_new_tokens=2)
    assert out.token_ids == want
    new = seq[:, 1:] if family == "t5" else seq[:, batch["input_ids"].shape[1] :]
    assert new.tolist() == want
    if family != "t5":
        assert out.texts[0].startswith(PROMPTS[0]) and ntok.batch_decode(seq) == out.texts


# -- errors --------------------------------------------------------------------------------------------------------
def test_beam_search_is_refused(store):
    model, ntok = build(store, "llama", "fone")
    with pytest.raises(ValueError, match=r"num_beams=4.*num_beams=1"):
        generate(model, ntok, "hi", num_beams=4)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(max_new_tokens=0), r"`max_new_tokens` must be an integer >= 1, got 0"),
        (dict(max_new_tokens=3, min_new_tokens=5), r"`min_new_tokens` \(5\) must be <= `max_new_tokens` \(3\)"),
        (dict(do_sample=True, temperature=0.0), r"`temperature` must be a positive finite number, got 0.0"),
        (dict(do_sample=True, top_p=1.5), r"`top_p` must be in \(0, 1\] or None, got 1.5"),
        (dict(do_sample=True, top_k=0), r"`top_k` must be a positive integer or None, got 0"),
        (dict(stop_strings=[""]), r"`stop_strings` must be a non-empty string"),
        (dict(eos_token_id=10**9), r"`eos_token_id` must hold token ids in \[0, \d+\), got 1000000000"),
        (dict(xval_out_of_range="clamp"), r"`xval_out_of_range` must be one of \['stop', 'error'\], got 'clamp'"),
        (dict(batch_size=0), r"`batch_size` must be a positive integer or None"),
    ],
)
def test_bad_arguments_are_named(store, kwargs, match):
    model, ntok = build(store, "llama", "fone")
    with pytest.raises(ValueError, match=match):
        generate(model, ntok, PROMPTS[:2], **kwargs)


def test_wrong_model_tokenizer_or_prompts(store):
    model, ntok = build(store, "llama", "fone")
    with pytest.raises(TypeError, match=r"needs the PeftModel returned by numadapter.get_peft_model.*LlamaForCausal"):
        generate(store.base("llama", False), ntok, "hi")
    import peft

    lora_only = peft.get_peft_model(store.base("llama", False), peft.LoraConfig(r=2, target_modules=["q_proj"]))
    with pytest.raises(TypeError, match=r"needs the PeftModel returned by numadapter.get_peft_model.*PeftModel"):
        generate(lora_only, ntok, "hi")  # a PEFT model, but its LoraModel tuner has no number runtime
    with pytest.raises(TypeError, match=r"`number_tokenizer` must be a numadapter NumberTokenizer"):
        generate(model, ntok.tokenizer, "hi")
    xval_tok = NumberTokenizer(store.tokenizer("digits"), NumberAdapterConfig(encoding="xval"))
    with pytest.raises(
        ValueError, match=r"numadapter.generate: the NumberTokenizer does not match the adapter config on \['encoding'"
    ):
        generate(model, xval_tok, "hi")
    with pytest.raises(TypeError, match=r"`prompts` must be a string or a non-empty list of strings"):
        generate(model, ntok, [])
    with pytest.warns(UserWarning, match=r"ignored because do_sample=False"):
        generate(model, ntok, "hi", max_new_tokens=1, temperature=0.5)


@pytest.mark.parametrize("encoding", ["fone", "xval"])
def test_number_runtime_step_reproduces_the_public_forward(store, encoding):
    """The public step API (hooks installed once, the buffer armed per call) gives the forward's logits and head input;
    with the adapters disabled it is the base model, with no hooks."""
    model, ntok = build(store, "llama", encoding)
    batch = ntok(["12 + 30 = 42", "7.5 - 3 ="], return_tensors="pt", padding=True)
    batch = {k: v for k, v in batch.items() if k != "number_texts"}
    runtime = model.base_model.number_runtime()
    assert runtime.adapter_name == "default" and runtime.has_head and runtime.config.encoding == encoding
    side = NumberInputs(
        batch["num_mask"], batch["num_digits"], batch["num_sign"], batch["num_values"], bool(batch["num_mask"].any())
    )
    with torch.no_grad():
        want = model(**batch)
        with runtime.hooks(capture_hidden=True), runtime.step({"input": side}, current="input") as buffer:
            got = runtime.inner(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            hidden = buffer.hidden
        # without the number inputs the [NUM] rows get no features: the logits must differ
        with runtime.hooks(capture_hidden=False), runtime.step({}, current="input"):
            bare = runtime.inner(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    torch.testing.assert_close(got.logits, want.logits, rtol=0, atol=0)
    assert hidden is not None and hidden.shape[:2] == batch["input_ids"].shape
    assert not torch.equal(bare.logits, want.logits)
    with model.disable_adapter():
        disabled = model.base_model.number_runtime()
        assert disabled.modules is None and not disabled.has_head
        with torch.no_grad(), disabled.hooks(capture_hidden=True):
            base_logits = disabled.inner(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    assert not torch.equal(base_logits, want.logits)


def test_number_runtime_needs_a_bound_adapter():
    from peft import LoraConfig
    from transformers import LlamaConfig, LlamaForCausalLM

    from numadapter.tuner.model import NumberAdapterModel

    base = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=2))  # fmt: skip
    lora = LoraModel(base, LoraConfig(r=2, target_modules=["q_proj"]), "default")
    assert not isinstance(lora, NumberAdapterModel)
    with pytest.raises(ValueError, match="has no numadapter adapter yet: build it with numadapter.get_peft_model"):
        NumberAdapterModel.number_runtime(lora)


def test_each_generated_number_carries_the_heads_confidence_and_combination(store):
    """A context head set to copy the latest number (coefficient +1 on it for sure, read-out 1 + 0i) writes it with
    confidence 1 and combination (+1, 0, 0, 0); its read-out turned a quarter of a digit lowers the confidence to
    one half (the same digits). Digit tokens have no head: None for each number found in the text."""
    model, ntok = build(store, "llama", "fone")
    encourage_numbers(model, ntok)
    head = model.base_model.number_modules["default"].head
    places, count = head.num_places, head.context_numbers
    for angle, expected in ((0.0, 1.0), (math.pi / 20, 0.5)):
        with torch.no_grad():
            head.proj.weight.zero_()
            head.proj.bias.copy_(torch.tensor([math.cos(angle), math.sin(angle)]).repeat(places))
            head.coefficients.weight.zero_()
            head.coefficients.bias.copy_(torch.tensor([-30.0, -30.0, 30.0] + [-30.0, 30.0, -30.0] * (count - 1)))
            head.sign_proj.weight.zero_()  # sign_policy="feature": the sign head says + (the prompts' signs)
            head.sign_proj.bias.copy_(torch.tensor([30.0, -30.0]))
        out = generate(model, ntok, PROMPTS, max_new_tokens=6, return_dict=True)
        assert sum(map(len, out.numbers)) >= 2
        for prompt, numbers, confidences, combinations in zip(PROMPTS, out.numbers, out.confidences, out.combinations):
            assert len(confidences) == len(combinations) == len(numbers)
            spans = find_numbers(prompt)
            latest = Decimal(str(spans[-1].exact)) if spans else Decimal(0)  # no number before it: u alone, 0
            for index, (number, confidence, combination) in enumerate(zip(numbers, confidences, combinations)):
                assert Decimal(str(number)) == latest
                assert confidence == pytest.approx(expected, abs=1e-3)
                copied = bool(spans) or index > 0  # the first number of a prompt without one has nothing to copy
                assert combination == ((1,) if copied else (0,)) + (0,) * (count - 1)
    digits, digits_ntok = build(store, "llama", "digits")
    out = generate(digits, digits_ntok, PROMPTS[:4], max_new_tokens=6, return_dict=True)
    assert [len(c) for c in out.confidences] == [len(n) for n in out.numbers]
    assert all(c is None for row in out.confidences + out.combinations for c in row)
