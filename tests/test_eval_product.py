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


def test_product_data_is_what_the_harness_head_format_feeds(tmp_path):
    """NumberSFTTrainer's preparation + NumberDataCollator(answer_format="head") give the harness loop's tensors."""
    import numadapter
    from eval_harness.methods import get_method
    from eval_harness.methods.encode import number_places
    from eval_harness.methods.models import TABLE6, build
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
    assert training["collator"] == "numadapter.collator.NumberDataCollator"
    assert training["answer_format"] == "head" and result["data"]["train_format"] == "head"
    assert training["global_steps"] == 4  # 32 examples in batches of 8, one epoch
    assert len(result["timing"]["epoch_s"]) == 1 and len(result["curve"]) == 1
    assert result["timing"]["lockstep_with"] == ["fone"]
    assert result["prediction_path"].startswith("numadapter.generate, greedy, 1 new token")
    assert result["metrics"]["exact_match"]["n_total"] == 8
    digits = json.loads((out / "data_size" / "digits-n32-m1-s5.json").read_text())
    assert digits["train_path"] == "harness" and digits["product_training"] is None
