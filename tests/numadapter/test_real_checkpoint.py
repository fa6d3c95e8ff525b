"""numadapter on the real pretrained checkpoint the install brings (SmolLM2-135M-Instruct, `tests/helpers/real.py`).

A module-scoped load of the base is the reference every adapter is compared with; each adapter wraps a fresh load of
its own (0.2 s from the converted directory, faster than a deep copy). FoNE and xVal adapters with moved weights are
built once for the module and shared by two read-only tests: a saved adapter reloads bit-exactly, and
``model.generate`` gives the ids and numbers of `numadapter.generate`. `NumberTokenizer` round trips text and the
ChatML chat template of the checkpoint's tokenizer. Per encoding (fone, xval, digits, digits + [AGG] + NTL), a fresh
adapter is a no-op and two `NumberSFTTrainer` steps on one batch log every loss term finite and moving and change the
trained parameters. Short prompts, batches of two, r=2.
"""

from __future__ import annotations

import math

import datasets
import pytest
import torch
from helpers.real import real_base, real_tokenizer
from helpers.training_cases import sft_args
from peft import PeftModel

from numadapter.config import NumberAdapterConfig
from numadapter.generation import generate
from numadapter.generation.hf import numbers_of
from numadapter.mapping import get_peft_model
from numadapter.tokenization import NumberTokenizer
from numadapter.training.sft import NumberSFTTrainer
from numadapter.tuner.patches import base_weight

SETTINGS = {
    "fone": {"encoding": "fone", "int_digits": 6, "frac_digits": 2, "fone_numbers": "all"},
    "xval": {"encoding": "xval", "int_digits": 6, "frac_digits": 2, "xval_scale": 1000.0},
    "digits": {"encoding": "digits"},
    "digits-agg-ntl": {"encoding": "digits", "aggregate": True, "int_digits": 6, "frac_digits": 2, "ntl_weight": 0.3,
                       "aggregate_loss_lambda": 0.5},
}  # fmt: skip
LORA = {"r": 2, "lora_alpha": 4, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
TERMS = {  # the loss terms NumberSFTTrainer logs per encoding
    "fone": ("loss", "lm_loss", "number_loss"),
    "xval": ("loss", "lm_loss", "number_loss"),
    "digits": ("loss", "lm_loss"),
    "digits-agg-ntl": ("loss", "lm_loss", "ntl_loss", "aggregate_loss"),
}
# the numbers [NUM] / [AGG] carry in TEXTS (sign_policy="text": a minus sign stays text; 09:30 is two numbers)
FIRST, SECOND = ["1,250", "12.50", "3.75", "15,621.25", "2024"], ["12", "7.5", "09", "30", "19.5"]
NUMBERS = {
    "fone": [FIRST, SECOND, []],
    "xval": [[n for n in FIRST if n != "15,621.25"], SECOND, []],  # beyond xval_scale * xval_clip = 5000: text
    "digits-agg-ntl": [FIRST, SECOND, []],
}
TEXTS = [
    "The invoice lists 1,250 kg at 12.50 dollars, -3.75 off; total 15,621.25 (2024).",
    "Temperatures fell to -12 overnight and rose to 7.5 by 09:30, a swing of 19.5 degrees.",
    "No numbers here, only words and punctuation!",
]


@pytest.fixture(scope="module")
def pristine() -> torch.nn.Module:
    """The base as loaded (float32, eval): the reference of the no-op checks. Never adapted."""
    return real_base()


def build(name: str, **overrides):
    """A fresh adapter on a fresh load of the base, its NumberTokenizer and config."""
    config = NumberAdapterConfig(**SETTINGS[name], **LORA, **overrides)
    tokenizer = real_tokenizer()
    torch.manual_seed(0)
    model = get_peft_model(real_base(), config, tokenizer=tokenizer)
    return model, NumberTokenizer(tokenizer, config), config


def emit_numbers(model, ntok) -> None:
    """Makes the model write [NUM] where it would write the digit "4": the [NUM] output row (tied to the input
    embedding on this checkpoint) becomes that digit's row, scaled up a little."""
    rows = model.get_input_embeddings().token_adapter.trainable_tokens_delta["default"]  # ([NUM], EOS) x width
    digit = ntok.tokenizer.convert_tokens_to_ids("4")
    with torch.no_grad():
        rows[0] = base_weight(model.get_input_embeddings())[digit] * 1.5


@pytest.fixture(scope="module")
def moved() -> dict:
    """FoNE and xVal adapters whose every trainable tensor moved, that write numbers (read-only in the tests)."""
    out = {}
    for name in ("fone", "xval"):
        model, ntok, _ = build(name)
        generator = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for parameter in model.parameters():
                if parameter.requires_grad:
                    parameter += 0.02 * torch.randn(parameter.shape, generator=generator)
        emit_numbers(model, ntok)
        out[name] = (model.eval(), ntok)
    return out


@pytest.mark.parametrize("name", ["fone", "xval"])
def test_a_saved_adapter_reloads_bit_exactly(moved, name, tmp_path):
    model, ntok = moved[name]
    model.save_pretrained(tmp_path)
    ntok.save_pretrained(tmp_path)
    loaded = PeftModel.from_pretrained(real_base(), tmp_path).eval()
    reloaded = NumberTokenizer.from_pretrained(tmp_path)
    batch = ntok(TEXTS[:2], return_tensors="pt", padding=True)
    again = reloaded(TEXTS[:2], return_tensors="pt", padding=True)
    assert batch.keys() == again.keys() and all(
        batch[k] == again[k] if k == "number_texts" else torch.equal(batch[k], again[k]) for k in batch
    )
    inputs = {k: v for k, v in batch.items() if k != "number_texts"}
    with torch.no_grad():
        want, got = model(**inputs), loaded(**inputs)
    assert torch.equal(want.logits, got.logits)
    for key in ("number_logits", "number_values"):
        if getattr(want, key, None) is not None:
            assert torch.equal(getattr(want, key), getattr(got, key)), key


@pytest.mark.parametrize("name", ["fone", "xval"])
def test_model_generate_equals_numadapter_generate(moved, name):
    model, ntok = moved[name]
    prompts = ["What is 12 plus 30? The answer is", "Count: 1, 2, 3,"]
    ref = generate(model, ntok, prompts, max_new_tokens=6, return_dict=True)
    assert sum(ids[:-1].count(ntok.num_token_id) for ids in ref.token_ids) >= 1  # a number generated and fed back
    batch = ntok(prompts, return_tensors="pt", padding=True, padding_side="left")
    out = model.generate(**batch, max_new_tokens=6)
    start = batch["input_ids"].shape[1]
    for row, ids in enumerate(ref.token_ids):
        assert out[row, start : start + len(ids)].tolist() == ids
        assert (out[row, start + len(ids) :] == ntok.pad_token_id).all()
    got = numbers_of(out)
    assert got.numbers == ref.numbers and got.stop_reasons == ref.stop_reasons
    assert ntok.batch_decode(out[:, start:]) == ref.completions


@pytest.mark.parametrize("name", ["fone", "xval", "digits-agg-ntl"])
def test_number_tokenizer_round_trips_on_the_checkpoints_tokenizer(name):
    ntok = NumberTokenizer(real_tokenizer(), NumberAdapterConfig(**SETTINGS[name], **LORA))
    batch = ntok(TEXTS)
    for row, text in enumerate(TEXTS):
        assert ntok.decode(batch["input_ids"][row], number_texts=batch["number_texts"][row]) == text
    assert batch["number_texts"] == NUMBERS[name]
    assert [ids.count(ntok.marker_token_id) for ids in batch["input_ids"]] == [len(n) for n in NUMBERS[name]]
    messages = [
        {"role": "user", "content": "I paid 12.50 for 3 books; what is the price of one?"},
        {"role": "assistant", "content": "Each book costs 4.1666, about 4.17."},
    ]
    text = ntok.apply_chat_template(messages, tokenize=False)
    assert text.startswith("<|im_start|>system\n") and "<|im_start|>user\nI paid 12.50" in text  # ChatML
    assert text.endswith("<|im_start|>assistant\nEach book costs 4.1666, about 4.17.<|im_end|>\n")
    encoded = ntok.apply_chat_template(messages)
    ids = encoded["input_ids"]
    assert ids.count(ntok.tokenizer.convert_tokens_to_ids("<|im_start|>")) == 3  # one special token per turn
    assert encoded["number_texts"] == ["12.50", "3", "4.17"]  # 4.1666: beyond frac_digits=2, it stays text
    assert ids.count(ntok.marker_token_id) == 3
    assert ntok.decode(encoded, skip_special_tokens=False) == text


def two_steps(pristine, name, tmp_path):
    """Checks that the fresh adapter is a no-op, then runs two NumberSFTTrainer steps on the same batch of two rows;
    returns the logs and the trained parameters before and after."""
    model, ntok, _ = build(name)
    plain = ntok.tokenizer(["Hello, how are you today?", "<|im_start|>user\nWhat is it?<|im_end|>"],
                           return_tensors="pt", padding=True)  # fmt: skip
    with torch.no_grad():
        got, want = model.eval()(**plain).logits, pristine(**plain).logits
    vocab = want.shape[-1]
    assert vocab == 49152 and got.shape[-1] == vocab + (name != "digits")  # one new row: [NUM] or [AGG]
    assert torch.equal(got[..., :vocab], want)  # a no-op at init
    rows = [
        {"prompt": "What is 1,250 plus 37.5?", "completion": " It is 1287.5."},
        {"prompt": "Double 4.25, please.", "completion": " That makes 8.5."},
    ]
    args = sft_args(tmp_path, max_steps=2, per_device_train_batch_size=2, learning_rate=1e-2, use_cpu=True)
    trainer = NumberSFTTrainer(model=model, args=args, train_dataset=datasets.Dataset.from_list(rows),
                               processing_class=ntok)  # fmt: skip
    before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    trainer.train()
    after = dict(model.named_parameters())
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    return logs, before, after


@pytest.mark.parametrize("name", list(SETTINGS))
def test_a_fresh_adapter_is_a_no_op_and_two_steps_move_every_loss_term(pristine, name, tmp_path):
    logs, before, after = two_steps(pristine, name, tmp_path)
    assert len(logs) == 2
    for term in TERMS[name]:
        first, second = logs[0][term], logs[1][term]
        assert math.isfinite(first) and math.isfinite(second), (term, first, second)
        assert first != second, term  # the same batch twice: the change is the first step's update
    changed = {n for n, value in before.items() if not torch.equal(after[n], value)}
    assert any(".lora_B." in n for n in changed) and any("trainable_tokens_delta" in n for n in changed)
    assert changed >= {n for n in before if ".number_modules." in n}
