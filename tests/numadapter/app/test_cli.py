"""The `numadapter` command line: --help for every command, the tokenizer tour, and train / eval / export end to end
(in-process through `main(argv)`, on tiny local models and JSONL data, with the real recipes and overrides)."""

from __future__ import annotations

import json
import os

import datasets
import pytest
import torch
from helpers.adapter_cases import Store
from helpers.paths import ROOT

from numadapter.app import cli

COMMANDS = ("quickstart", "train", "eval", "export", "validate", "tour")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("cli")))


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert all(command in out for command in COMMANDS)


@pytest.mark.parametrize(
    "command,options",
    [
        ("quickstart", ["--model", "--out", "--tiny"]),
        ("train", ["--config", "section.key=value"]),
        ("eval", ["--config", "--adapter", "--exported"]),
        ("export", ["--adapter", "--out", "--base", "--dtype"]),
        ("validate", ["--config"]),
        ("tour", ["--text"]),
    ],
)
def test_every_command_has_help(capsys, command, options):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert all(option in out for option in options), out


def test_unknown_command_fails():
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["fly"])
    assert exit_info.value.code == 2


def test_tour_is_offline_and_exact(tmp_path):
    lines: list[str] = []
    counts = cli.tour(out=str(tmp_path / "tok"), print_fn=lines.append)
    out = "\n".join(lines)
    # DEMO_TEXT has 9 numbers: 2024, 117, 12,345.67, 3, 1,250, 6.5, 6.02214076e23, the 30-digit one, 30
    assert counts["numbers"] == 9
    assert counts["fone"] < counts["raw"] < counts["digits"]
    assert "decode(encode(text)) == text: True" in out
    assert "fone_decode(features) = 123456789012345678901234567890  (exact)" in out
    assert "602214076000000000000000" in out  # 6.02214076e23 expanded exactly
    assert (tmp_path / "tok" / "tokenizer.json").exists()


def test_bad_recipe_key_exits_2_and_lists_valid_keys(capsys):
    recipe = os.path.join(ROOT, "recipes", "llama", "fone_lora.yaml")
    assert cli.main(["validate", "--config", recipe, "training.max_step=3"]) == 2
    err = capsys.readouterr().err
    assert "numadapter validate: error" in err and "Did you mean 'max_steps'" in err and "Valid keys:" in err
    assert cli.main(["validate", "--portable", "--config", recipe]) == 0  # the recipe is meant for a GPU + hub id
    assert "valid (SFTConfig)" in capsys.readouterr().out


def write_jsonl(path, rows) -> str:
    with open(path, "w", encoding="utf-8") as file:
        for row in rows:
            file.write(json.dumps(row) + "\n")
    return str(path)


def arithmetic_rows(n: int, offset: int = 0) -> list[dict[str, str]]:
    rows = []
    for i in range(n):
        a, b = 17 + 7 * (i + offset) % 80, 3 + 5 * (i + offset) % 60
        rows.append({"prompt": f"What is {a} plus {b}?", "completion": f" It is {a + b}."})
    return rows


TINY_TRAINING = [
    "training.max_steps=3", "training.per_device_train_batch_size=4", "training.bf16=false", "training.use_cpu=true",
    "training.logging_steps=1", "training.save_strategy=no", "training.disable_tqdm=true", "training.report_to=none",
    "training.learning_rate=1e-3", "adapter.r=4", "adapter.int_digits=4", "adapter.frac_digits=2",
    "eval.max_examples=4", "eval.max_new_tokens=4", "eval.batch_size=4",
]  # fmt: skip


def test_train_eval_export_end_to_end_llama_fone(store, tmp_path, capsys):
    from numadapter.export import load_exported

    recipe = os.path.join(ROOT, "recipes", "llama", "fone_lora.yaml")
    base = store.base_path("llama", False, hidden=32)
    tokenizer = os.path.join(store.root, "tok-digits")
    store.tokenizer("digits")
    train = write_jsonl(tmp_path / "train.jsonl", arithmetic_rows(12))
    evaluation = write_jsonl(tmp_path / "eval.jsonl", arithmetic_rows(4, offset=50))
    run, merged = tmp_path / "run", tmp_path / "merged"
    overrides = [
        f"model.name_or_path={base}", f"model.tokenizer={tokenizer}", "model.dtype=float32",
        f"data.train={train}", f"data.eval={evaluation}", f"training.output_dir={run}",
        f"export.out_dir={merged}", "export.dtype=float32", "training.max_length=64", *TINY_TRAINING,
    ]  # fmt: skip
    assert cli.main(["train", "--config", recipe, *overrides]) == 0
    out = capsys.readouterr().out
    assert "trainable params" in out and "eval: 4 examples, exact match" in out
    for name in ("adapter_model.safetensors", "adapter_config.json", "number_tokenizer_config.json"):
        assert (run / name).exists(), name
    metrics = json.load(open(run / "eval_results.json"))["metrics"]
    assert metrics["examples"] == 4 and 0.0 <= metrics["exact_match"] <= 1.0
    assert (merged / "number_config.json").exists() and (merged / "model.safetensors").exists()

    eval_file = tmp_path / "exported_eval.json"
    assert cli.main(["eval", "--config", recipe, "--exported", str(merged), *overrides,
                     f"eval.output_file={eval_file}"]) == 0  # fmt: skip
    assert json.load(open(eval_file))["metrics"] == metrics  # the export answers exactly like the adapter
    adapter_eval = tmp_path / "adapter_eval.json"
    assert cli.main(["eval", "--config", recipe, "--adapter", str(run), *overrides,
                     f"eval.output_file={adapter_eval}"]) == 0  # fmt: skip
    assert json.load(open(adapter_eval))["metrics"] == metrics

    offline = tmp_path / "offline"
    assert cli.main(["export", "--adapter", str(run), "--out", str(offline), "--base", base]) == 0
    first, ntok = load_exported(merged)
    second, _ = load_exported(offline)
    batch = ntok(["What is 12 plus 30?", "No numbers"], padding=True, return_tensors="pt")
    batch = {k: v for k, v in batch.items() if k != "number_texts"}
    with torch.no_grad():
        torch.testing.assert_close(second(**batch).logits, first(**batch).logits, rtol=0, atol=1e-5)


def test_train_t5_digits_ntl_recipe(store, tmp_path):
    recipe = os.path.join(ROOT, "recipes", "t5", "digits_ntl.yaml")
    base = store.base_path("t5", False, hidden=32)
    store.tokenizer("t5")
    train = write_jsonl(tmp_path / "train.jsonl", arithmetic_rows(8))
    run = tmp_path / "run"
    overrides = [
        f"model.name_or_path={base}", f"model.tokenizer={os.path.join(store.root, 'tok-t5')}",
        f"data.train={train}", "data.eval=null", f"training.output_dir={run}", "export.out_dir=null",
        *TINY_TRAINING,
    ]  # fmt: skip
    assert cli.main(["train", "--config", recipe, *overrides]) == 0
    config = json.load(open(run / "adapter_config.json"))
    assert config["encoding"] == "digits" and config["ntl_weight"] == 0.3 and config["task_type"] == "SEQ_2_SEQ_LM"


def test_missing_data_file_is_a_clear_error(store, tmp_path, capsys):
    recipe = os.path.join(ROOT, "recipes", "llama", "fone_lora.yaml")
    base = store.base_path("llama", False, hidden=32)
    store.tokenizer("digits")
    code = cli.main(["train", "--config", recipe, f"model.name_or_path={base}",
                     f"model.tokenizer={os.path.join(store.root, 'tok-digits')}", "data.train=missing.jsonl",
                     *TINY_TRAINING])  # fmt: skip
    assert code == 2
    assert "data file 'missing.jsonl' does not exist" in capsys.readouterr().err


@pytest.mark.distributed
def test_zero3_recipe_trains_with_torchrun_and_exports_offline(store, tmp_path):
    """The ZeRO-3 recipe under ``torchrun`` (2 CPU processes over gloo): the adapter is saved whole, training prints
    the offline export command instead of merging, and that command's export reloads to the adapter's logits."""
    import subprocess
    import sys

    from peft import PeftModel

    from numadapter.export import load_exported
    from numadapter.tokenization import NumberTokenizer

    pytest.importorskip("deepspeed")
    base = store.base_path("llama", False, hidden=32)
    store.tokenizer("digits")
    train = write_jsonl(tmp_path / "train.jsonl", arithmetic_rows(8))
    run, merged = tmp_path / "run", tmp_path / "merged"
    recipe = os.path.join("recipes", "llama", "fone_lora_zero3.yaml")
    overrides = [
        f"model.name_or_path={base}", f"model.tokenizer={os.path.join(store.root, 'tok-digits')}",
        "model.dtype=float32", f"data.train={train}", "data.eval=null", f"training.output_dir={run}",
        "training.max_steps=2", "training.per_device_train_batch_size=2", "training.gradient_accumulation_steps=1",
        "training.bf16=false", "training.gradient_checkpointing=false", "training.save_strategy=no",
        "training.report_to=none", "training.max_length=64", "training.disable_tqdm=true", "adapter.r=4",
        "adapter.int_digits=4", "adapter.frac_digits=2", f"export.out_dir={merged}",
    ]  # fmt: skip
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "numadapter.app.cli", "train", "--config", recipe, *overrides]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=480)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("Not exporting: PEFT cannot merge LoRA into ZeRO-3") == 1  # rank 0 only
    assert f"numadapter export --adapter {run} --base {base} --out {merged}" in result.stdout
    assert (run / "adapter_model.safetensors").exists() and not merged.exists()

    assert cli.main(["export", "--adapter", str(run), "--out", str(merged), "--base", base]) == 0
    loaded, ntok = load_exported(merged)
    from transformers import LlamaForCausalLM

    reference = PeftModel.from_pretrained(LlamaForCausalLM.from_pretrained(base), str(run)).eval()
    batch = NumberTokenizer.from_pretrained(str(run))(["What is 12 plus 30?", "No numbers"], padding=True,
                                                      return_tensors="pt")  # fmt: skip
    batch = {k: v for k, v in batch.items() if k != "number_texts"}
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, reference(**batch).logits, rtol=0, atol=1e-5)


def test_load_data_reads_local_files_directories_and_the_synthetic_task(tmp_path):
    from numadapter.app.commands import load_data
    from numadapter.app.recipe import DataSettings

    rows = arithmetic_rows(6)
    datasets.Dataset.from_list(rows).to_csv(str(tmp_path / "train.csv"))
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "train.parquet"))
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "saved"))
    write_jsonl(tmp_path / "train.jsonl", rows)
    for source in ("train.csv", "train.parquet", "train.jsonl", "saved"):
        loaded = load_data(DataSettings(train=str(tmp_path / source)), "train")
        assert [dict(r) for r in loaded] == rows, source
    limited = load_data(DataSettings(train=str(tmp_path / "train.jsonl"), max_train_examples=2), "train")
    assert len(limited) == 2
    assert load_data(DataSettings(train=str(tmp_path / "train.jsonl")), "eval") is None
    settings = DataSettings(train="synthetic:addition", eval="synthetic:addition", synthetic_examples=5,
                            synthetic_eval_examples=3, synthetic_min_digits=2, synthetic_max_digits=2)  # fmt: skip
    train, held_out = load_data(settings, "train"), load_data(settings, "eval")
    assert len(train) == 5 and len(held_out) == 3 and train[0] != held_out[0]
    a, b = (int(x) for x in train[0]["prompt"].removesuffix(" =").split(" + "))
    assert train[0]["completion"] == f" {a + b}" and 10 <= a < 100


def test_close_process_group_destroys_an_initialised_group(tmp_path):
    import torch.distributed as dist

    from numadapter.app.cli import close_process_group

    close_process_group()  # no group: nothing happens
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        assert dist.is_initialized()
        close_process_group()
        assert not dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _close_after(rank: int, store: str, log: str) -> None:
    """One of two gloo processes: rank 0 is slow to finish (it saves and exports in the CLI), then both close with
    ``wait=True``; each writes when it arrived and when its close returned."""
    import time

    import torch.distributed as dist

    from numadapter.app.cli import close_process_group

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    if rank == 0:
        time.sleep(1.5)
    arrived = time.time()
    close_process_group(wait=True)
    with open(f"{log}.{rank}", "w") as file:
        json.dump({"arrived": arrived, "closed": time.time(), "initialized": dist.is_initialized()}, file)


@pytest.mark.distributed
def test_close_process_group_waits_for_every_process_before_closing(tmp_path):
    """With ``wait=True`` (after a command succeeded) no process tears its connections down while another is still
    working: the fast process's close returns only after the slow one arrived."""
    import torch.multiprocessing as mp

    log = str(tmp_path / "log")
    mp.start_processes(_close_after, args=(str(tmp_path / "store"), log), nprocs=2, start_method="spawn")
    slow, fast = (json.load(open(f"{log}.{rank}")) for rank in (0, 1))
    assert fast["arrived"] < slow["arrived"] - 1.0  # rank 1 got to the end first
    assert fast["closed"] >= slow["arrived"]  # and waited for rank 0 before closing
    assert not slow["initialized"] and not fast["initialized"]


@pytest.mark.parametrize("offline", [True, False], ids=["HF_HUB_OFFLINE", "no-network"])
def test_unreachable_hub_id_is_one_line_naming_name_or_path(tmp_path, capsys, monkeypatch, offline):
    """The default recipe names a hub id; offline, `numadapter train` says so at once, in one line, and names the
    recipe key to change (no hub retries, no transformers traceback)."""
    import time

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
                 "ALL_PROXY", "all_proxy"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    if offline:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    else:
        monkeypatch.setenv("HF_ENDPOINT", "https://hub.invalid")  # .invalid never resolves (RFC 2606)
    recipe = os.path.join(ROOT, "recipes", "llama", "fone_lora.yaml")
    start = time.monotonic()
    code = cli.main(["train", "--config", recipe, "model.name_or_path=numadapter-tests/no-such-model",
                     f"training.output_dir={tmp_path / 'out'}"])  # fmt: skip
    elapsed = time.monotonic() - start
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert "model.name_or_path='numadapter-tests/no-such-model'" in err
    assert "set model.name_or_path to a local directory" in err
    assert ("HF_HUB_OFFLINE=1 is set" if offline else "no network: hub.invalid") in err
    assert elapsed < 8.0


def test_missing_local_model_directory_is_named(tmp_path, capsys):
    recipe = os.path.join(ROOT, "recipes", "llama", "fone_lora.yaml")
    missing = str(tmp_path / "nowhere")
    code = cli.main(["train", "--config", recipe, f"model.name_or_path={missing}"])
    assert code == 2
    assert f"model.name_or_path={missing!r} is not a directory" in capsys.readouterr().err


def miles_rows(n: int, offset: int = 0) -> list[dict[str, str]]:
    return [{"prompt": f"Convert {12 + 37 * (i + offset) % 900} miles to km:",
             "completion": f" {round((12 + 37 * (i + offset) % 900) * 1.609344, 2)}"} for i in range(n)]  # fmt: skip


def test_train_granite_xval_recipe_fits_its_scale_and_the_export_answers_alike(store, tmp_path, capsys):
    """The shipped xVal recipe on a tiny Granite: the trainer fits xval_center / xval_scale on the data (the recipe
    sets neither), the head reads the numbers before it, and the merged export answers as the adapter does."""
    recipe = os.path.join(ROOT, "recipes", "granite", "xval_lora.yaml")
    base = store.base_path("granite", False, hidden=32)
    store.tokenizer("digits")
    train = write_jsonl(tmp_path / "train.jsonl", miles_rows(12))
    evaluation = write_jsonl(tmp_path / "eval.jsonl", miles_rows(4, offset=40))
    run, merged = tmp_path / "run", tmp_path / "merged"
    overrides = [
        f"model.name_or_path={base}", f"model.tokenizer={os.path.join(store.root, 'tok-digits')}",
        "model.dtype=float32", f"data.train={train}", f"data.eval={evaluation}", f"training.output_dir={run}",
        f"export.out_dir={merged}", "export.dtype=float32", "training.max_length=64", *TINY_TRAINING,
    ]  # fmt: skip
    assert cli.main(["train", "--config", recipe, *overrides]) == 0
    config = json.load(open(run / "adapter_config.json"))
    assert config["encoding"] == "xval" and config["xval_context_numbers"] == 4
    assert config["xval_center"] == 0.0 and config["xval_scale"] > 100  # fitted on miles and km, not 1
    metrics = json.load(open(run / "eval_results.json"))["metrics"]
    assert metrics["examples"] == 4
    eval_file = tmp_path / "exported_eval.json"
    assert cli.main(["eval", "--config", recipe, "--exported", str(merged), *overrides,
                     f"eval.output_file={eval_file}"]) == 0  # fmt: skip
    assert json.load(open(eval_file))["metrics"] == metrics
