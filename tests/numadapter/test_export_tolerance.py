"""How close an export's logits are to the adapter's on the real checkpoint (SmolLM2-135M-Instruct, float32).

The README states the tolerance (`helpers.real.EXPORT_ATOL`); this checks it for FoNE and xVal adapters with
LoRA r=16 on every linear layer and every trainable parameter moved (as after training, so the merge is not a no-op).
The difference is float32 rounding over 30 layers: an unmerged LoRA forward sums ``x W + (x A) B``, the merged one
``x (W + A B)``; PEFT's own ``merge_and_unload`` differs from its unmerged model by as much (also checked here).
"""

from __future__ import annotations

import pytest
import torch
from helpers.real import EXPORT_ATOL, real_base, real_tokenizer

from numadapter.config import NumberAdapterConfig
from numadapter.export import export_merged, load_exported
from numadapter.mapping import get_peft_model
from numadapter.tokenization import NumberTokenizer

PROMPTS = ["What is 12.5 plus 3?", "The total was 1234 apples and 56 pears; how many fruits?"]


@pytest.fixture(scope="module")
def tokenizer():
    return real_tokenizer()


def moved(model: torch.nn.Module, scale: float = 0.02) -> torch.nn.Module:
    """`model` with every trainable parameter (LoRA, [NUM] rows, number modules) moved by N(0, scale^2)."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in model.parameters():
            if param.requires_grad:
                param.add_(torch.randn(param.shape, generator=generator) * scale)
    return model.eval()


def max_diff(got: torch.Tensor, want: torch.Tensor, mask: torch.Tensor) -> float:
    """Largest |logit difference| over the real (unpadded) positions."""
    return (got - want).abs()[mask.bool()].max().item()


@pytest.mark.parametrize("encoding", ["fone", "xval"])
def test_export_logits_are_within_the_stated_tolerance(tokenizer, tmp_path, encoding):
    config = NumberAdapterConfig(encoding=encoding, int_digits=6, frac_digits=2, r=16, lora_alpha=32,
                                 lora_dropout=0.0, target_modules="all-linear", init_lora_weights=False)  # fmt: skip
    torch.manual_seed(0)
    model = moved(get_peft_model(real_base(), config, tokenizer=tokenizer))
    ntok = NumberTokenizer(tokenizer, config)
    batch = ntok(PROMPTS, return_tensors="pt", padding=True)
    with torch.no_grad():
        want = model(**batch).logits
    export_merged(model, ntok, tmp_path / "merged", dtype="float32", inplace=True)
    loaded, _ = load_exported(tmp_path / "merged")
    with torch.no_grad():
        got = loaded(**batch).logits
    assert max_diff(got, want, batch["attention_mask"]) <= EXPORT_ATOL


def test_peft_merge_differs_from_unmerged_lora_as_much(tokenizer):
    """The same float32 rounding without numadapter: PEFT's merge_and_unload of plain LoRA on the same base."""
    from peft import LoraConfig
    from peft import get_peft_model as peft_get_peft_model

    torch.manual_seed(0)
    config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear", init_lora_weights=False)
    model = moved(peft_get_peft_model(real_base(), config))
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    batch = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    with torch.no_grad():
        want = model(**batch).logits
        got = model.merge_and_unload()(**batch).logits
    assert 1e-5 < max_diff(got, want, batch["attention_mask"]) <= EXPORT_ATOL
