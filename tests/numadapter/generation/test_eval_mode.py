"""Generation straight after training: `numadapter.generate` and ``model.generate`` run in eval mode and give the
caller's modes back (`numadapter/generation/eval_mode.py`).

TRL's `SFTConfig` turns gradient checkpointing on by default and ``Trainer.train()`` leaves the model in train mode.
Under gradient checkpointing in train mode transformers' decoder layers drop the KV cache, so every cached step of the
decode loop saw only its own token: a crash on a padded batch (the mask is longer than the keys), wrong tokens
without padding. The reference is the same call after ``model.eval()``.
"""

from __future__ import annotations

import pytest
import torch
from helpers.adapter_cases import Store
from helpers.generation_cases import encourage_numbers, fed_back
from helpers.training_cases import arithmetic
from trl import SFTConfig

from numadapter.config import NumberAdapterConfig
from numadapter.generation import generate
from numadapter.generation.eval_mode import evaluating
from numadapter.mapping import get_peft_model
from numadapter.tokenization import NumberTokenizer
from numadapter.training.sft import NumberSFTTrainer

PROMPTS = ["What is 12 plus 7?", "What is 3 plus 45 and then what is 6 plus 1?"]  # different lengths: padded


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("eval_mode")))


def modes(model: torch.nn.Module) -> dict[str, bool]:
    return {name: module.training for name, module in model.named_modules()}


def trained(store: Store, tmp_path, encoding: str):
    """A tiny Llama number adapter after 3 steps of `NumberSFTTrainer` with TRL's default `SFTConfig` (bf16 off:
    CPU)."""
    tokenizer = store.tokenizer("digits")
    base = store.base("llama", tie=False)
    config = NumberAdapterConfig(encoding=encoding, int_digits=4, frac_digits=2, r=4, lora_alpha=8,
                                 target_modules=["q_proj", "v_proj"])  # fmt: skip
    torch.manual_seed(0)
    model = get_peft_model(base, config, tokenizer=tokenizer)
    ntok = NumberTokenizer(tokenizer, config)
    args = SFTConfig(output_dir=str(tmp_path / "out"), max_steps=3, per_device_train_batch_size=4, report_to=[],
                     save_strategy="no", disable_tqdm=True, bf16=False)  # fmt: skip
    assert args.gradient_checkpointing  # TRL's default, the setting this test is about
    NumberSFTTrainer(model=model, args=args, train_dataset=arithmetic(12), processing_class=ntok).train()
    return model, ntok


@pytest.mark.parametrize("encoding", ["fone", "digits"])
def test_generating_after_training_gives_the_answers_of_eval_mode(store, tmp_path, encoding):
    model, ntok = trained(store, tmp_path, encoding)
    after_training = modes(model)
    assert model.training and model.base_model.model.model.gradient_checkpointing
    model.eval()
    if encoding == "fone":
        encourage_numbers(model, ntok, prompts=PROMPTS)  # numbers are generated and fed back
    batch = ntok(PROMPTS, return_tensors="pt", padding=True, padding_side="left")
    ref = generate(model, ntok, PROMPTS, max_new_tokens=8, return_dict=True)
    ref_ids = model.generate(**batch, max_new_tokens=8)
    if encoding == "fone":
        assert fed_back(ref, ntok.num_token_id) >= 1
    model.train()
    assert modes(model) == after_training  # the state train() left, which the generation below starts from

    out = generate(model, ntok, PROMPTS, max_new_tokens=8, return_dict=True)
    assert modes(model) == after_training
    assert (out.texts, out.numbers, out.token_ids) == (ref.texts, ref.numbers, ref.token_ids)
    out_ids = model.generate(**batch, max_new_tokens=8)
    assert modes(model) == after_training
    assert torch.equal(out_ids, ref_ids)
    assert ntok.batch_decode(out_ids) == ntok.batch_decode(ref_ids)


def test_mixed_modes_are_given_back_module_by_module():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5), torch.nn.Sequential(torch.nn.Dropout()))
    model.train()
    model[1].eval()  # a caller's own mix: one dropout frozen
    with evaluating(model):
        assert not any(m.training for m in model.modules())
    assert [m.training for m in model.modules()] == [True, True, False, True, True]


def test_modes_are_given_back_when_generation_raises():
    model = torch.nn.Sequential(torch.nn.Dropout())
    with pytest.raises(RuntimeError, match="boom"), evaluating(model):
        raise RuntimeError("boom")
    assert model.training and model[0].training
