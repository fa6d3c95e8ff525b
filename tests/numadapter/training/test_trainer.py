"""NumberSFTTrainer / NumberSeq2SeqTrainer end to end on tiny Llama, Granite and T5 with every encoding."""

from __future__ import annotations

import collections
import json
import math
import os
import pickle
import random
import re

import datasets
import pytest
import torch
from helpers.adapter_cases import Store
from helpers.generation_cases import output_rows
from helpers.training_cases import arithmetic, sft_args
from safetensors.torch import load_file
from transformers import Seq2SeqTrainingArguments, TrainerCallback

import numadapter
from numadapter.config import NumberAdapterConfig
from numadapter.mapping import get_peft_model
from numadapter.tokenization import NumberTokenizer
from numadapter.training.seq2seq import NumberSeq2SeqTrainer
from numadapter.training.sft import NumberSFTTrainer
from numadapter.tuner.alignment import causal_lm_labels
from numadapter.tuner.loss import count_aggregate_numbers

TOKENIZER_OF = {"llama": "digits", "granite": "digits", "t5": "t5"}
TARGETS = {"llama": ["q_proj", "v_proj"], "granite": ["q_proj", "v_proj"], "t5": ["q", "v"]}
HIDDEN = 32
ENCODING_SETTINGS = {
    "fone": {"fone_numbers": "all"},  # every number a [NUM]: the trainer machinery these tests check
    "xval": {"xval_scale": 100.0},
    "digits": {"aggregate": True, "aggregate_loss_lambda": 0.5, "ntl_weight": 0.3},
}


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


def mixed(n: int, seed: int = 0) -> datasets.Dataset:
    """Completions with 1 to 3 numbers (decimals: two digit runs), so micro-batches hold different number counts."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b = rng.randrange(100), rng.randrange(1, 1000)
        completion = [f" It is {a + b}.", f" {a} plus {b} is {a + b}.", f" It is {a + b}.5 or {b}."][i % 3]
        rows.append({"prompt": f"What is {a} plus {b}?", "completion": completion})
    return datasets.Dataset.from_list(rows)


# every loss component: CE, the head loss, NTL on the FoNE head / on the LM's digit tokens, the aggregate loss
ACCUMULATION_CASES = {
    "llama-fone-ntl": (
        "llama",
        "fone",
        {"ntl_weight": 0.3, "fone_head_input": "linear"},
        {"lm_loss", "number_loss", "ntl_loss"},
    ),  # NTL is on the paper's digit head; the context head gets none
    "llama-xval-ntl": ("llama", "xval", {"ntl_weight": 0.3}, {"lm_loss", "number_loss", "ntl_loss"}),
    "llama-digits": ("llama", "digits", {}, {"lm_loss", "ntl_loss", "aggregate_loss"}),
    "t5-digits": ("t5", "digits", {}, {"lm_loss", "ntl_loss", "aggregate_loss"}),
}


def no_dropout(model) -> None:
    """T5 configs default to dropout 0.1: different batch shapes would draw different masks."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        elif isinstance(getattr(module, "dropout", None), float):  # T5Attention: functional dropout on the weights
            module.dropout = 0.0


def digits_lead(model, config) -> None:
    """Shrinks the LM head's non-digit rows so a digit is the argmax at most positions: otherwise the untrained
    model's L_AUX is footnote 2's constant 20 for every number, which has no gradient."""
    weight = model.get_base_model().get_output_embeddings().token_adapter.base_layer.weight
    other = torch.ones(weight.shape[0], dtype=torch.bool)
    other[config.digit_token_ids] = False
    with torch.no_grad():
        weight[other] *= 0.05


def first_step(store, tmp_path, case: str, batch: int, accumulation: int) -> tuple[dict, dict]:
    """Loss logs and gradients of one optimizer step on the same 8 examples."""
    family, encoding, overrides, _ = ACCUMULATION_CASES[case]
    model, ntok, config = build(store, family, encoding, **overrides)
    no_dropout(model)
    if encoding == "digits":
        digits_lead(model, config)
    grads: dict[str, torch.Tensor] = {}

    class Grab(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            grads.update({n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None})

    args = (seq2seq_args if family == "t5" else sft_args)(
        tmp_path / f"b{batch}",
        max_steps=1,
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=accumulation,
    )
    trainer = trainer_for(family, model, ntok, mixed(8, seed=3), args)
    trainer.add_callback(Grab())
    trainer.train()
    return train_logs(trainer)[0], grads


@pytest.mark.parametrize("case", list(ACCUMULATION_CASES))
def test_gradient_accumulation_matches_one_large_batch(store, tmp_path, case):
    big_log, big_grads = first_step(store, tmp_path, case, batch=8, accumulation=1)
    small_log, small_grads = first_step(store, tmp_path, case, batch=2, accumulation=4)
    components = ACCUMULATION_CASES[case][3]
    assert components <= big_log.keys() and components <= small_log.keys()
    if "aggregate_loss" in components:
        assert big_log["aggregate_loss"] < 15  # mostly digit predictions: eq. 2's distances, not footnote 2's 20
    for key in ("loss", *components):
        assert math.isclose(small_log[key], big_log[key], rel_tol=0, abs_tol=1e-5), (key, small_log[key], big_log[key])
    assert big_grads.keys() == small_grads.keys() and any("lora_B" in n for n in big_grads)
    if "number_loss" in components:
        assert any(".number_modules." in n for n in big_grads)
    for name, grad in big_grads.items():
        torch.testing.assert_close(small_grads[name], grad, rtol=0, atol=1e-5, msg=name)


def test_aggregate_numbers_differ_between_micro_batches(store, tmp_path):
    """The accumulation data really tests M: micro-batches of 2 hold different counts of scored numbers."""
    model, ntok, config = build(store, "llama", "digits")
    trainer = trainer_for("llama", model, ntok, mixed(8, seed=3), sft_args(tmp_path, per_device_train_batch_size=2))
    counts = [
        int(count_aggregate_numbers(causal_lm_labels(batch["labels"]), config.digit_token_ids))
        for batch in trainer.get_train_dataloader()
    ]
    assert len(counts) == 4 and len(set(counts)) > 1 and min(counts) >= 2, counts


@pytest.mark.parametrize("case", ["llama-digits", "llama-fone-ntl"])
def test_two_processes_count_every_component_once(store, tmp_path, case, monkeypatch):
    """Two DDP ranks simulated in one process: N and M are global, each rank's loss is scaled by the process count
    (as the Trainer does with average_tokens_across_devices) and DDP averages the gradients: the result must be the
    loss and gradients of the whole batch in one process."""
    family, encoding, overrides, components = ACCUMULATION_CASES[case]
    model, ntok, config = build(store, family, encoding, **overrides)
    if encoding == "digits":
        digits_lead(model, config)
    trainer = trainer_for(family, model, ntok, mixed(8, seed=3), sft_args(tmp_path, per_device_train_batch_size=8))
    assert trainer.args.average_tokens_across_devices
    batch = next(iter(trainer.get_train_dataloader()))
    halves = [{k: v[:4] if torch.is_tensor(v) else v[:4] for k, v in batch.items()},
              {k: v[4:] if torch.is_tensor(v) else v[4:] for k, v in batch.items()}]  # fmt: skip
    params = [p for p in model.parameters() if p.requires_grad]
    model.train()

    def run(batches: list[dict], processes: int) -> tuple[float, list[torch.Tensor], dict]:
        model.zero_grad()
        count = trainer._get_num_items_in_batch(batches, torch.device("cpu"))  # after a gather: all ranks' batches
        losses = []
        for part in batches:  # one micro-batch per rank
            loss = trainer.compute_loss(model, part, num_items_in_batch=count)
            (loss / processes).backward()  # DDP averages the gradients of the ranks
            losses.append(loss.item())
        logged = trainer._loss_meter.pop_train(trainer._loss_meter.last_step + 1, processes)
        return sum(losses) / processes, [p.grad.clone() for p in params], logged  # the Trainer logs the rank mean

    one_loss, one_grads, one_logged = run([batch], 1)
    monkeypatch.setattr(type(trainer.accelerator), "num_processes", property(lambda self: 2))
    two_loss, two_grads, two_logged = run(halves, 2)
    assert math.isclose(two_loss, one_loss, rel_tol=0, abs_tol=1e-5), (two_loss, one_loss)
    assert components <= one_logged.keys() and one_logged.get("aggregate_loss", 0) < 15
    for key in components:
        assert math.isclose(two_logged[key], one_logged[key], rel_tol=0, abs_tol=1e-5), key
    for one, two in zip(one_grads, two_grads):
        torch.testing.assert_close(two, one, rtol=0, atol=1e-5)


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


PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
SAFE_STATE = {"optimizer.json", "optimizer.safetensors", "scheduler.json", "rng_state.json", "rng_state.safetensors",
              "training_args.json", "trainer_state.json", "adapter_model.safetensors"}  # fmt: skip


@pytest.mark.parametrize("family", ["llama", "t5"])
def test_resume_gives_the_same_losses_and_checkpoints_hold_number_modules(store, tmp_path, family, monkeypatch):
    full, snapshots = run_with_checkpoints(store, tmp_path, family)
    checkpoint = tmp_path / "out" / "checkpoint-3"
    files = {path.relative_to(checkpoint).as_posix() for path in checkpoint.rglob("*") if path.is_file()}
    assert SAFE_STATE <= files, sorted(files)
    # docs/DESIGN.md, "Safe to load"
    assert not [name for name in files if name.endswith(PICKLE_SUFFIXES)], sorted(files)
    args = json.loads((checkpoint / "training_args.json").read_text())
    assert args["save_steps"] == 3 and args["max_steps"] == 6
    saved = load_file(str(checkpoint / "adapter_model.safetensors"))
    number_keys = [k for k in saved if ".number_modules." in k]
    assert number_keys and any("lora_B" in k for k in saved) and any("trainable_tokens" in k for k in saved)
    for name, value in snapshots[3].items():  # the checkpoint holds the number modules as they were at step 3
        key = name.replace(".default.", ".")
        assert key in saved and torch.equal(saved[key], value), name
    settings = json.loads((checkpoint / "number_tokenizer_config.json").read_text())
    assert settings["encoding"] == "fone"

    def no_unpickling(*args, **kwargs):
        raise AssertionError(f"resuming unpickled {args[:1]}")

    monkeypatch.setattr(torch, "load", no_unpickling)
    monkeypatch.setattr(pickle, "load", no_unpickling)
    monkeypatch.setattr(pickle, "loads", no_unpickling)
    resumed, _ = run_with_checkpoints(store, tmp_path, family, resume_from=str(checkpoint), seed=123)
    assert sorted(resumed) == [1, 2, 3, 4, 5, 6]  # 1-3 come from the checkpoint's trainer_state.json
    for step in (4, 5, 6):
        assert abs(resumed[step] - full[step]) <= 1e-6, (step, resumed[step], full[step])


def test_peft_config_wraps_a_base_model(store, tmp_path):
    tokenizer = store.tokenizer("digits")
    config = NumberAdapterConfig(encoding="xval", int_digits=4, frac_digits=2, r=4, target_modules=["q_proj"],
                                 xval_scale=100.0)  # fmt: skip  # nothing left to fit: the trainer keeps this object
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
        ({"packing": True, "packing_strategy": "wrapped"}, "packing_strategy='bfd'"),
        ({"packing": True, "answer_format": "head"}, "answer_format='head'"),
        ({"padding_free": True}, "padding_free=False"),
        ({"loss_type": "dft"}, "loss_type='nll'"),
        ({"label_smoothing_factor": 0.1}, "label_smoothing_factor"),
    ],
)
def test_unsupported_sft_settings_are_refused(store, tmp_path, overrides, match):
    model, ntok, _ = build(store, "llama", "fone")
    overrides = dict(overrides)
    formatting = (lambda example: example["prompt"]) if overrides.pop("formatting", False) else None
    answer_format = overrides.pop("answer_format", "sequence")
    with pytest.raises(ValueError, match=match):
        NumberSFTTrainer(model=model, args=sft_args(tmp_path, **overrides), train_dataset=arithmetic(4),
                         processing_class=ntok, formatting_func=formatting, answer_format=answer_format)  # fmt: skip


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
    trainer = NumberSeq2SeqTrainer(model=t5, args=seq2seq_args(tmp_path, predict_with_generate=True),
                                   train_dataset=arithmetic(4), processing_class=t5_tok)  # fmt: skip
    with pytest.raises(ValueError, match="prompt/completion"):  # prepared data has no prompt text to generate for
        trainer.predict(trainer.train_dataset)
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


@pytest.mark.parametrize("compute_loss_func", [False, True], ids=["fused-head", "compute-loss-func"])
def test_plain_sft_trainer_on_a_number_model_names_number_sft_trainer(store, tmp_path, compute_loss_func):
    """A plain trl.SFTTrainer neither feeds the number tensors nor computes the number loss: refused at its first
    training forward with an error naming numadapter.NumberSFTTrainer (never TRL's own TypeError)."""
    import trl

    model, ntok, _ = build(store, "llama", "fone")
    extra = {"compute_loss_func": lambda outputs, labels, num_items_in_batch=None: outputs.logits.sum()}
    trainer = trl.SFTTrainer(model=model, args=sft_args(tmp_path, max_steps=1), train_dataset=arithmetic(4),
                             processing_class=ntok.tokenizer, **(extra if compute_loss_func else {}))  # fmt: skip
    with pytest.raises(TypeError, match=r"plain trl\.SFTTrainer.*numadapter\.NumberSFTTrainer\(") as info:
        trainer.train()
    assert "not subscriptable" not in str(info.value)


def sums(n: int, seed: int = 0) -> datasets.Dataset:
    """Prompts whose completion is the number alone: a few steps teach a tiny model to answer with [NUM]."""
    rows = arithmetic(n, seed).to_list()
    return datasets.Dataset.from_list([{**r, "completion": " " + r["completion"].split()[-1][:-1]} for r in rows])


def make_it_answer_with_numbers(model, ntok, prompts: list[str]) -> None:
    """Sets the [NUM] output row to a multiple of the most generated token's row until some answer holds a number
    (a negative multiple too: that token's logit may be below 0)."""
    out = numadapter.generate(model, ntok, prompts, max_new_tokens=6, return_dict=True)
    common = collections.Counter(t for ids in out.token_ids for t in ids).most_common(1)[0][0]
    row = model.base_model.model.get_output_embeddings().weight[common].detach().clone()
    for scale in (1.5, 3.0, 0.0, -1.0, -3.0):
        with torch.no_grad():
            output_rows(model)[0] = row * scale
        if any(numadapter.generate(model, ntok, prompts, max_new_tokens=6, return_dict=True).numbers):
            return


def answer_scores(texts: list[str], references: list[str]) -> tuple[float, float, int]:
    """Exact match and MAE of the last number, by hand (a regex, not numadapter's parser)."""
    correct, errors, answered = 0, [], 0
    for text, reference in zip(texts, references):
        want = float(re.findall(r"-?\d+(?:\.\d+)?", reference)[-1])
        found = re.findall(r"-?\d+(?:\.\d+)?", text)
        if not found:
            continue
        answered += 1
        correct += float(found[-1]) == want
        errors.append(abs(float(found[-1]) - want))
    return correct / len(texts), (sum(errors) / len(errors) if errors else math.nan), answered


def test_seq2seq_predict_with_generate_gives_numadapter_generate_answers(store, tmp_path):
    model, ntok, _ = build(store, "t5", "fone", seed=1)
    args = seq2seq_args(tmp_path, max_steps=12, predict_with_generate=True, per_device_eval_batch_size=3)
    data = sums(6, 3)
    trainer = NumberSeq2SeqTrainer(model=model, args=args, train_dataset=sums(16), eval_dataset=data,
                                   processing_class=ntok, compute_metrics=numadapter.AnswerMetrics())  # fmt: skip
    trainer.train()
    make_it_answer_with_numbers(model, ntok, list(data["prompt"]))  # the [NUM] row pushed up: numbers get generated
    out = trainer.predict(data, max_new_tokens=6)
    expected = numadapter.generate(model, ntok, list(data["prompt"]), max_new_tokens=6, return_dict=True)
    assert out.texts == expected.completions and out.numbers == expected.numbers
    assert any(expected.numbers), "the trained T5 generates no number: the comparison would not test the numbers"
    for row, ids in zip(out.predictions.tolist(), expected.token_ids):
        assert row[: len(ids)] == ids and set(row[len(ids) :]) <= {-100}
    exact, mae, answered = answer_scores(expected.completions, list(data["completion"]))
    assert out.metrics["test_exact_match"] == exact and out.metrics["test_answered"] == answered
    assert answered > 0 and math.isclose(out.metrics["test_mae"], mae, rel_tol=1e-9)
    metrics = trainer.evaluate(max_new_tokens=6)  # evaluate generates too, with the loss
    assert metrics["eval_exact_match"] == exact and "eval_loss" in metrics


def test_sft_answer_metrics_generate_for_the_eval_prompts(store, tmp_path):
    model, ntok, _ = build(store, "llama", "fone", seed=1)
    data = sums(6, 3)
    seen = []

    def recording(prediction):
        seen.append(prediction)
        return numadapter.AnswerMetrics()(prediction)

    recording.generates, recording.max_new_tokens = True, 6
    trainer = NumberSFTTrainer(model=model, args=sft_args(tmp_path, max_steps=12, per_device_eval_batch_size=4),
                               train_dataset=sums(16), eval_dataset=data, processing_class=ntok,
                               compute_metrics=recording)  # fmt: skip
    trainer.train()
    make_it_answer_with_numbers(model, ntok, list(data["prompt"]))
    metrics = trainer.evaluate()
    expected = numadapter.generate(model, ntok, list(data["prompt"]), max_new_tokens=6, return_dict=True)
    (prediction,) = seen
    assert prediction.texts == expected.completions and prediction.numbers == expected.numbers
    assert prediction.prompts == list(data["prompt"]) and prediction.references == list(data["completion"])
    exact, mae, answered = answer_scores(expected.completions, list(data["completion"]))
    assert answered > 0, f"no generated answer holds a number ({expected.completions}): nothing is compared"
    assert metrics["eval_exact_match"] == exact and metrics["eval_answered"] == answered
    assert math.isclose(metrics["eval_mae"], mae, rel_tol=1e-9)
    assert metrics["eval_examples"] == 6 and "eval_loss" in metrics and "eval_number_loss" in metrics
    named = trainer.evaluate(eval_dataset={"sums": data})  # a dict of raw datasets: each generates under its name
    assert named["eval_sums_exact_match"] == exact and named["eval_sums_answered"] == answered


def test_generating_metrics_need_prompt_completion_text(store, tmp_path):
    model, ntok, _ = build(store, "llama", "fone")
    messages = datasets.Dataset.from_list([{"messages": [{"role": "user", "content": "1 + 2?"},
                                                         {"role": "assistant", "content": "3"}]}] * 2)  # fmt: skip
    trainer = NumberSFTTrainer(model=model, args=sft_args(tmp_path, max_steps=1), train_dataset=arithmetic(4),
                               processing_class=ntok, compute_metrics=numadapter.AnswerMetrics())  # fmt: skip
    with pytest.raises(ValueError, match="prompt/completion"):
        trainer.evaluate(eval_dataset=messages)


@pytest.mark.parametrize("encoding", ["fone", "xval", "digits"])
@pytest.mark.parametrize("max_length", [64, 1024], ids=["several-packs", "one-pack"])
@pytest.mark.parametrize("kind", ["prompt-completion", "text"])
def test_packing_gives_the_unpacked_loss(store, tmp_path, encoding, max_length, kind):
    data = arithmetic(8, 5)
    if kind == "text":  # every token is trained: an example's first token must not be predicted from the last one
        data = datasets.Dataset.from_dict({"text": [p + c for p, c in zip(data["prompt"], data["completion"])]})
    logs = {}
    for packing in (False, True):
        model, ntok, _ = build(store, "llama", encoding)
        no_dropout(model)
        args = sft_args(tmp_path / str(packing), max_steps=1, per_device_train_batch_size=8, packing=packing,
                        max_length=max_length, per_device_eval_batch_size=8)  # fmt: skip
        trainer = NumberSFTTrainer(model=model, args=args, train_dataset=data, processing_class=ntok)
        if packing:
            packs = [len(row["pack"]) for row in trainer.train_dataset]
            assert sum(packs) == 8 and (len(packs) > 1) == (max_length == 64), packs
        evaluated = trainer.evaluate(eval_dataset=data)  # eval_packing follows packing: raw data is packed too
        trainer.train()
        logs[packing] = {**train_logs(trainer)[0], **evaluated}
    for key in EXPECTED_COMPONENTS[encoding] | {"loss"}:
        assert math.isclose(logs[True][key], logs[False][key], rel_tol=1e-5), (key, logs)
        assert math.isclose(logs[True][f"eval_{key}"], logs[False][f"eval_{key}"], rel_tol=1e-5), (key, logs)
