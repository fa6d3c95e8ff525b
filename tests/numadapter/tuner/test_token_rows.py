"""The collapse after [NUM] (issue: 'after any [NUM] the next-token distribution stops depending on context').

Mechanism: LoRA leaves the LM head frozen. A base that never learned its EOS row (here: the quick start's tiny Llama
pretrained on text without EOS) cannot raise the EOS logit by moving its hidden state, yet prompt-completion data
trains EOS after every answer, and an answer ends with a [NUM]. The least-bad answer to an unreachable target is a
flat distribution, so the adapter drives the hidden state at every [NUM] to one fixed point that makes the
distribution flat: the same in every context, with EOS at about 1/V. `train_eos_row=True` (the default) trains the EOS
rows with the [NUM] rows; EOS is then learned and the distribution after a [NUM] depends on its context again.
"""

from __future__ import annotations

import dataclasses
import itertools
import re

import datasets
import pytest
import torch
from helpers.quickstart_specs import SMALL_SPEC as SPEC
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig

import numadapter
from numadapter import NumberAdapterConfig, NumberTokenizer
from numadapter.data.arithmetic import addition_examples
from numadapter.testing.tiny_base import build_tiny_base

CONTEXTS = ["682 + 361 = 1015", "I have 3"]  # trained: EOS after the answer; " apples." after "I have N"


@pytest.fixture(scope="module")
def eosless_base(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("eosless"))
    build_tiny_base(path, SPEC, seed=0, print_fn=lambda line: None, eos=False)
    return path


def _after_number(model, ntok) -> torch.Tensor:
    """``[C, V]`` next-token distributions at the last token ([NUM]) of each of `CONTEXTS`."""
    model.eval()
    rows = []
    for text in CONTEXTS:
        batch = ntok([text], return_tensors="pt")
        batch.pop("number_texts")
        assert batch["input_ids"][0, -1] == ntok.num_token_id
        with torch.no_grad():
            rows.append(model(**batch).logits[0, -1].float().softmax(-1))
    return torch.stack(rows)


def _train(path: str, train_eos_row: bool, tmp_path, apples: bool = True) -> tuple:
    tokenizer = AutoTokenizer.from_pretrained(path)
    base = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    config = NumberAdapterConfig(
        encoding="fone", int_digits=5, frac_digits=0, r=SPEC.rank, lora_alpha=2 * SPEC.rank, lora_dropout=0.0,
        target_modules="all-linear", train_eos_row=train_eos_row, fone_numbers="all",
    )  # fmt: skip
    torch.manual_seed(0)
    model = numadapter.get_peft_model(base, config, tokenizer=tokenizer)
    ntok = NumberTokenizer(tokenizer, config)
    args = SFTConfig(
        output_dir=str(tmp_path / f"run-{train_eos_row}"), max_steps=SPEC.finetune_steps, learning_rate=3e-3,
        per_device_train_batch_size=SPEC.batch_size, lr_scheduler_type="cosine", warmup_steps=0.05, report_to=[],
        save_strategy="no", seed=0, bf16=False, use_cpu=True, disable_tqdm=True, logging_steps=1000,
    )  # fmt: skip
    rows = addition_examples(SPEC.train_examples, 3, 4, seed=0)
    if apples:
        rows += [{"prompt": "I have", "completion": f" {n} apples."} for n in range(1, SPEC.train_examples // 3 + 1)]
    data = datasets.Dataset.from_list(rows)
    numadapter.NumberSFTTrainer(model=model, args=args, train_dataset=data, processing_class=ntok).train()
    return _after_number(model, ntok), tokenizer.eos_token_id, len(tokenizer), model, ntok


def _largest_difference(probs: torch.Tensor) -> float:
    """The largest total-variation distance between the distributions of two contexts."""
    return max(0.5 * (probs[i] - probs[j]).abs().sum().item() for i, j in itertools.combinations(range(len(probs)), 2))


def test_eosless_base_cannot_reach_eos(eosless_base):
    """The premise: the base puts almost no mass on EOS anywhere (its EOS row was never a target)."""
    tokenizer = AutoTokenizer.from_pretrained(eosless_base)
    base = AutoModelForCausalLM.from_pretrained(eosless_base, dtype=torch.float32)
    batch = tokenizer(["Copy 12 = 12", "The larger of 3 and 9 is 9."], return_tensors="pt", padding=True)
    with torch.no_grad():
        probs = base(**batch).logits.softmax(-1)[..., tokenizer.eos_token_id]
    assert probs[batch["attention_mask"].bool()].max() < 1e-3


def test_frozen_eos_row_collapses_every_number_position_and_train_eos_row_fixes_it(eosless_base, tmp_path):
    frozen, eos, vocab, _, _ = _train(eosless_base, train_eos_row=False, tmp_path=tmp_path)
    # collapse: after the answer's [NUM] a nearly flat distribution, EOS near 1/V (not learned)
    assert frozen[0].max() < 20 / vocab
    assert frozen[0, eos] < 0.05

    fixed, *_ = _train(eosless_base, train_eos_row=True, tmp_path=tmp_path)
    assert fixed[0, eos] > 0.5  # the answer's [NUM] is followed by EOS
    assert fixed[1, eos] < 0.1  # "I have 3" goes on (" apples.")
    assert _largest_difference(fixed) > 0.5  # the distribution after a [NUM] depends on its context


def test_trained_fone_model_writes_the_number_then_eos_also_when_sampling(tmp_path):
    """NumberSFTTrainer with its defaults: every sampled answer is " <number>" and ends with EOS, not junk."""
    path = str(tmp_path / "base")
    spec = dataclasses.replace(SPEC, hidden=64, layers=2, heads=4, pretrain_steps=300)
    build_tiny_base(path, spec, seed=0, print_fn=lambda line: None)  # pretrained with EOS, as checkpoints are
    *_, model, ntok = _train(path, train_eos_row=True, tmp_path=tmp_path, apples=False)
    prompts = [row["prompt"] for row in addition_examples(12, 3, 4, seed=5)]
    for seed in (0, 1):
        out = numadapter.generate(
            model, ntok, prompts, max_new_tokens=6, do_sample=True, seed=seed, return_dict=True
        )  # fmt: skip
        assert out.stop_reasons == ["eos"] * len(prompts), out.completions
        # nothing after the number: EOS comes right after it (before the fix: '9381ilograms 10194...')
        assert all(re.search(r"\d$", text) for text in out.completions), out.completions
        exact_format = sum(bool(re.fullmatch(r" \d+", text)) for text in out.completions)
        assert exact_format >= 0.9 * len(prompts), out.completions  # a sampled word before it stays possible
