"""Tests of the harness's product train path (``--train-path product``): numadapter methods trained by
`numadapter.NumberSFTTrainer` and answered by `numadapter.generate`.

Expected values are written by hand (step counts, warmup steps, file names) or taken from the harness's own encoder
(the tensors the harness loop would feed), never from the code under test.
"""

from __future__ import annotations

import json

import pytest
import torch

from eval_harness.cli import main
from eval_harness.runner import RunSpec

BASE = dict(preset="p", experiment="e", task="fone_decimal_add_6", train_size=8)


def test_product_path_is_validated_and_named_in_the_run_id():
    with pytest.raises(ValueError, match="plain method"):
        RunSpec(**BASE, method="digits", train_path="product")
    with pytest.raises(ValueError, match="`train_path` must be one of"):
        RunSpec(**BASE, method="fone", train_path="trainer")
    with pytest.raises(ValueError, match="no validation curve"):
        RunSpec(**BASE, method="fone", train_path="product", n_valid=8, eval_every=1)
    assert RunSpec(**BASE, method="fone", train_path="product").run_id == "fone-n8-m4-s0-product"
    assert RunSpec(**BASE, method="fone").run_id == "fone-n8-m4-s0"
    harness, product = RunSpec(**BASE, method="fone"), RunSpec(**BASE, method="fone", train_path="product")
    assert harness.group_key != product.group_key  # never trained in one lockstep group


def test_sft_config_carries_the_runs_budget(tmp_path):
    from eval_harness.product import sft_config

    spec = RunSpec(
        **BASE, method="fone_feature", train_path="product", epochs=14, batch_size=64, lr=1e-3, warmup=0.14,
        weight_decay=0.1, seed=3,
    )  # fmt: skip
    args = sft_config(spec, steps_per_epoch=50, output_dir=tmp_path)
    assert args.num_train_epochs == 14 and args.per_device_train_batch_size == 64
    assert args.learning_rate == 1e-3 and args.weight_decay == 0.1 and args.max_grad_norm == 1.0
    assert args.warmup_steps == 98  # int(0.14 * 700), as the harness loop's warmup
    assert str(getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type)) == "cosine"
    assert args.seed == 3 and args.data_seed == 3 and args.optim == "adamw_torch"
    with pytest.raises(ValueError, match="'wsd' has none"):
        sft_config(RunSpec(**BASE, method="fone", train_path="product", schedule="wsd"), 1, tmp_path)
    capped = RunSpec(**BASE, method="fone", train_path="product", epochs=14, batch_size=4, warmup=0.14, max_steps=20)
    args = sft_config(capped, steps_per_epoch=2, output_dir=tmp_path)
    assert args.max_steps == 20 and args.warmup_steps == 2  # int(0.14 * min(28, 20))
    assert sft_config(spec, steps_per_epoch=50, output_dir=tmp_path).max_steps == -1  # no cap: the epochs


def test_pretrained_preset_on_the_product_path_keeps_its_step_budget_and_curve(tmp_path):
    out = tmp_path / "out"
    main(["run", "--preset", "pretrained", "--methods", "fone", "--train-path", "product", "--max-steps", "2",
          "--train-sizes", "8", "--batch-size", "2", "--n-test", "2", "--n-valid", "2", "--eval-every-steps", "1",
          "--threads", "1", "--out", str(out)])  # fmt: skip
    result = json.loads((out / "addition" / "fone-n8-lora-s0-product.json").read_text())
    assert result["product_training"]["global_steps"] == result["timing"]["optimizer_steps"] == 2  # of 4 per epoch
    assert [p["step"] for p in result["step_curve"]] == [1, 2]
    assert result["step_curve"][0]["train_s"] < result["step_curve"][1]["train_s"] <= result["timing"]["train_s"]


def test_product_data_is_what_the_harness_head_format_feeds(tmp_path):
    """NumberSFTTrainer's preparation + NumberDataCollator(answer_format="head") give the harness loop's tensors."""
    import numadapter
    from eval_harness.arms import get_method
    from eval_harness.arms.encode import number_places
    from eval_harness.arms.models import TABLE6, build
    from eval_harness.product import product_dataset
    from eval_harness.tasks import get_task

    examples = get_task("fone_decimal_add_6").generate("train", 6, seed=0)
    built = build(
        get_method("fone_feature"), "scratch", workdir=tmp_path, seed=0, places=number_places(list(examples)),
        size=TABLE6[1],
    )  # fmt: skip
    expected = built.codec.encode(examples).head_batch(torch.arange(6), "cpu")
    ntok = built.number_tokenizer
    data = numadapter.prepare_dataset(product_dataset(examples), ntok)
    collator = numadapter.NumberDataCollator.from_tokenizer(ntok, completion_only_loss=True, answer_format="head")
    got = collator([data[i] for i in range(6)])
    assert expected["input_ids"].shape == (6, 5)  # bos [NUM] + [NUM] =
    for key, value in expected.items():
        assert torch.equal(got[key].to(value.dtype), value), key


def test_tiny_preset_trains_numadapter_methods_through_the_trainer(tmp_path, capsys, monkeypatch):
    import numadapter
    from eval_harness import runner

    trained, looped = [], []
    original_train, original_epoch = numadapter.NumberSFTTrainer.train, runner._Run.epoch

    def spy_train(self, *args, **kwargs):
        trained.append(len(self.train_dataset))
        return original_train(self, *args, **kwargs)

    def spy_epoch(self, *args, **kwargs):
        looped.append(self.spec.method)
        return original_epoch(self, *args, **kwargs)

    monkeypatch.setattr(numadapter.NumberSFTTrainer, "train", spy_train)
    monkeypatch.setattr(runner._Run, "epoch", spy_epoch)
    out = tmp_path / "results"
    argv = ["run", "--preset", "tiny", "--out", str(out), "--threads", "1", "--seed", "5", "--train-path", "product"]
    assert main(argv) == 0
    assert "the plain methods digits keep the harness loop" in capsys.readouterr().out
    assert trained == [16, 32]  # one NumberSFTTrainer per fone run
    assert looped == ["digits", "digits"]  # the harness loop trained only the plain method
    files = sorted(p.name for p in (out / "data_size").glob("*.json"))
    assert files == [
        "digits-n16-m1-s5.json", "digits-n32-m1-s5.json", "fone-n16-m1-s5-product.json", "fone-n32-m1-s5-product.json"
    ]  # fmt: skip
    result = json.loads((out / "data_size" / "fone-n32-m1-s5-product.json").read_text())
    assert result["train_path"] == "product" and result["config"]["train_path"] == "product"
    training = result["product_training"]
    assert training["trainer"] == "numadapter.NumberSFTTrainer"
    assert training["collator"] == "numadapter.data.collator.NumberDataCollator"  # was numadapter.data.collator
    assert training["answer_format"] == "head" and result["data"]["train_format"] == "head"
    assert training["global_steps"] == 4  # 32 examples in batches of 8, one epoch
    assert len(result["timing"]["epoch_s"]) == 1 and len(result["curve"]) == 1
    assert result["timing"]["lockstep_with"] == ["fone"]
    assert result["prediction_path"].startswith("numadapter.generate, greedy, 1 new token")
    assert result["metrics"]["exact_match"]["n_total"] == 8
    digits = json.loads((out / "data_size" / "digits-n32-m1-s5.json").read_text())
    assert digits["train_path"] == "harness" and digits["product_training"] is None


def _saved_base(path):
    """A tiny digit-wise Llama base saved like `python -m eval_harness pretrain-base` saves one."""
    from helpers import tiny

    from numadapter.testing.toy import build_tokenizer

    tokenizer = build_tokenizer("digits", path)
    tiny.build_model("llama", path, vocab_size=len(tokenizer), tie=True, hidden_size=32, layers=1)
    return str(path)


@pytest.mark.parametrize("method", ["lora", "digits_agg"])
def test_product_adapter_data_are_the_harness_loops(tmp_path, method):
    """On a digit-wise base, NumberSFTTrainer's preparation + NumberDataCollator feed LoRA alone (numadapter's plain
    LoRA) and digits + [AGG] what the harness loop feeds them: the base's own ids, answers as plain digit tokens
    (an [AGG] before an answer would carry the answer's digits into the model's input)."""
    import numadapter
    from eval_harness.arms import get_method
    from eval_harness.arms.encode import number_places
    from eval_harness.arms.models import build
    from eval_harness.product import product_dataset
    from eval_harness.tasks import get_task

    base = _saved_base(tmp_path / "base")
    examples = get_task("fone_decimal_add_6").generate("train", 6, seed=0)
    kwargs = dict(workdir=tmp_path, seed=0, places=number_places(list(examples)), base_path=base)
    harness = build(get_method(method), "adapter", **kwargs)
    product = build(get_method(method), "adapter", product=True, **kwargs)
    assert (harness.number_tokenizer is None) == (method == "lora") and product.number_tokenizer is not None
    expected = harness.codec.encode(examples).batch(torch.arange(6), "cpu")
    ntok = product.number_tokenizer
    data = numadapter.prepare_dataset(product_dataset(examples), ntok)
    got = numadapter.NumberDataCollator.from_tokenizer(ntok, completion_only_loss=True)([data[i] for i in range(6)])
    width = 1 + 16 + 8 + 1 + (2 if method == "digits_agg" else 0)  # bos, "571.870+787.889=", "1359.759", eos, [AGG]s
    assert expected["input_ids"].shape == (6, width)
    for key, value in expected.items():
        assert torch.equal(got[key].to(value.dtype), value), key
    if method == "digits_agg":
        assert (got["input_ids"] == ntok.agg_token_id).sum(dim=1).tolist() == [2] * 6  # the two operands only


def test_adapter_table_trains_through_the_trainer_with_the_base_frozen(tmp_path, monkeypatch):
    import peft
    from transformers import AutoModelForCausalLM

    import numadapter
    from eval_harness import runner
    from eval_harness.arms.sizes import LoraSettings

    base = _saved_base(tmp_path / "base")
    trained, looped = [], []
    original_train = numadapter.NumberSFTTrainer.train

    def spy_train(self, *args, **kwargs):
        params = dict(self.model.named_parameters())
        frozen = {n: p.detach().clone() for n, p in params.items() if not p.requires_grad}
        lora = {n: p.detach().clone() for n, p in params.items() if "lora_B" in n}
        output = original_train(self, *args, **kwargs)
        assert frozen and all(torch.equal(params[n], p) for n, p in frozen.items())  # the base did not move
        assert lora and any(not torch.equal(params[n], p) for n, p in lora.items())  # LoRA did
        trained.append(len(self.train_dataset))
        return output

    monkeypatch.setattr(numadapter.NumberSFTTrainer, "train", spy_train)
    monkeypatch.setattr(runner._Run, "epoch", lambda self, *a, **k: looped.append(self.spec.method))
    out = tmp_path / "results"
    argv = [
        "run", "--preset", "cpu-small", "--experiments", "adapter", "--base", base, "--methods",
        "lora,fone_feature,digits_agg", "--train-sizes", "16", "--epochs", "1", "--n-test", "4", "--batch-size", "8",
        "--threads", "1", "--train-path", "product", "--out", str(out),
    ]  # fmt: skip
    assert main(argv) == 0
    assert trained == [16, 16, 16] and looped == []  # all three by NumberSFTTrainer, none by the harness loop
    files = sorted(p.name for p in (out / "adapter").glob("*.json"))
    assert files == [
        "digits_agg-n16-lora-s0-product.json", "fone_feature-n16-lora-s0-product.json", "lora-n16-lora-s0-product.json"
    ]  # fmt: skip
    lora = json.loads((out / "adapter" / "lora-n16-lora-s0-product.json").read_text())
    assert lora["train_path"] == "product" and lora["product_training"]["trainer"] == "numadapter.NumberSFTTrainer"
    assert lora["product_training"]["answer_format"] == "sequence" and lora["product_training"]["global_steps"] == 2
    assert lora["prediction_path"].startswith("numadapter.generate, greedy")
    assert lora["method_info"]["product_adapter"] == {"encoding": "digits", "train_eos_row": False}
    settings = LoraSettings()  # the table's LoRA: r=16, alpha 32 on every projection
    plain = peft.get_peft_model(
        AutoModelForCausalLM.from_pretrained(base),
        peft.LoraConfig(r=settings.r, lora_alpha=settings.alpha, target_modules=list(settings.target_modules)),
    )
    expected_trainable = sum(p.numel() for p in plain.parameters() if p.requires_grad)
    assert lora["model"]["params"]["trainable"] == expected_trainable  # LoRA alone: nothing but PEFT's LoRA trains
    feature = json.loads((out / "adapter" / "fone_feature-n16-lora-s0-product.json").read_text())
    assert feature["product_training"]["answer_format"] == "head" and feature["regime"] == "adapter"
    assert feature["model"]["params"]["trainable"] > expected_trainable  # + the number modules
