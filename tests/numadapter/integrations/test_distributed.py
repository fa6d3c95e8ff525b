"""Multi-process training (DDP, DeepSpeed ZeRO-2, ZeRO-3) on CPU over gloo, and the launch-state logic behind it.

The launch tests (marked ``distributed``; select them with ``-m distributed``, skip them with
``-m "not distributed"``) train a tiny FoNE Llama for 4 steps with ``tests/dist_scripts/train_tiny.py``: once in one
process, then once per configuration with ``torchrun --nproc_per_node 2`` and the same global batch. Every
configuration is launched once per session and its outputs are shared by the tests below. They check, against the
one-process run: the loss curve (within 1e-4), the data shards of the two ranks, the trained parameters (the [NUM]
rows and number modules change, are identical on both ranks, and equal the one-process result), and that the saved
adapter holds every trained tensor whole (also under ZeRO-3) and reloads to the same logits.

Two more launches run numadapter's own entry point (`numadapter.app.commands.train`,
``tests/dist_scripts/train_recipe.py``) under ZeRO-3 with the base loaded *partitioned* (``zero.Init`` inside
``from_pretrained``, how large models are loaded), and in one process: every base tensor is empty right after
loading, the loss curve is the one-process one, the saved adapter equals the one-process adapter, records the base's
real vocabulary size and reloads on a fresh whole base to the logits the DeepSpeed engine computed.

The other tests are fast unit tests of `numadapter.integrations.launch` and of the recipe files; they always run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from helpers.launching import failure, launch, tiny_base, torchrun
from helpers.paths import DIST_SCRIPTS, ROOT

from numadapter.integrations.launch import (
    check_deepspeed_config,
    gathered_parameters,
    launch_info,
    load_deepspeed_config,
    partition_at_load,
    set_single_process_env,
    training_overrides,
)

SCRIPT = DIST_SCRIPTS / "train_tiny.py"
RECIPES = ROOT / "recipes" / "accelerate"
CONFIGS = {  # name -> (extra script arguments, accelerate distributed type)
    "ddp": ([], "MULTI_CPU"),
    "zero2": (["--deepspeed", str(RECIPES / "deepspeed" / "zero2.json")], "DEEPSPEED"),
    # persistence threshold 0: partition even the tiny LoRA / [NUM] / number-module tensors (the recipe's "auto"
    # keeps tensors under 10 * hidden_size elements whole, which would be all of them in this tiny model);
    # activation checkpointing on: TRL forces the reentrant kind with PEFT + ZeRO-3, so that path is covered too
    "zero3": (
        [
            "--deepspeed",
            str(RECIPES / "deepspeed" / "zero3.json"),
            "--ds-set",
            json.dumps({"stage3_param_persistence_threshold": 0}),
            "--checkpointing",
        ],
        "DEEPSPEED",
    ),
}
# numadapter's own entry point (`numadapter.app.commands.train`) with the base loaded ZeRO-3 partitioned (zero.Init),
# and its one-process reference; threshold 0 partitions every tensor, also while loading
RECIPE_SCRIPT = DIST_SCRIPTS / "train_recipe.py"
RECIPE_CONFIGS = {
    "recipe-single": [],
    "recipe-zero3": [
        "--deepspeed",
        str(RECIPES / "deepspeed" / "zero3.json"),
        "--ds-set",
        json.dumps({"stage3_param_persistence_threshold": 0}),
    ],
}
STEPS, GLOBAL_BATCH = 4, 4
LAUNCH_TIMEOUT_S = 420  # one launch takes ~30 s here; the first DeepSpeed one also builds its shm op (~1-3 min)


# -- launching ---------------------------------------------------------------------------------------------------
def _run(command: list[str], out: Path) -> Path:
    returncode, output = launch(command, LAUNCH_TIMEOUT_S)
    if returncode != 0:
        raise failure(command, returncode, output)
    return out


class Runs:
    """Launches each configuration once (lazily) and keeps its output directory."""

    def __init__(self, root: Path, base: Path) -> None:
        self.root, self.base = root, base
        self.dirs: dict[str, Path] = {}
        self.failures: dict[str, AssertionError] = {}

    def get(self, name: str) -> Path:
        if name in self.failures:  # launch once: the other tests of a failed configuration fail at once
            raise self.failures[name]
        if name not in self.dirs:
            out = self.root / name
            script, extra = (RECIPE_SCRIPT, RECIPE_CONFIGS[name]) if name in RECIPE_CONFIGS else (SCRIPT, None)
            common = [str(script), "--base", str(self.base), "--out", str(out), "--steps", str(STEPS)]
            common += ["--global-batch", str(GLOBAL_BATCH)]
            if extra is None:
                extra = [] if name == "single" else CONFIGS[name][0]
            if "--deepspeed" in extra:
                pytest.importorskip("deepspeed", reason="DeepSpeed runs need: pip install 'numadapter[deepspeed]'")
            if name.endswith("single"):
                command = [sys.executable, *common, *extra]
            else:
                command = [*torchrun(2), *common, *extra]
            try:
                self.dirs[name] = _run(command, out)
            except AssertionError as exc:
                self.failures[name] = exc
                raise
        return self.dirs[name]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    root = tmp_path_factory.mktemp("distributed")
    return Runs(root, tiny_base(root))


def _summary(out: Path, rank: int) -> dict:
    return json.loads((out / f"rank{rank}.json").read_text())


def _tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(path))


# -- the launch tests ----------------------------------------------------------------------------------------------
@pytest.mark.distributed
@pytest.mark.parametrize("config", list(CONFIGS))
def test_two_processes_give_the_one_process_loss_curve(runs: Runs, config: str):
    single = _summary(runs.get("single"), 0)
    out = runs.get(config)
    ranks = [_summary(out, r) for r in (0, 1)]
    for summary in ranks:  # both ranks really were part of one 2-process job, for accelerate and for torch
        assert (summary["accelerate_processes"], summary["torch_world_size"]) == (2, 2)
        assert summary["distributed_type"] == f"DistributedType.{CONFIGS[config][1]}"
    assert len(single["logged_losses"]) == STEPS
    # the Trainer's logged loss (averaged over ranks) and the mean of the two ranks' own losses
    expected = torch.tensor(single["local_losses"], dtype=torch.float64)
    logged = torch.tensor(ranks[0]["logged_losses"], dtype=torch.float64)
    mean_local = torch.tensor([r["local_losses"] for r in ranks], dtype=torch.float64).mean(0)
    torch.testing.assert_close(logged, expected, atol=1e-4, rtol=0)
    torch.testing.assert_close(mean_local, expected, atol=1e-4, rtol=0)
    assert expected[-1] < expected[0]  # it did train (so equal curves are not equal flat lines)
    # each rank's loss is its own half of the batch (scaled by the world size), not the global loss
    assert (torch.tensor(ranks[0]["local_losses"]) - torch.tensor(ranks[1]["local_losses"])).abs().max() > 1e-3


@pytest.mark.distributed
@pytest.mark.parametrize("config", list(CONFIGS))
def test_each_rank_trains_on_its_own_shard(runs: Runs, config: str):
    single = _summary(runs.get("single"), 0)
    out = runs.get(config)
    ranks = [_summary(out, r) for r in (0, 1)]
    for step in range(STEPS):
        # the first number of every example is its index ("Case k: ...")
        seen = [[example[0] for example in r["batches"][step]] for r in ranks]
        assert [len(s) for s in seen] == [GLOBAL_BATCH // 2] * 2
        assert not set(seen[0]) & set(seen[1]), f"step {step}: both ranks trained on examples {seen}"
        assert sorted(seen[0] + seen[1]) == sorted(example[0] for example in single["batches"][step])


@pytest.mark.distributed
@pytest.mark.parametrize("config", list(CONFIGS))
def test_number_rows_and_modules_train_identically_on_all_ranks(runs: Runs, config: str):
    single = _tensors(runs.get("single") / "params_rank0.safetensors")
    out = runs.get(config)
    initial = _tensors(out / "initial.safetensors")
    ranks = [_tensors(out / f"params_rank{r}.safetensors") for r in (0, 1)]
    number_keys = [k for k in initial if "number_modules" in k or "trainable_tokens_delta" in k]
    # the [NUM] row of the input embedding and of the (untied) LM head, the FoNE projection, the digit head
    assert any("embed_tokens.token_adapter" in k for k in number_keys)
    assert any("lm_head.token_adapter" in k for k in number_keys)
    assert sum("number_modules" in k for k in number_keys) >= 2
    assert sorted(ranks[0]) == sorted(ranks[1]) == sorted(initial) == sorted(single)
    for key in initial:
        assert ranks[0][key].numel() > 0 and ranks[0][key].shape == initial[key].shape, key
        assert torch.equal(ranks[0][key], ranks[1][key]), f"{key} differs between ranks"
        torch.testing.assert_close(ranks[0][key], single[key], atol=1e-5, rtol=0, msg=f"{key} differs from 1 process")
    for key in number_keys:
        assert (ranks[0][key] - initial[key]).abs().max() > 1e-3, f"{key} did not train"


@pytest.mark.distributed
@pytest.mark.parametrize("config", list(CONFIGS))
def test_saved_adapter_is_whole_and_reloads_to_the_same_logits(runs: Runs, config: str):
    from peft import PeftModel
    from transformers import LlamaForCausalLM

    import numadapter.tuner.registration  # noqa: F401  (registers the adapter type with PEFT)

    out = runs.get(config)
    trained = _tensors(out / "params_rank0.safetensors")
    saved = _tensors(out / "final" / "adapter_model.safetensors")
    # PEFT drops the adapter name from saved keys
    expected = {k.replace(".default.", ".").removesuffix(".default"): v for k, v in trained.items()}
    assert saved.pop("base_model.number_modules.settings_stamp").dtype == torch.uint8  # the settings, not trained
    assert sorted(saved) == sorted(expected)
    for key, value in saved.items():
        assert value.numel() > 0, f"{key} was saved empty"
        torch.testing.assert_close(value.float(), expected[key], atol=0, rtol=0, msg=key)
    base = LlamaForCausalLM.from_pretrained(str(runs.base / "model"), dtype=torch.float32)
    model = PeftModel.from_pretrained(base, str(out / "final")).eval()
    probe = _tensors(out / "probe.safetensors")
    with torch.no_grad():
        reloaded = model(**probe, use_cache=False)
    logits = _tensors(out / "logits_rank0.safetensors")
    assert probe["num_mask"].sum() > 0  # the probe has numbers, so the number modules take part
    torch.testing.assert_close(reloaded.logits, logits["logits"], atol=1e-5, rtol=0)
    torch.testing.assert_close(reloaded.number_logits, logits["number_logits"], atol=1e-5, rtol=0)
    torch.testing.assert_close(
        _tensors(out / "logits_rank1.safetensors")["logits"], logits["logits"], atol=1e-6, rtol=0
    )


# -- ZeRO-3 with the base partitioned while it loads (numadapter's train entry point) -------------------------------
def _base_shape(runs: Runs) -> list[int]:
    config = json.loads((runs.base / "model" / "config.json").read_text())
    return [config["vocab_size"], config["hidden_size"]]


@pytest.mark.distributed
def test_zero3_init_loads_the_base_partitioned_and_trains_like_one_process(runs: Runs):
    single = _summary(runs.get("recipe-single"), 0)
    out = runs.get("recipe-zero3")
    ranks = [_summary(out, r) for r in (0, 1)]
    assert single["load"]["empty_params"] == 0 and single["load"]["embedding_ds_shape"] is None  # a whole reference
    for summary in ranks:
        assert (summary["accelerate_processes"], summary["torch_world_size"]) == (2, 2)
        load = summary["load"]  # right after from_pretrained, before numadapter touched the model
        assert load["embedding_numel"] == 0 and load["embedding_ds_shape"] == _base_shape(runs)
        assert load["embedding_ds_status"] == "ZeroParamStatus.NOT_AVAILABLE"
        assert load["empty_params"] == load["params"] > 0  # every tensor of the base was partitioned at load
    expected = torch.tensor(single["logged_losses"], dtype=torch.float64)
    assert len(expected) == STEPS and expected[-1] < expected[0]
    torch.testing.assert_close(torch.tensor(ranks[0]["logged_losses"], dtype=torch.float64), expected, atol=1e-4,
                               rtol=0)  # fmt: skip


@pytest.mark.distributed
def test_zero3_init_saves_the_adapter_whole_with_the_real_vocabulary(runs: Runs):
    from peft import PeftModel
    from transformers import LlamaForCausalLM

    import numadapter.tuner.registration  # noqa: F401  (registers the adapter type with PEFT)

    reference = runs.get("recipe-single") / "final"
    out = runs.get("recipe-zero3")
    rows, hidden = _base_shape(runs)
    config = json.loads((out / "final" / "adapter_config.json").read_text())
    assert (config["original_vocab_size"], config["resized_vocab_size"], config["base_hidden_size"]) == (
        rows, rows + 1, hidden,
    )  # fmt: skip
    assert config["num_token_id"] == rows  # [NUM] appended after the base vocabulary
    saved = _tensors(out / "final" / "adapter_model.safetensors")
    expected = _tensors(reference / "adapter_model.safetensors")
    assert sorted(saved) == sorted(expected)
    assert any("embed_tokens.token_adapter" in k for k in saved) and any("number_modules" in k for k in saved)
    stamps = [json.loads(bytes(d.pop("base_model.number_modules.settings_stamp").tolist())) for d in (saved, expected)]
    digests = [stamp.pop("tensor_sha256") for stamp in stamps]  # of tensors equal to 1e-5, so not to the byte
    assert stamps[0] == stamps[1] and sorted(digests[0]) == sorted(digests[1]) == sorted(saved)
    for key, value in saved.items():
        assert value.numel() > 0 and value.shape == expected[key].shape, f"{key} was saved {tuple(value.shape)}"
        torch.testing.assert_close(value, expected[key], atol=1e-5, rtol=0, msg=f"{key} differs from 1 process")
    # a fresh, whole base in this (non-distributed) process reproduces what the DeepSpeed engine computed
    base = LlamaForCausalLM.from_pretrained(str(runs.base / "model"), dtype=torch.float32)
    model = PeftModel.from_pretrained(base, str(out / "final")).eval()
    probe = _tensors(out / "probe.safetensors")
    assert probe["num_mask"].sum() > 0
    with torch.no_grad():
        reloaded = model(**probe, use_cache=False)
    engine = _tensors(out / "logits_rank0.safetensors")
    torch.testing.assert_close(reloaded.logits, engine["logits"], atol=1e-5, rtol=0)
    torch.testing.assert_close(reloaded.number_logits, engine["number_logits"], atol=1e-5, rtol=0)
    torch.testing.assert_close(_tensors(out / "logits_rank1.safetensors")["logits"], engine["logits"], atol=1e-6,
                               rtol=0)  # fmt: skip


# -- launch state (no processes started) -------------------------------------------------------------------------
ZERO3 = {"zero_optimization": {"stage": 3, "stage3_gather_16bit_weights_on_model_save": True}}
TORCHRUN = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


@pytest.mark.parametrize(
    ("environ", "config", "accelerator", "expected"),
    [
        ({}, None, False, {}),  # one process, no DeepSpeed: nothing to change
        ({}, None, True, {}),
        (TORCHRUN, None, False, {"use_cpu": True, "ddp_backend": "gloo"}),  # CPU DDP: accelerate's MULTI_CPU
        (TORCHRUN, None, True, {}),  # GPU DDP: transformers' defaults (NCCL)
        (TORCHRUN, ZERO3, False, {"deepspeed": ZERO3, "accelerator_config": {"use_configured_state": True}}),
        (TORCHRUN, ZERO3, True, {"deepspeed": ZERO3}),
    ],
    ids=["one-cpu", "one-gpu", "ddp-cpu", "ddp-gpu", "zero3-cpu", "zero3-gpu"],
)
def test_training_overrides(environ, config, accelerator, expected):
    info = launch_info(config, environ=environ, accelerator=accelerator)
    assert training_overrides(info) == expected


@pytest.mark.parametrize(
    ("overrides", "environ", "expected"),
    [
        ({"deepspeed": ZERO3}, {}, True),  # torchrun + a ZeRO-3 file: partitioned while loading
        ({"deepspeed": ZERO3}, {"ACCELERATE_DEEPSPEED_ZERO3_INIT": "true"}, True),  # zero3_init_flag: true
        ({"deepspeed": ZERO3}, {"ACCELERATE_DEEPSPEED_ZERO3_INIT": "false"}, False),  # zero3_init_flag: false
        ({"deepspeed": {"zero_optimization": {"stage": 2}}}, {}, False),
        ({"use_cpu": True, "ddp_backend": "gloo"}, {}, False),
        ({}, {"ACCELERATE_DEEPSPEED_ZERO3_INIT": "true"}, False),
    ],
    ids=["zero3", "zero3-flag", "zero3-no-flag", "zero2", "ddp", "no-deepspeed"],
)
def test_partition_at_load(overrides, environ, expected):
    assert partition_at_load(overrides, environ=environ) is expected


def test_partition_at_load_refuses_a_bad_flag():
    with pytest.raises(ValueError, match="ACCELERATE_DEEPSPEED_ZERO3_INIT='maybe' must be true or false"):
        partition_at_load({"deepspeed": ZERO3}, environ={"ACCELERATE_DEEPSPEED_ZERO3_INIT": "maybe"})


def test_launch_info_reads_the_launcher_environment():
    info = launch_info(environ=TORCHRUN, accelerator=False)
    assert (info.world_size, info.rank, info.local_rank, info.backend) == (2, 1, 1, "gloo")
    assert info.launched and info.cpu_distributed and info.deepspeed_config is None
    gpu = launch_info(environ=TORCHRUN, accelerator=True)
    assert gpu.backend is None and not gpu.cpu_distributed  # the launcher's default (NCCL) is kept
    assert launch_info(environ={}, accelerator=False).launched is False


def test_launch_info_takes_the_deepspeed_file_from_accelerate_launch(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(ZERO3))
    environ = {**TORCHRUN, "ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_CONFIG_FILE": str(path)}
    info = launch_info(environ=environ, accelerator=False)
    assert info.deepspeed_config == ZERO3
    # without ACCELERATE_USE_DEEPSPEED the file is not used
    environ["ACCELERATE_USE_DEEPSPEED"] = "false"
    assert launch_info(environ=environ, accelerator=False).deepspeed_config is None


def test_nccl_without_gpu_is_refused():
    with pytest.raises(ValueError, match="backend='nccl' needs a CUDA GPU.*backend='gloo'"):
        launch_info(backend="nccl", environ=TORCHRUN, accelerator=False)


def test_bad_launcher_environment_is_named():
    with pytest.raises(ValueError, match="WORLD_SIZE='two'"):
        launch_info(environ={"WORLD_SIZE": "two"}, accelerator=False)


def test_set_single_process_env_fills_only_missing_values():
    environ = {"MASTER_PORT": "1234"}
    set_single_process_env(environ)
    assert environ == {
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "1234",
    }
    fresh: dict[str, str] = {}
    set_single_process_env(fresh)
    assert 0 < int(fresh["MASTER_PORT"]) < 65536


# -- DeepSpeed configs -----------------------------------------------------------------------------------------------
def test_zero3_without_16bit_save_is_refused():
    config = {"zero_optimization": {"stage": 3}}
    with pytest.raises(ValueError, match="stage3_gather_16bit_weights_on_model_save: true.*got None"):
        check_deepspeed_config(config)
    config["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] = False
    with pytest.raises(ValueError, match="got False"):
        check_deepspeed_config(config)
    check_deepspeed_config({"zero_optimization": {"stage": 2}})  # ZeRO-2 saves whole tensors anyway


def test_unknown_zero_stage_is_refused():
    with pytest.raises(ValueError, match=r"`zero_optimization.stage` must be one of \[0, 1, 2, 3\], got 4"):
        check_deepspeed_config({"zero_optimization": {"stage": 4}})


def test_deepspeed_config_input_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_deepspeed_config(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{stage: 3")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_deepspeed_config(broken)
    with pytest.raises(TypeError, match="must be a path or a dict, got int"):
        load_deepspeed_config(3)
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    with pytest.raises(ValueError, match="must be a JSON object, got list"):
        load_deepspeed_config(listed)


def test_load_deepspeed_config_copies_a_dict():
    config = {"zero_optimization": {"stage": 2}}
    loaded = load_deepspeed_config(config)
    loaded["zero_optimization"]["stage"] = 3
    assert config["zero_optimization"]["stage"] == 2


@pytest.mark.parametrize(("name", "stage"), [("zero2", 2), ("zero3", 3)])
def test_recipe_deepspeed_files_are_valid(name: str, stage: int):
    config = load_deepspeed_config(RECIPES / "deepspeed" / f"{name}.json")
    assert config["zero_optimization"]["stage"] == stage
    # batch sizes, accumulation, clipping and precision follow the training arguments
    for key in ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"):
        assert config[key] == "auto", key
    assert config["bf16"]["enabled"] == config["fp16"]["enabled"] == "auto"


@pytest.mark.parametrize(("name", "kind"), [("ddp", "MULTI_GPU"), ("zero2", "DEEPSPEED"), ("zero3", "DEEPSPEED")])
def test_recipe_accelerate_files(name: str, kind: str):
    from accelerate.commands.config.config_args import load_config_from_file

    path = RECIPES / f"{name}.yaml"
    text = path.read_text()
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert header and header[0].startswith("# "), "a recipe opens with a header comment"
    assert any(f"accelerate launch --config_file recipes/accelerate/{name}.yaml" in line for line in header)
    assert any("torchrun --nproc_per_node 2" in line for line in header)  # the CPU command
    config = load_config_from_file(str(path))  # accelerate itself parses it
    assert config.distributed_type.value == kind and config.num_processes == 2
    if kind == "DEEPSPEED":
        file = config.deepspeed_config["deepspeed_config_file"]
        assert (ROOT / file).is_file(), f"{name}.yaml names {file}, relative to the repository root"
        assert load_deepspeed_config(ROOT / file)["zero_optimization"]["stage"] == int(name[-1])


def test_gathered_parameters_is_a_no_op_without_zero3():
    layer = torch.nn.Linear(3, 2)
    before = layer.weight.detach().clone()
    with gathered_parameters(layer):
        assert layer.weight.shape == (2, 3)
        read = layer.weight.detach().clone()
    with gathered_parameters(iter([layer.bias])):
        assert layer.bias.shape == (2,)
    assert torch.equal(read, before) and torch.equal(layer.weight, before)
