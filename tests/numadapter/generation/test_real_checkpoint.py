"""Generation's number plumbing on the real SmolLM2-135M checkpoint with a fresh FoNE adapter (issue 20).

"The year 1969 ..." and "The year 2001 ..." encode to the same ids, so ids alone never say which year a prompt
holds: numbers travel with the NumberTokenizer batch (``model.generate(**ntok(...))``, the number-aware pipeline),
and ids without them are refused. Under ``disable_adapter`` the base reads the numbers as its own digit tokens and
answers as the plain checkpoint does ("... the Apollo 11 ..."), not as it does when fed a bare [NUM] row.
"""

from __future__ import annotations

import pytest
import torch
from helpers.real import real_base, real_tokenizer
from transformers import pipeline

from numadapter.config import NumberAdapterConfig
from numadapter.generation import generate, numbers_of
from numadapter.mapping import get_peft_model
from numadapter.tokenization import NumberTokenizer

YEARS = ["The year 1969 is famous because", "The year 2001 is famous because"]
NEW = 6


@pytest.fixture(scope="module")
def real():
    tokenizer = real_tokenizer()
    config = NumberAdapterConfig(
        encoding="fone", int_digits=4, frac_digits=0, target_modules=["q_proj", "v_proj"], fone_numbers="all"
    )
    model = get_peft_model(real_base(), config, tokenizer=tokenizer).eval()
    return model, NumberTokenizer(tokenizer, config), tokenizer


def test_ids_of_one_year_never_take_the_numbers_of_another(real):
    """Before, ``model.generate(input_ids=a["input_ids"].clone())`` after encoding 2001 generated about 2001 for the
    prompt that said 1969 (the copy was matched by value to the last prompt with these ids)."""
    model, ntok, _ = real
    a, b = (ntok(text, return_tensors="pt") for text in YEARS)
    assert torch.equal(a["input_ids"], b["input_ids"])  # the templated case: one [NUM], same ids
    for bare in (a["input_ids"].clone(), torch.tensor(a["input_ids"].tolist()), a["input_ids"]):
        with pytest.raises(ValueError, match=r"no number tensors.*generate\(\*\*ntok\(.*number-text-generation"):
            model.generate(input_ids=bare, max_new_tokens=NEW)
    ref = generate(model, ntok, YEARS, max_new_tokens=NEW, return_dict=True)
    out = model.generate(**a, max_new_tokens=NEW)
    assert numbers_of(out).number_texts == [["1969"]]  # what the prompt fed: its own number
    assert ntok.decode(out[0]) == ref.texts[0] and ref.texts[0].startswith(YEARS[0])
    pipe = pipeline("number-text-generation", model=model, tokenizer=ntok, do_sample=False)
    got = pipe(YEARS, max_new_tokens=NEW, batch_size=2)  # one re-padded batch of both years
    assert [o[0]["generated_text"] for o in got] == ref.texts


def test_disabled_adapter_runs_the_base_on_its_own_digit_tokens(real):
    """Before, the base got a bare [NUM] row for 1969 ("... of the number of people who") where the plain
    checkpoint says "... of the Apollo 11", and numadapter.generate failed on number_texts after generating."""
    model, ntok, tokenizer = real
    enc = tokenizer(YEARS[0], return_tensors="pt")
    with torch.no_grad():
        plain = real_base().generate(**enc, max_new_tokens=NEW, do_sample=False)[0, enc["input_ids"].shape[1] :]
    batch = ntok(YEARS[0], return_tensors="pt")
    pipe = pipeline("number-text-generation", model=model, tokenizer=ntok, do_sample=False)
    with model.disable_adapter():
        out = model.generate(**batch, max_new_tokens=NEW)
        text = generate(model, ntok, YEARS[0], max_new_tokens=NEW)
        piped = pipe(YEARS[0], max_new_tokens=NEW)[0]["generated_text"]
    assert out[0, batch["input_ids"].shape[1] :].tolist() == plain.tolist()
    assert "Apollo" in tokenizer.decode(plain)  # the base knows the year
    assert text == YEARS[0] + tokenizer.decode(plain) == ntok.decode(out[0]) == piped
