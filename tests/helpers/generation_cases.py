"""The generation tests' shared cases (`tests/numadapter/generation/`, `tests/numadapter/training/test_trainer.py`):
prompts, a random-LoRA number-adapter model, and a way to make a random model emit [NUM].

To make random models emit [NUM], `encourage_numbers` gives the [NUM] output row the weights of the token the model
generates most, scaled up a little, so [NUM] wins where that token would.
"""

from __future__ import annotations

import collections

import torch

from helpers.adapter_cases import TARGETS, TOKENIZER_OF
from numadapter.config import NumberAdapterConfig
from numadapter.generation import generate
from numadapter.mapping import get_peft_model
from numadapter.tokenization import NumberTokenizer
from numadapter.tuner.patches import base_weight

PROMPTS = [
    "The price is 12.5 dollars and",
    "hi",
    "What is 7 + 8 =",
    "Alice bought 3 apples for 2.25 each, so",
    "count 1 2 3",
    "Paris in 1999",
    "x",
    "The total was 4.5 and the rate 0.05 per day; then",
]


def build(store, family: str, encoding: str, dtype: torch.dtype = torch.float32, **overrides):
    """A fresh number-adapter model (random LoRA, untied base) and its NumberTokenizer."""
    tokenizer = store.tokenizer(TOKENIZER_OF[family])
    base = store.base(family, False).to(dtype)
    settings = dict(
        encoding=encoding,
        int_digits=4,
        frac_digits=2,
        r=4,
        lora_alpha=8,
        target_modules=TARGETS[family],
        init_lora_weights=False,
    )
    if encoding == "fone":
        settings.update(sign_policy="feature", fone_numbers="all")  # every number a [NUM] unless a test says otherwise
    if encoding == "digits":
        settings["aggregate"] = True
    if encoding == "xval":  # the paper's head: these random models emit [NUM] anywhere, also with no number before
        settings["xval_context_numbers"] = 0  # (the head over the numbers before it: xval/test_context_head.py)
    settings.update(overrides)
    config = NumberAdapterConfig(**settings)
    model = get_peft_model(base, config, tokenizer=tokenizer).eval()
    return model, NumberTokenizer(tokenizer, config)


def output_rows(model) -> torch.Tensor:
    """The trained output rows ([NUM] / [AGG] first) of the untied LM head."""
    return model.base_model.model.get_output_embeddings().token_adapter.trainable_tokens_delta["default"]


def encourage_numbers(model, ntok, prompts=PROMPTS[:6], want: int = 2) -> None:
    """Gives the [NUM] output row the weights of the most generated token, scaled up until numbers are fed back.

    Raises the scale until at least `want` generated [NUM] are followed by another generated token (so their
    number went back in as input) within 8 new tokens of `prompts`.
    """
    out = generate(model, ntok, prompts, max_new_tokens=8, return_dict=True)
    common = collections.Counter(t for ids in out.token_ids for t in ids).most_common(1)[0][0]
    row = base_weight(model.base_model.model.get_output_embeddings())[common].clone()
    for scale in (1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 8.0):
        with torch.no_grad():
            output_rows(model)[0] = row * scale
        out = generate(model, ntok, prompts, max_new_tokens=8, return_dict=True)
        if fed_back(out, ntok.num_token_id) >= want:
            return
    raise AssertionError(f"no scale of the [NUM] output row up to 8 fed back {want} numbers: {out.completions}")


def fed_back(out, marker: int) -> int:
    """How many generated [NUM] were fed back as input (not the last generated token of their row)."""
    return sum(ids[:-1].count(marker) for ids in out.token_ids)


def _plus_on_latest(model, count: int) -> None:
    """Sets a FoNE context head's coefficients to +1 on the `count` latest numbers before it and 0 on the others."""
    head = model.base_model.number_modules["default"].head
    slots = head.context_numbers
    with torch.no_grad():
        head.coefficients.weight.zero_()
        plus, zero = [-30.0, -30.0, 30.0], [-30.0, 30.0, -30.0]  # each slot's logits of -1, 0, +1
        head.coefficients.bias.copy_(torch.tensor(plus * count + zero * (slots - count)))


def copy_latest_number(model) -> None:
    """Sets a FoNE context head to write the latest number before it (coefficient +1 on it, 0 on the others), so a
    random model's numbers depend on its prompt (a fresh head's tied coefficients leave every number out: it writes
    its read-out alone, the same for every prompt)."""
    _plus_on_latest(model, 1)


def sum_latest_two(model) -> None:
    """Sets a FoNE context head to write the sum of the two latest numbers before it (coefficient +1 on both)."""
    _plus_on_latest(model, 2)


def number_writer(store, choose, digits_too: bool, **settings):
    """A random llama (seed 0) in answers mode whose head's choice `choose(model)` sets, made to emit [NUM]; with
    `digits_too`, its digit token '5' scores almost as high as [NUM], so that sampled among the top 2 it writes numbers
    in digits between its [NUM]s."""
    torch.manual_seed(0)  # the random LoRA weights: each test's model does not depend on the tests before it
    model, ntok = build(store, "llama", "fone", **settings)
    choose(model)
    encourage_numbers(model, ntok, PROMPTS[:6])
    if digits_too:
        five = ntok.tokenizer.convert_tokens_to_ids("5")
        with torch.no_grad():
            base_weight(model.base_model.model.get_output_embeddings())[five] = output_rows(model)[0] * 0.97
    return model, ntok


def num_first(model, ntok, prompts: list[str], margin: float = 5.0) -> None:
    """Moves [NUM]'s output row along each prompt's last hidden state until [NUM] leads the next token by `margin`."""
    for prompt in prompts:
        with torch.no_grad():
            out = model(**ntok(prompt, return_tensors="pt"), output_hidden_states=True)
            hidden, logits = out.hidden_states[-1][0, -1], out.logits[0, -1]
            lead = float(logits.max() - logits[ntok.num_token_id] + margin)
            output_rows(model)[0] += hidden * max(lead, 0.0) / hidden.square().sum()
