"""``model.generate`` / pipelines / decode on numadapter models: the same ids and numbers as `numadapter.generate`.

Models are the tiny random Llama / Granite / T5 of `tests/helpers/tiny.py` with a random-LoRA number adapter whose
[NUM] output row is pushed up (`encourage_numbers` of `tests/helpers/generation_cases.py`), so generation emits numbers
that the head decodes and that are fed back. The reference is always `numadapter.generate` (its own tests compare it
with transformers' loop on text and with teacher forcing); here every transformers-style entry point must agree with it
exactly.
"""

from __future__ import annotations

import pytest
import torch
from helpers.adapter_cases import Store
from helpers.generation_cases import PROMPTS, build, encourage_numbers, fed_back

from numadapter.generation import generate
from numadapter.generation.hf import numbers_of

CASES = [("llama", "fone"), ("granite", "xval"), ("t5", "fone")]
FOUR = [PROMPTS[0], PROMPTS[1], PROMPTS[3], PROMPTS[2]]  # 4 prompts of different lengths, numbers in 3 of them


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("hf_generate")))


def numeric(store, family: str, encoding: str, **overrides):
    store.base_path(family, False)  # built and cached first: building it draws from the RNG seeded below
    torch.manual_seed(0)  # random LoRA (init_lora_weights=False): the same model whatever ran before
    model, ntok = build(store, family, encoding, torch.float64 if encoding == "xval" else torch.float32, **overrides)
    encourage_numbers(model, ntok, prompts=FOUR)  # the prompts the tests generate from
    return model, ntok


def new_tokens(out: torch.Tensor, start: int, ref, pad: int) -> None:
    """Each row of `out` after `start` is the reference's ids followed by padding only."""
    for row, ids in enumerate(ref.token_ids):
        assert out[row, start : start + len(ids)].tolist() == ids
        assert (out[row, start + len(ids) :] == pad).all()


@pytest.mark.parametrize("family,encoding", CASES, ids=[f"{f}-{e}" for f, e in CASES])
@pytest.mark.parametrize("size", [1, 4], ids=["batch1", "batch4"])
def test_model_generate_gives_the_ids_and_numbers_of_numadapter_generate(store, family, encoding, size):
    model, ntok = numeric(store, family, encoding)
    prompts = FOUR
    if size == 1:  # the prompt whose completion has the most numbers, each generated alone as the test will
        # (alone, not in the batch of four: on a random model near-tied logits can flip with the padding)
        counts = [len(generate(model, ntok, [p], max_new_tokens=8, return_dict=True).numbers[0]) for p in FOUR]
        prompts = [FOUR[counts.index(max(counts))]]
    ref = generate(model, ntok, prompts, max_new_tokens=8, return_dict=True)
    if len(prompts) > 1:
        assert fed_back(ref, ntok.num_token_id) >= 1  # numbers were generated and fed back
    assert sum(map(len, ref.numbers)) >= 1
    for side in ("left", "right"):  # the loop re-pads each row as it needs
        batch = ntok(prompts, return_tensors="pt", padding=True, padding_side=side)
        out = model.generate(**batch, max_new_tokens=8)
        start = 1 if family == "t5" else batch["input_ids"].shape[1]
        if family != "t5":
            assert torch.equal(out[:, :start], batch["input_ids"])  # the prompt as given, as transformers returns
        pad = ntok.pad_token_id if ntok.pad_token_id is not None else 0
        new_tokens(out, start, ref, pad)
        got = numbers_of(out)
        assert got.numbers == ref.numbers
        assert got.stop_reasons == ref.stop_reasons
        texts = ntok.batch_decode(out)
        assert texts == (ref.completions if family == "t5" else [p + c for p, c in zip(prompts, ref.completions)])
        assert ntok.decode(out[0]) == texts[0]  # a row of the output: a view of the noted tensor
        assert ntok.batch_decode(out[:, start:]) == ref.completions or family == "t5"


def test_generate_from_tensors_without_the_tokenizer_note(store):
    """Number tensors passed explicitly (ids rebuilt, so nothing is noted): the same result."""
    model, ntok = numeric(store, "llama", "fone")
    ref = generate(model, ntok, FOUR, max_new_tokens=6, return_dict=True)
    batch = dict(ntok(FOUR, return_tensors="pt", padding=True))
    batch["input_ids"] = torch.tensor(batch["input_ids"].tolist())  # a new tensor (the noted one is dropped)
    batch.pop("number_texts")  # rendered from num_digits instead
    out = model.generate(**batch, max_new_tokens=6, return_dict_in_generate=True)
    assert numbers_of(out).numbers == ref.numbers
    new_tokens(out.sequences, batch["input_ids"].shape[1], ref, ntok.pad_token_id)


@pytest.mark.parametrize("family", ["llama", "t5"])
def test_loaded_and_exported_models_generate_with_numbers(store, tmp_path, family):
    from peft import AutoPeftModelForCausalLM, AutoPeftModelForSeq2SeqLM, PeftModel

    from numadapter.export import export_merged, load_exported

    model, ntok = numeric(store, family, "fone")
    model.save_pretrained(tmp_path / "adapter")
    loaded = PeftModel.from_pretrained(store.base(family, False), tmp_path / "adapter").eval()
    auto_cls = AutoPeftModelForSeq2SeqLM if family == "t5" else AutoPeftModelForCausalLM
    auto = auto_cls.from_pretrained(tmp_path / "adapter").eval()
    export_merged(model, ntok, tmp_path / "merged")
    exported, etok = load_exported(tmp_path / "merged")
    for candidate, tok in ((loaded, ntok), (auto, ntok), (exported, etok)):
        ref = generate(candidate, tok, FOUR, max_new_tokens=6, return_dict=True)
        assert sum(map(len, ref.numbers)) >= 1
        batch = tok(FOUR, return_tensors="pt", padding=True)
        out = candidate.generate(**batch, max_new_tokens=6)
        new_tokens(out, 1 if family == "t5" else batch["input_ids"].shape[1], ref, tok.pad_token_id)
        assert numbers_of(out).numbers == ref.numbers


def test_sampling_and_num_return_sequences_follow_the_seed(store):
    """transformers' sampling semantics (top_k 50 by default) with torch's global RNG, as numadapter.generate."""
    model, ntok = numeric(store, "llama", "fone")
    prompts = FOUR[:2]
    torch.manual_seed(7)
    ref = generate(model, ntok, [p for p in prompts for _ in range(3)], max_new_tokens=6, do_sample=True,
                   temperature=0.7, top_k=50, return_dict=True)  # fmt: skip
    torch.manual_seed(7)
    batch = ntok(prompts, return_tensors="pt", padding=True)
    out = model.generate(**batch, max_new_tokens=6, do_sample=True, temperature=0.7, num_return_sequences=3)
    assert out.shape[0] == 6
    new_tokens(out, batch["input_ids"].shape[1], ref, ntok.pad_token_id)
    assert numbers_of(out).numbers == ref.numbers


def test_lengths_and_eos_follow_transformers(store):
    model, ntok = numeric(store, "llama", "fone")
    batch = ntok(FOUR, return_tensors="pt", padding=True)
    width = batch["input_ids"].shape[1]
    assert model.generate(**batch, max_length=width + 3).shape[1] == width + 3  # max_length counts the prompt
    assert model.generate(**batch).shape[1] == width + 20  # transformers' default: 20 new tokens
    free = generate(model, ntok, FOUR, max_new_tokens=6, eos_token_id=[], return_dict=True)
    stop = free.token_ids[0][2]  # the third token of row 0 ends the sequence
    ref = generate(model, ntok, FOUR, max_new_tokens=6, eos_token_id=stop, return_dict=True)
    out = model.generate(**batch, max_new_tokens=6, eos_token_id=stop)
    assert numbers_of(out).stop_reasons[0] == "eos" and ref.stop_reasons[0] == "eos"
    new_tokens(out, width, ref, ntok.pad_token_id)
    ref_min = generate(model, ntok, FOUR, max_new_tokens=6, min_new_tokens=4, eos_token_id=stop, return_dict=True)
    out_min = model.generate(**batch, max_new_tokens=6, min_new_tokens=4, eos_token_id=stop)
    new_tokens(out_min, width, ref_min, ntok.pad_token_id)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(num_beams=2), r"generation_config\.num_beams=2 is not supported"),
        (dict(repetition_penalty=1.3), r"repetition_penalty=1\.3 is not supported"),
        (dict(num_return_sequences=2), r"num_return_sequences"),  # transformers' own check (greedy)
        (dict(output_scores=True), r"output_scores=True is not supported"),
        (dict(stop_strings=["."]), r"stop_strings needs the NumberTokenizer.*tokenizer=ntok"),
        (dict(foo=1), r"arguments it does not use: \['foo'\]"),
    ],
)
def test_unsupported_options_are_refused_by_name(store, kwargs, match):
    model, ntok = build(store, "llama", "fone")
    batch = dict(ntok(FOUR, return_tensors="pt", padding=True))
    if "stop_strings" in kwargs:
        batch = {k: batch[k].clone() for k in ("input_ids", "attention_mask", "num_mask", "num_digits", "num_sign",
                                                "num_values")}  # fmt: skip
    with pytest.raises(ValueError, match=match):
        model.generate(**batch, max_new_tokens=2, **kwargs)


@pytest.mark.parametrize("family", ["llama", "t5"])
def test_ids_with_num_but_no_numbers_are_refused(store, family):
    """transformers' habit, ids and mask only: with [NUM] in ids the tokenizer never produced and no number tensors,
    an error naming the fix, never a silent run without the features."""
    model, ntok = build(store, family, "fone")
    words = ntok.tokenizer(["The total is"], add_special_tokens=False)["input_ids"][0]
    ids = torch.tensor([words + [ntok.num_token_id] + words])  # (1, T) built by hand
    with pytest.raises(ValueError, match=r"holds 1 \[NUM\] token\(s\) but model\.generate got no number tensors"):
        model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=2)
    plain = ntok.tokenizer(["hello there"], return_tensors="pt")  # no [NUM]: runs
    assert model.generate(**plain, max_new_tokens=2).shape[0] == 1


def test_stop_strings_with_the_tokenizer(store):
    model, ntok = numeric(store, "llama", "fone")
    ref = generate(model, ntok, FOUR, max_new_tokens=8, stop_strings=["e"], return_dict=True)
    batch = ntok(FOUR, return_tensors="pt", padding=True)
    out = model.generate(**batch, max_new_tokens=8, stop_strings=["e"], tokenizer=ntok)
    assert numbers_of(out).stop_reasons == ref.stop_reasons
    new_tokens(out, batch["input_ids"].shape[1], ref, ntok.pad_token_id)


class DecodingStreamer:
    """A transformers-style streamer (``put`` / ``end``) that decodes everything received so far at every step."""

    def __init__(self, ntok) -> None:
        self.ntok, self.ids, self.texts, self.ended = ntok, [], [], False

    def put(self, value: torch.Tensor) -> None:
        assert value.shape[0] == 1  # batch 1, as transformers' TextStreamer requires
        self.ids += value.reshape(-1).tolist()
        self.texts.append(self.ntok.decode(self.ids))

    def end(self) -> None:
        self.ended = True


@pytest.mark.parametrize("family", ["llama", "t5"])
def test_streamer_receives_every_token_and_decodes_the_numbers(store, family, capsys):
    from transformers import TextStreamer

    model, ntok = numeric(store, family, "fone")
    counts = [len(n) for n in generate(model, ntok, FOUR, max_new_tokens=8, return_dict=True).numbers]
    prompt = FOUR[counts.index(max(counts))]
    ref = generate(model, ntok, [prompt], max_new_tokens=8, return_dict=True)
    assert ref.numbers[0]
    batch = ntok([prompt], return_tensors="pt")
    streamer = DecodingStreamer(ntok)
    out = model.generate(**batch, max_new_tokens=8, streamer=streamer)
    assert streamer.ended and streamer.ids == out[0].tolist()
    assert streamer.texts[-1] == ntok.decode(out[0])
    assert all(text.count(ntok.config.num_token) == 0 for text in streamer.texts)
    model.generate(**batch, max_new_tokens=8, streamer=TextStreamer(ntok, skip_prompt=True))
    printed = capsys.readouterr().out
    assert all(str(number) in printed for number in ref.numbers[0])


def test_ids_without_their_number_tensors_are_refused_whatever_tensor_holds_them(store):
    """Ids alone never get numbers: not the tensor NumberTokenizer returned, nor its copies (``.clone()``,
    ``torch.tensor(list)``), nor single prompts re-padded into a batch as transformers' pipelines do. Before, each
    of these was matched by value to the last prompt encoded with the same ids."""
    model, ntok = numeric(store, "llama", "fone")
    batch = ntok(FOUR, return_tensors="pt", padding=True)
    singles = [ntok(p, return_tensors="pt") for p in FOUR]
    width = max(s["input_ids"].shape[1] for s in singles)
    ids = torch.full((4, width), ntok.pad_token_id)
    mask = torch.zeros(4, width, dtype=torch.long)
    for row, single in enumerate(singles):  # left padding, as pipelines batch prompts
        ids[row, width - single["input_ids"].shape[1] :] = single["input_ids"][0]
        mask[row, width - single["input_ids"].shape[1] :] = 1
    bare = [
        (batch["input_ids"], batch["attention_mask"]),
        (batch["input_ids"].clone(), batch["attention_mask"].clone()),
        (torch.tensor(batch["input_ids"].tolist()), batch["attention_mask"]),
        (ids, mask),
    ]
    for input_ids, attention_mask in bare:
        with pytest.raises(ValueError, match=r"row 0 holds 1 \[NUM\] token\(s\) but model\.generate got no number "
                           r"tensors.*model\.generate\(\*\*ntok\(.*pipeline\('number-text-generation'"):  # fmt: skip
            model.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=2)


def test_numbers_of_a_digits_output_says_where_its_numbers_are(store):
    """encoding='digits' writes numbers as digit tokens (transformers' own loop): there is no number record, and
    numbers_of says so and how to read them, instead of denying that model.generate returned the tensor."""
    model, ntok = build(store, "llama", "digits", aggregate=False)
    batch = ntok(FOUR, return_tensors="pt", padding=True)
    out = model.generate(**batch, max_new_tokens=3)
    width = batch["input_ids"].shape[1]
    read = r"numadapter\.find_numbers\(ntok\.decode\(output\[row, prompt_len:\]\)\)"
    with pytest.raises(
        ValueError, match=rf"from model\.generate of an encoding='digits' adapter.*{read} with prompt_len = {width}"
    ):
        numbers_of(out)
    with pytest.raises(ValueError, match="was not returned by model.generate"):
        numbers_of(out.clone())


@pytest.mark.parametrize("family", ["llama", "t5"])
def test_use_cache_false_is_the_uncached_reference(store, family):
    model, ntok = numeric(store, family, "fone")
    ref = generate(model, ntok, FOUR, max_new_tokens=6, use_cache=False, return_dict=True)
    assert sum(map(len, ref.numbers)) >= 1
    batch = ntok(FOUR, return_tensors="pt", padding=True)
    out = model.generate(**batch, max_new_tokens=6, use_cache=False)
    new_tokens(out, 1 if family == "t5" else batch["input_ids"].shape[1], ref, ntok.pad_token_id)
    assert numbers_of(out).numbers == ref.numbers
