"""NTL on a plain trl.SFTTrainer (no [NUM], no number adapter): ntl_loss_func + NumberLossCallback."""

from __future__ import annotations

import math
import random
import tempfile

import datasets
import pytest
import torch
import torch.nn.functional as F
from helpers import tiny
from peft import LoraConfig
from transformers import TrainerCallback, TrainerControl, TrainerState
from trl import SFTConfig, SFTTrainer

from numadapter.testing import toy
from numadapter.training.callbacks import NumberLossCallback, ntl_loss_func

DIGITS = "0123456789"


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    root = tmp_path_factory.mktemp("ntl")
    tokenizer = toy.build_tokenizer("digits", root / "tok")
    tiny.build_model("llama", root / "model", len(tokenizer), hidden_size=32, tokenizer_kind="digits")
    return tokenizer, str(root / "model")


def fresh_model(assets):
    return tiny.reload_model("llama", assets[1])


def numbers_dataset(n: int, seed: int = 0) -> datasets.Dataset:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randrange(100), rng.randrange(100)
        rows.append({"prompt": f"What is {a} plus {b}?", "completion": f" It is {a + b}."})
    return datasets.Dataset.from_list(rows)


def args(tmp_path, **overrides) -> SFTConfig:
    settings = dict(output_dir=str(tmp_path / "out"), max_steps=10, per_device_train_batch_size=4, learning_rate=2e-2,
                    logging_steps=1, report_to=[], bf16=False, gradient_checkpointing=False, save_strategy="no",
                    disable_tqdm=True, max_grad_norm=0.0, seed=0, per_device_eval_batch_size=16)  # fmt: skip
    settings.update(overrides)
    return SFTConfig(**settings)


def reference_loss(logits, labels, digit_ids, weight, denom):
    """CE + weight * NTL-WAS written out by hand: softmax over the ten digit columns, |y - j| costs (eq. 4)."""
    logits, labels = logits[:, :-1].float(), labels[:, 1:]
    valid = labels != -100
    ce = F.cross_entropy(logits[valid], labels[valid], reduction="sum")
    ntl = torch.zeros(())
    value_of = {token: d for d, token in enumerate(digit_ids)}
    for b, t in valid.nonzero().tolist():
        token = int(labels[b, t])
        if token in value_of:
            probs = logits[b, t, digit_ids].softmax(-1)
            ntl = ntl + sum(probs[j] * abs(value_of[token] - j) for j in range(10))
    return (ce + weight * ntl) / denom, ce / denom, ntl / denom


@pytest.mark.parametrize("num_items", [None, 7])
def test_loss_matches_a_hand_written_reference(assets, num_items):
    tokenizer = assets[0]
    digit_ids = [tokenizer.convert_tokens_to_ids(d) for d in DIGITS]
    torch.manual_seed(0)
    logits = torch.randn(2, 6, len(tokenizer), requires_grad=True)
    labels = torch.tensor([[1, digit_ids[3], digit_ids[7], 50, -100, -100], [1, 60, digit_ids[0], digit_ids[9], 2, 3]])
    loss_func = ntl_loss_func(tokenizer, weight=0.3)
    got = loss_func({"logits": logits}, labels, num_items_in_batch=num_items)
    denom = (labels[:, 1:] != -100).sum() if num_items is None else num_items
    want, ce, ntl = reference_loss(logits, labels, digit_ids, 0.3, denom)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    (grad,) = torch.autograd.grad(got, logits)
    (want_grad,) = torch.autograd.grad(want, logits)
    torch.testing.assert_close(grad, want_grad, rtol=1e-4, atol=1e-6)
    assert loss_func.meter.train_calls == 1
    torch.testing.assert_close(loss_func.meter.train["ntl_loss"], ntl.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(loss_func.meter.train["ce_loss"], ce.detach(), rtol=1e-5, atol=1e-6)


def test_unshifted_labels_for_seq2seq(assets):
    tokenizer = assets[0]
    digit_ids = [tokenizer.convert_tokens_to_ids(d) for d in DIGITS]
    logits = torch.randn(1, 3, len(tokenizer))
    labels = torch.tensor([[digit_ids[4], 50, -100]])
    got = ntl_loss_func(tokenizer, weight=1.0, shift_labels=False)({"logits": logits}, labels)
    padded = torch.cat([logits, torch.zeros(1, 1, len(tokenizer))], 1)  # the reference shifts: undo it by padding
    want, _, _ = reference_loss(padded, torch.cat([torch.tensor([[-100]]), labels], 1), digit_ids, 1.0, 2)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_sft_trainer_with_ntl_trains_and_logs_components(assets, tmp_path):
    tokenizer = tiny.copy_tokenizer(assets[0])
    loss_func = ntl_loss_func(tokenizer, weight=0.3)
    seen: list[dict] = []

    class Recorder(TrainerCallback):  # stands for TensorBoard / W&B: it reads the logs after NumberLossCallback
        def on_log(self, args, state, control, logs=None, **kwargs):
            seen.append(dict(logs))

    data = numbers_dataset(16)
    lora = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"])
    trainer = SFTTrainer(model=fresh_model(assets), args=args(tmp_path), train_dataset=data, eval_dataset=data,
                         processing_class=tokenizer, compute_loss_func=loss_func, peft_config=lora,
                         callbacks=[Recorder()])  # fmt: skip
    callback = NumberLossCallback.attach(trainer, loss_func)
    assert trainer.callback_handler.callbacks[0] is callback
    model = trainer.model
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    before = trainer.evaluate()
    trainer.train()
    after = trainer.evaluate()
    assert after["eval_loss"] < before["eval_loss"]
    assert after["eval_ntl_loss"] < before["eval_ntl_loss"] and after["eval_ce_loss"] < before["eval_ce_loss"]
    assert math.isclose(after["eval_loss"], after["eval_ce_loss"] + 0.3 * after["eval_ntl_loss"], rel_tol=1e-5)
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(logs) == 10
    for entry in logs:
        assert entry["ntl_loss"] > 0
        assert math.isclose(entry["loss"], entry["ce_loss"] + 0.3 * entry["ntl_loss"], rel_tol=1e-4, abs_tol=1e-6)
    assert sum("ntl_loss" in entry for entry in seen) == 10
    assert sum("eval_ntl_loss" in entry for entry in seen) == 2  # both evaluations
    params = dict(model.named_parameters())
    assert all(torch.equal(params[n], value) for n, value in frozen.items())


def first_step(assets, tmp_path, batch: int, accumulation: int) -> dict:
    tokenizer = tiny.copy_tokenizer(assets[0])
    loss_func = ntl_loss_func(tokenizer, weight=0.3)
    config = args(tmp_path / f"b{batch}", max_steps=1, per_device_train_batch_size=batch,
                  gradient_accumulation_steps=accumulation)  # fmt: skip
    trainer = SFTTrainer(model=fresh_model(assets), args=config, train_dataset=numbers_dataset(8, 5),
                         processing_class=tokenizer, compute_loss_func=loss_func)  # fmt: skip
    NumberLossCallback.attach(trainer, loss_func)
    trainer.train()
    return next(entry for entry in trainer.state.log_history if "loss" in entry)


def test_accumulation_matches_one_large_batch(assets, tmp_path):
    big = first_step(assets, tmp_path, batch=8, accumulation=1)
    small = first_step(assets, tmp_path, batch=2, accumulation=4)
    for key in ("loss", "ce_loss", "ntl_loss", "grad_norm"):
        assert math.isclose(small[key], big[key], rel_tol=1e-5), key


def test_missing_compute_loss_func_is_reported(assets, tmp_path):
    tokenizer = tiny.copy_tokenizer(assets[0])
    loss_func = ntl_loss_func(tokenizer)
    trainer = SFTTrainer(model=fresh_model(assets), args=args(tmp_path, max_steps=1), train_dataset=numbers_dataset(4),
                         processing_class=tokenizer)  # fmt: skip
    NumberLossCallback.attach(trainer, loss_func)
    with pytest.raises(RuntimeError, match=r"without calling the NTL loss.*compute_loss_func="):
        trainer.train()


def test_settings_that_bypass_the_logits_are_refused(assets):
    tokenizer = assets[0]
    loss_func = ntl_loss_func(tokenizer)

    class Fused:  # what TRL's fused LM head returns: log-probabilities, no logits
        log_probs = torch.zeros(1, 2)

    with pytest.raises(ValueError, match=r"without `logits`.*compute_loss_func=.*loss_type='nll'"):
        loss_func(Fused(), torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="labels=None"):
        loss_func({"logits": torch.zeros(1, 3, len(tokenizer))}, None)
    callback = NumberLossCallback(loss_func)
    dft = SFTConfig(output_dir=tempfile.mkdtemp(), loss_type="dft", report_to=[], bf16=False)
    with pytest.raises(ValueError, match="loss_type='nll'"):
        callback.on_train_begin(dft, TrainerState(), TrainerControl())
    with pytest.raises(TypeError, match="ntl_loss_func"):
        NumberLossCallback(lambda outputs, labels, num_items_in_batch=None: 0)
    with pytest.raises(ValueError, match="non-negative"):
        ntl_loss_func(tokenizer, weight=-1)


def test_multi_digit_tokenizer_warns_that_digit_level_ntl_is_zero(tmp_path):
    """Llama-3-style tokens ("123"): digit_level=True gives NTL 0 on such numbers, and ntl_loss_func says so."""
    import warnings

    tokenizer = toy.build_tokenizer("llama3", tmp_path / "llama3")
    ids = tokenizer(["It is 12 and 56."])["input_ids"]  # "12", "56": two-digit tokens
    labels = torch.tensor(ids)
    logits = torch.randn(1, labels.shape[1], len(tokenizer), generator=torch.Generator().manual_seed(0))
    with pytest.warns(UserWarning, match=r"multi-digit tokens.*digit_level=False"):
        digit_level = ntl_loss_func(tokenizer, weight=1.0)
    with torch.no_grad():
        digit_level({"logits": logits}, labels)
    assert digit_level.meter.eval["ntl_loss"].item() == 0.0  # the silent zero the warning is about
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        whole = ntl_loss_func(tokenizer, weight=1.0, digit_level=False)
    with torch.no_grad():
        whole({"logits": logits}, labels)
    assert whole.meter.eval["ntl_loss"].item() > 0.0


def test_digit_tokenizer_does_not_warn(assets):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ntl_loss_func(assets[0], weight=0.3)
