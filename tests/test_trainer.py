"""NumberSFTTrainer / NumberSeq2SeqTrainer end to end on tiny Llama, Granite and T5 with every encoding."""

from __future__ import annotations

import json
import math
import os
import random

import datasets
import pytest
import torch
from adapter_cases import Store
from safetensors.torch import load_file
from transformers import Seq2SeqTrainingArguments, TrainerCallback
from trl import SFTConfig

from numadapter.config import NumberAdapterConfig
from numadapter.mapping import get_peft_model
from numadapter.tokenization import NumberTokenizer
from numadapter.trainer import NumberSeq2SeqTrainer, NumberSFTTrainer

TOKENIZER_OF = {"llama": "digits", "granite": "digits", "t5": "t5"}
TARGETS = {"llama": ["q_proj", "v_proj"], "granite": ["q_proj", "v_proj"], "t5": ["q", "v"]}
HIDDEN = 32
ENCODING_SETTINGS = {
    "fone": {},
    "xval": {"xval_scale": 100.0},
    "digits": {"aggregate": True, "aggregate_loss_lambda": 0.5, "ntl_weight": 0.3},
}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny matrices: one thread is ~20x faster than two competing ones on the 2-core test machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    datasets.disable_progress_bars()
    yield
    torch.set_num_threads(before)
    datasets.enable_progress_bars()


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("trainer")))


def build(store: Store, family: str, encoding: str, seed: int = 0, **overrides):
    """A fresh numadapter PeftModel, its NumberTokenizer and config (dropout off)."""
    tokenizer = store.tokenizer(TOKENIZER_OF[family])
    base = store.base(family, tie=False, hidden=HIDDEN)
    settings = dict(encoding=encoding, int_digits=4, frac_digits=2, r=4, lora_alpha=8, lora_dropout=0.0,
                    target_modules=TARGETS[family], **ENCODING_SETTINGS[encoding])  # fmt: skip
    settings.update(overrides)
    config = NumberAdapterConfig(**settings)
    torch.manual_seed(seed)
    model = get_peft_model(base, config, tokenizer=tokenizer)
    return model, NumberTokenizer(tokenizer, config), config


def arithmetic(n: int, seed: int = 0) -> datasets.Dataset:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randrange(100), rng.randrange(1, 100)
        rows.append({"prompt": f"What is {a} plus {b}?", "completion": f" It is {a + b}."})
    return datasets.Dataset.from_list(rows)


def sft_args(tmp_path, **overrides) -> SFTConfig:
    settings = dict(output_dir=str(tmp_path / "out"), max_steps=12, per_device_train_batch_size=4,
                    logging_steps=1, report_to=[], bf16=False, gradient_checkpointing=False, save_strategy="no",
                    disable_tqdm=True, max_grad_norm=0.0, seed=0, learning_rate=2e-2)  # fmt: skip
    settings.update(overrides)
    return SFTConfig(**settings)


def seq2seq_args(tmp_path, **overrides) -> Seq2SeqTrainingArguments:
    settings = dict(output_dir=str(tmp_path / "out"), max_steps=12, per_device_train_batch_size=4, seed=0,
                    learning_rate=2e-2, logging_steps=1, report_to=[], save_strategy="no", disable_tqdm=True,
                    max_grad_norm=0.0)  # fmt: skip
    settings.update(overrides)
    return Seq2SeqTrainingArguments(**settings)


def trainer_for(family, model, ntok, dataset, args):
    cls = NumberSeq2SeqTrainer if family == "t5" else NumberSFTTrainer
    return cls(model=model, args=args, train_dataset=dataset, processing_class=ntok)


def train_logs(trainer) -> list[dict]:
    return [entry for entry in trainer.state.log_history if "loss" in entry]


EXPECTED_COMPONENTS = {
    "fone": {"lm_loss", "number_loss"},
    "xval": {"lm_loss", "number_loss"},
    "digits": {"lm_loss", "ntl_loss", "aggregate_loss"},
}


def expected_loss(entry: dict, config: NumberAdapterConfig) -> float:
    """The loss recombined from its logged components (numadapter.tuner.loss's formula, by hand)."""
    if config.encoding == "digits":
        lam = config.aggregate_loss_lambda
        return lam * entry["lm_loss"] + (1 - lam) * entry["aggregate_loss"] + config.ntl_weight * entry["ntl_loss"]
    return entry["lm_loss"] + config.number_loss_weight * entry["number_loss"]


CASES = [(f, e) for f in ("llama", "granite", "t5") for e in ("fone", "xval", "digits")]


@pytest.mark.parametrize("family,encoding", CASES, ids=[f"{f}-{e}" for f, e in CASES])
def test_training_updates_only_adapter_and_logs_components(store, tmp_path, family, encoding):
    model, ntok, config = build(store, family, encoding)
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    trained = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    args = (seq2seq_args if family == "t5" else sft_args)(tmp_path, max_steps=15, per_device_eval_batch_size=16)
    data = arithmetic(16)
    cls = NumberSeq2SeqTrainer if family == "t5" else NumberSFTTrainer
    trainer = cls(model=model, args=args, train_dataset=data, eval_dataset=data, processing_class=ntok)
    before = trainer.evaluate()
    trainer.train()
    after = trainer.evaluate()
    assert after["eval_loss"] < before["eval_loss"] and after["eval_lm_loss"] < before["eval_lm_loss"]
    if encoding != "digits":
        assert after["eval_number_loss"] < before["eval_number_loss"]
    logs = train_logs(trainer)
    assert len(logs) == 15
    for entry in logs:
        assert EXPECTED_COMPONENTS[encoding] <= entry.keys()
        assert math.isclose(entry["loss"], expected_loss(entry, config), rel_tol=1e-4, abs_tol=1e-5)
    params = dict(model.named_parameters())
    for name, value in frozen.items():
        assert torch.equal(params[name], value), name
    changed = {name for name, value in trained.items() if not torch.equal(params[name], value)}
    assert any(".lora_B." in n for n in changed) and any("trainable_tokens_delta" in n for n in changed)
    assert changed >= {n for n in trained if ".number_modules." in n}
    assert any(".number_modules." in n for n in trained) == (encoding != "digits")


def test_number_columns_survive_and_fused_head_is_removed(store, tmp_path):
    model, ntok, _ = build(store, "llama", "fone")
    trainer = trainer_for("llama", model, ntok, arithmetic(8), sft_args(tmp_path, max_steps=1))
    assert trainer.args.remove_unused_columns
    assert "forward" not in model.get_base_model().__dict__  # TRL's fused LM head patch is undone
    batch = next(iter(trainer.get_train_dataloader()))
    assert {"num_mask", "num_digits", "num_sign", "num_values", "labels"} <= batch.keys()
    assert torch.equal(batch["num_mask"].bool(), batch["input_ids"] == ntok.num_token_id)
    assert batch["num_mask"].sum() == 3 * 4  # three numbers per example
    model.train()
    with torch.no_grad():
        own = model(**batch, num_items_in_batch=torch.tensor(7))
        loss = trainer.compute_loss(model, batch, num_items_in_batch=torch.tensor(7))
    assert torch.equal(loss, own.loss)
    assert own.number_loss > 0 and not torch.equal(own.loss, own.lm_loss)


def first_step(store, tmp_path, batch: int, accumulation: int) -> tuple[dict, dict]:
    """Loss logs and gradients of one optimizer step on the same 8 examples."""
    model, ntok, _ = build(store, "llama", "fone")
    grads: dict[str, torch.Tensor] = {}

    class Grab(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            grads.update({n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None})

    args = sft_args(tmp_path / f"b{batch}", max_steps=1, per_device_train_batch_size=batch,
                    gradient_accumulation_steps=accumulation)  # fmt: skip
    trainer = NumberSFTTrainer(model=model, args=args, train_dataset=arithmetic(8, seed=3), processing_class=ntok,
                               callbacks=[Grab()])  # fmt: skip
    trainer.train()
    return train_logs(trainer)[0], grads


def test_gradient_accumulation_matches_one_large_batch(store, tmp_path):
    big_log, big_grads = first_step(store, tmp_path, batch=8, accumulation=1)
    small_log, small_grads = first_step(store, tmp_path, batch=2, accumulation=4)
    for key in ("loss", "lm_loss", "number_loss"):
        assert math.isclose(small_log[key], big_log[key], rel_tol=0, abs_tol=1e-5), key
    assert big_grads.keys() == small_grads.keys() and any(".number_modules." in n for n in big_grads)
    for name, grad in big_grads.items():
        torch.testing.assert_close(small_grads[name], grad, rtol=0, atol=1e-5, msg=name)


def test_components_average_over_the_logging_interval(store, tmp_path):
    runs, seen = {}, []

    class Recorder(TrainerCallback):  # what TensorBoard / W&B receive
        def on_log(self, args, state, control, logs=None, **kwargs):
            seen.append(dict(logs))

    for every in (1, 2):
        model, ntok, _ = build(store, "llama", "fone")
        args = sft_args(tmp_path / f"log{every}", max_steps=4, logging_steps=every)
        trainer = trainer_for("llama", model, ntok, arithmetic(16), args)
        trainer.add_callback(Recorder())
        trainer.train()
        runs[every] = train_logs(trainer)
    assert sum({"lm_loss", "number_loss"} <= entry.keys() for entry in seen) == 4 + 2
    assert [e["step"] for e in runs[2]] == [2, 4]
    for i, entry in enumerate(runs[2]):
        for key in ("loss", "lm_loss", "number_loss"):
            mean = (runs[1][2 * i][key] + runs[1][2 * i + 1][key]) / 2
            assert math.isclose(entry[key], mean, rel_tol=1e-5), key


def test_evaluate_logs_components(store, tmp_path):
    model, ntok, config = build(store, "llama", "xval")
    args = sft_args(tmp_path, max_steps=1, per_device_eval_batch_size=4)
    trainer = NumberSFTTrainer(model=model, args=args, train_dataset=arithmetic(8), eval_dataset=arithmetic(8, 1),
                               processing_class=ntok)  # fmt: skip
    metrics = trainer.evaluate()
    assert {"eval_loss", "eval_lm_loss", "eval_number_loss"} <= metrics.keys()
    recombined = metrics["eval_lm_loss"] + config.number_loss_weight * metrics["eval_number_loss"]
    assert math.isclose(metrics["eval_loss"], recombined, rel_tol=1e-5)
    raw = trainer.evaluate(eval_dataset=arithmetic(4, 2))  # a raw text dataset passed to evaluate is prepared too
    assert raw["eval_number_loss"] > 0


def run_with_checkpoints(store, tmp_path, family, resume_from=None, seed=0):
    model, ntok, _ = build(store, family, "fone", seed=seed)
    snapshots = {}

    class Snapshot(TrainerCallback):
        def on_save(self, args, state, control, model=None, **kwargs):
            snapshots[state.global_step] = {n: p.detach().clone() for n, p in model.named_parameters()
                                            if ".number_modules." in n}  # fmt: skip

    common = dict(max_steps=6, save_strategy="steps", save_steps=3)
    args = (seq2seq_args if family == "t5" else sft_args)(tmp_path, **common)
    trainer = trainer_for(family, model, ntok, arithmetic(16), args)
    trainer.add_callback(Snapshot())
    trainer.train(resume_from_checkpoint=resume_from)
    return {e["step"]: e["loss"] for e in train_logs(trainer)}, snapshots


@pytest.mark.parametrize("family", ["llama", "t5"])
def test_resume_gives_the_same_losses_and_checkpoints_hold_number_modules(store, tmp_path, family):
    full, snapshots = run_with_checkpoints(store, tmp_path, family)
    checkpoint = tmp_path / "out" / "checkpoint-3"
    saved = load_file(str(checkpoint / "adapter_model.safetensors"))
    number_keys = [k for k in saved if ".number_modules." in k]
    assert number_keys and any("lora_B" in k for k in saved) and any("trainable_tokens" in k for k in saved)
    for name, value in snapshots[3].items():  # the checkpoint holds the number modules as they were at step 3
        key = name.replace(".default.", ".")
        assert key in saved and torch.equal(saved[key], value), name
    settings = json.loads((checkpoint / "number_tokenizer_config.json").read_text())
    assert settings["encoding"] == "fone"
    resumed, _ = run_with_checkpoints(store, tmp_path, family, resume_from=str(checkpoint), seed=123)
    assert sorted(resumed) == [1, 2, 3, 4, 5, 6]  # 1-3 come from the checkpoint's trainer_state.json
    for step in (4, 5, 6):
        assert abs(resumed[step] - full[step]) <= 1e-6, (step, resumed[step], full[step])


def test_peft_config_wraps_a_base_model(store, tmp_path):
    tokenizer = store.tokenizer("digits")
    config = NumberAdapterConfig(encoding="xval", int_digits=4, frac_digits=2, r=4, target_modules=["q_proj"])
    base = store.base("granite", tie=False, hidden=HIDDEN)
    trainer = NumberSFTTrainer(model=base, args=sft_args(tmp_path, max_steps=2), train_dataset=arithmetic(8),
                               processing_class=tokenizer, peft_config=config)  # fmt: skip
    trainer.train()
    assert trainer.model.peft_config["default"] is config and config.num_token_id is not None
    assert all("number_loss" in entry for entry in train_logs(trainer))


@pytest.mark.parametrize(
    "overrides,match",
    [
        ({"completion_only_loss": True, "formatting": True}, "completion_only_loss=False"),
        ({"packing": True}, "packing=False"),
        ({"padding_free": True}, "padding_free=False"),
        ({"loss_type": "dft"}, "loss_type='nll'"),
        ({"label_smoothing_factor": 0.1}, "label_smoothing_factor"),
    ],
)
def test_unsupported_sft_settings_are_refused(store, tmp_path, overrides, match):
    model, ntok, _ = build(store, "llama", "fone")
    overrides = dict(overrides)
    formatting = (lambda example: example["prompt"]) if overrides.pop("formatting", False) else None
    with pytest.raises(ValueError, match=match):
        NumberSFTTrainer(model=model, args=sft_args(tmp_path, **overrides), train_dataset=arithmetic(4),
                         processing_class=ntok, formatting_func=formatting)  # fmt: skip


def test_bad_models_and_tokenizers_are_refused(store, tmp_path):
    model, ntok, _ = build(store, "llama", "fone")
    args = sft_args(tmp_path)
    with pytest.raises(TypeError, match="numadapter PeftModel"):
        NumberSFTTrainer(model=store.base("llama", tie=False, hidden=HIDDEN), args=args, train_dataset=arithmetic(4),
                         processing_class=ntok)  # fmt: skip
    other = NumberTokenizer(store.tokenizer("digits"), NumberAdapterConfig(encoding="fone", int_digits=6))
    with pytest.raises(ValueError, match="int_digits"):
        NumberSFTTrainer(model=model, args=args, train_dataset=arithmetic(4), processing_class=other)
    with pytest.raises(ValueError, match="processing_class"):
        NumberSFTTrainer(model=model, args=args, train_dataset=arithmetic(4))
    t5, t5_tok, _ = build(store, "t5", "fone")
    with pytest.raises(ValueError, match="predict_with_generate"):
        NumberSeq2SeqTrainer(model=t5, args=seq2seq_args(tmp_path, predict_with_generate=True),
                             train_dataset=arithmetic(4), processing_class=t5_tok)  # fmt: skip
    with pytest.raises(TypeError, match="NumberSFTTrainer for causal"):
        NumberSeq2SeqTrainer(model=model, args=seq2seq_args(tmp_path), train_dataset=arithmetic(4),
                             processing_class=ntok)  # fmt: skip


def test_gradient_checkpointing_gives_the_same_step(store, tmp_path):
    logs = {}
    for checkpointing in (False, True):
        model, ntok, _ = build(store, "llama", "fone")
        args = sft_args(tmp_path / str(checkpointing), max_steps=2, gradient_checkpointing=checkpointing)
        trainer = trainer_for("llama", model, ntok, arithmetic(8), args)
        trainer.train()
        logs[checkpointing] = train_logs(trainer)
    for plain, checkpointed in zip(logs[False], logs[True]):
        for key in ("loss", "number_loss", "grad_norm"):
            assert math.isclose(plain[key], checkpointed[key], rel_tol=1e-5), key


def test_checkpoint_directory_loads_as_a_peft_model(store, tmp_path):
    import peft

    model, ntok, _ = build(store, "llama", "fone")
    args = sft_args(tmp_path, max_steps=2, save_strategy="steps", save_steps=2)
    trainer = trainer_for("llama", model, ntok, arithmetic(8), args)
    trainer.train()
    checkpoint = os.path.join(args.output_dir, "checkpoint-2")
    batch = next(iter(trainer.get_train_dataloader()))
    model.eval()
    with torch.no_grad():
        want = model(**batch).loss
    loaded = peft.PeftModel.from_pretrained(store.base("llama", tie=False, hidden=HIDDEN), checkpoint).eval()
    reloaded_ntok = NumberTokenizer.from_pretrained(checkpoint)
    assert reloaded_ntok.num_token_id == ntok.num_token_id
    with torch.no_grad():
        got = loaded(**batch).loss
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
