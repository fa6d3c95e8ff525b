"""number_lr_ratio: number modules and [NUM]/EOS rows train at their own rate (LoRA+-style), LoRA at the trainer's."""

from __future__ import annotations

import pytest
import torch
from helpers.adapter_cases import Store
from helpers.training_cases import arithmetic, sft_args

from numadapter.config import NumberAdapterConfig
from numadapter.mapping import get_peft_model
from numadapter.tokenization import NumberTokenizer
from numadapter.training.base import is_number_parameter
from numadapter.training.sft import NumberSFTTrainer


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("number_lr")))


def trained(store: Store, tmp_path, ratio: float, steps: int = 3, rows_ratio: float | None = None, **args):
    tokenizer = store.tokenizer("digits")
    config = NumberAdapterConfig(encoding="fone", int_digits=4, frac_digits=0, r=4, lora_alpha=8, lora_dropout=0.0,
                                 target_modules=["q_proj", "v_proj"], number_lr_ratio=ratio,
                                 token_rows_lr_ratio=rows_ratio)  # fmt: skip
    torch.manual_seed(0)
    model = get_peft_model(store.base("llama", tie=False, hidden=32), config, tokenizer=tokenizer)
    before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    trainer = NumberSFTTrainer(
        model=model, args=sft_args(tmp_path, max_steps=steps, learning_rate=1e-3, **args),
        train_dataset=arithmetic(16), processing_class=NumberTokenizer(tokenizer, config),
    )  # fmt: skip
    trainer.train()
    moved = {n: (p.detach() - before[n]).abs().max().item() for n, p in model.named_parameters() if n in before}
    return trainer, moved


def group_of(optimizer: torch.optim.Optimizer, model: torch.nn.Module) -> dict[str, float]:
    lr_of = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
    return {n: lr_of[id(p)] for n, p in model.named_parameters() if p.requires_grad}


def test_number_parameters_get_ratio_times_the_rate(store, tmp_path):
    """token_rows_lr_ratio=None (the default): the rows follow number_lr_ratio."""
    trainer, moved = trained(store, tmp_path, ratio=10.0, lr_scheduler_type="constant")
    rates = group_of(trainer.optimizer, trainer.model)
    numbers = {n for n in rates if is_number_parameter(n)}
    assert numbers and any("number_modules" in n for n in numbers) and any("trainable_tokens" in n for n in numbers)
    assert all(rates[n] == pytest.approx(1e-2) for n in numbers)
    assert all(rates[n] == pytest.approx(1e-3) for n in rates if n not in numbers)  # LoRA keeps the trainer's rate
    assert all(v > 0 for v in moved.values())


def test_token_rows_get_their_own_ratio(store, tmp_path):
    """token_rows_lr_ratio: the [NUM] / EOS rows at their own rate (here LoRA's), the number modules at 10x."""
    trainer, moved = trained(store, tmp_path, ratio=10.0, rows_ratio=1.0, lr_scheduler_type="constant")
    rates = group_of(trainer.optimizer, trainer.model)
    rows = [n for n in rates if "trainable_tokens" in n]
    modules = [n for n in rates if "number_modules" in n]
    assert rows and modules
    assert all(rates[n] == pytest.approx(1e-3) for n in rows)
    assert all(rates[n] == pytest.approx(1e-2) for n in modules)
    assert all(rates[n] == pytest.approx(1e-3) for n in rates if not is_number_parameter(n))
    assert all(moved[n] > 0 for n in rows)
    trainer, _ = trained(store, tmp_path, ratio=1.0, rows_ratio=3.0, lr_scheduler_type="constant")
    rates = group_of(trainer.optimizer, trainer.model)
    assert all(rates[n] == pytest.approx(3e-3) for n in rates if "trainable_tokens" in n)
    assert all(rates[n] == pytest.approx(1e-3) for n in rates if "number_modules" in n)


def test_the_schedule_scales_both_groups_alike(store, tmp_path):
    trainer, _ = trained(
        store, tmp_path, ratio=4.0, steps=4, lr_scheduler_type="constant_with_warmup", warmup_steps=10
    )
    rates = sorted({g["lr"] for g in trainer.optimizer.param_groups})
    assert len(rates) == 2 and rates[1] == pytest.approx(4.0 * rates[0]) and rates[0] < 1e-3  # in warm-up, same factor


def test_ratio_one_leaves_transformers_groups_alone(store, tmp_path):
    trainer, _ = trained(store, tmp_path, ratio=1.0, steps=1)
    assert len({g["lr"] for g in trainer.optimizer.param_groups}) == 1


def test_bad_ratio_is_refused():
    with pytest.raises(ValueError, match="number_lr_ratio"):
        NumberAdapterConfig(encoding="fone", number_lr_ratio=0.0)
    with pytest.raises(ValueError, match="token_rows_lr_ratio"):
        NumberAdapterConfig(encoding="fone", token_rows_lr_ratio=-1.0)
