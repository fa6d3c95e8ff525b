"""Serving a number export with vLLM: what numadapter's plugin costs inside the engine, and against numadapter's loop.

Runs in ``.venv-vllm`` (``bash scripts/install.sh vllm``), on an export of FoNE's default (``--export``; default: the
serving test fixture, ``tests/fixtures/serving_sums``, merged into SmolLM2-135M). Three sides, each answering the same
prompts (held-out sums, half of them after an extra number "Q3.") with exactly ``--new-tokens`` new tokens per prompt
(end-of-sequence ignored), greedy:

- ``plugin``: ``LLM(export)`` with numadapter's plugin (the head's [NUM]s, their digits written after them);
- ``plain``: ``LLM(copy)`` on the same merged weights with the base's ``config.json`` and no number modules, so the
  plugin is inactive (its [NUM]s carry no number: wrong answers, the same work without the head);
- ``numadapter``: `numadapter.generate` on `numadapter.load_exported(export)` (transformers with a KV cache).

Both engines are loaded first, then every side runs once per repetition in rotating order
(`eval_harness.bench.common.interleaved_times`), so the ratios ``plugin / plain`` (what the head costs inside the
engine; goal <= 1.10) and ``plugin / numadapter`` compare like with like. Reported: the median seconds of each side
and the median of the per-repetition ratios.

``--depth D`` (default 1) measures the same on a deeper model with the same answers: the export's decoder layers
repeated D times over, the copies inert (their ``o_proj`` and ``down_proj`` zero, so each adds exactly nothing to the
residual stream): the engine's forward costs about D times as much, the head's work per [NUM] stays the same, as when
the same head sits on a larger base.

Run: ``.venv-vllm/bin/python -m eval_harness.bench.serving [--export DIR] [--prompts 64] [--new-tokens 8]
[--repeats 5] [--depth 1] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
from typing import Any

from eval_harness.bench.common import interleaved_times, median_ratio, write_json

ENGINE = {"dtype": "float32", "enforce_eager": True, "max_model_len": 256, "seed": 0, "enable_prefix_caching": False}


def fixture_export(directory: str) -> str:
    """Merges the serving test fixture into SmolLM2-135M and exports it into `directory`."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import numadapter

    fixture = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "serving_sums")
    base = AutoModelForCausalLM.from_pretrained(numadapter.smollm2_path(), dtype=torch.float32)
    model = PeftModel.from_pretrained(base, fixture)
    tokenizer = AutoTokenizer.from_pretrained(numadapter.smollm2_path())
    numadapter.export_merged(model, numadapter.NumberTokenizer(tokenizer, model.peft_config["default"]), directory)
    return directory


def plain_copy(export: str, directory: str) -> str:
    """The export's merged weights and tokenizer with the base's ``config.json`` and no number files."""
    for name in os.listdir(export):
        if name.startswith("number_") or name == "config.json":
            continue
        shutil.copy(os.path.join(export, name), directory)
    with open(os.path.join(export, "config.json"), encoding="utf-8") as handle:
        marked = json.load(handle)
    base = {key: value for key, value in marked.items() if key != "numadapter"}
    base["model_type"] = marked["numadapter"]["base_model_type"]
    base["architectures"] = marked["numadapter"]["base_architectures"]
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as handle:
        json.dump(base, handle, indent=2)
    return directory


def deepened(export: str, directory: str, depth: int) -> str:
    """`export` with its decoder layers repeated `depth` times over in `directory`, the copies inert (``o_proj`` and
    ``down_proj`` zero): the same answers from a forward that costs about `depth` times as much."""
    import torch
    from safetensors.torch import load_file, save_file

    with open(os.path.join(export, "config.json"), encoding="utf-8") as handle:
        config = json.load(handle)
    weights = load_file(os.path.join(export, "model.safetensors"))  # the export's base weights, one file
    layers = config["num_hidden_layers"]
    for copy in range(1, depth):
        for layer in range(layers):
            prefix = f"model.layers.{layer}."
            for name, tensor in list(weights.items()):
                if name.startswith(prefix):
                    inert = name.endswith(("o_proj.weight", "down_proj.weight"))
                    new = f"model.layers.{copy * layers + layer}.{name[len(prefix) :]}"
                    weights[new] = torch.zeros_like(tensor) if inert else tensor.clone()
    for name in os.listdir(export):
        if name not in ("model.safetensors", "model.safetensors.index.json", "config.json"):  # written below
            shutil.copy(os.path.join(export, name), directory)
    save_file(weights, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
    index = {"metadata": {}, "weight_map": dict.fromkeys(sorted(weights), "model.safetensors")}
    with open(os.path.join(directory, "model.safetensors.index.json"), "w", encoding="utf-8") as handle:
        json.dump(index, handle, indent=2)
    config["num_hidden_layers"] = layers * depth
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as handle:
        json.dump(config, handle, indent=2)
    record_path = os.path.join(directory, "number_config.json")  # what the export wrote, checked on load
    with open(record_path, encoding="utf-8") as handle:
        record = json.load(handle)
    record["files"]["model.safetensors"] = os.path.getsize(os.path.join(directory, "model.safetensors"))
    record["model_config"]["num_hidden_layers"] = layers * depth
    with open(record_path, "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=2)
    return directory


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--export", default=None)
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--depth", type=int, default=1, help="the decoder layers repeated D times over, inert")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    # vLLM's CPU build gives an engine most of the machine's memory for its KV cache unless told: two engines here
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

    from vllm import LLM, SamplingParams

    import numadapter
    from numadapter.data.arithmetic import addition_examples

    scratch = tempfile.mkdtemp(prefix="bench_serving_")
    try:
        export = args.export or fixture_export(os.path.join(scratch, "export"))
        if args.depth > 1:
            os.makedirs(os.path.join(scratch, "deep"))
            export = deepened(export, os.path.join(scratch, "deep"), args.depth)
        plain_dir = os.path.join(scratch, "plain")
        os.makedirs(plain_dir)
        plain_copy(export, plain_dir)
        sums = [row["prompt"] for row in addition_examples(args.prompts // 2, seed=123)]
        prompts = sums + [f"Q3. {p}" for p in sums]
        params = SamplingParams(temperature=0.0, max_tokens=args.new_tokens, ignore_eos=True)
        engines = {"plugin": LLM(model=export, **ENGINE), "plain": LLM(model=plain_dir, **ENGINE)}
        model, ntok = numadapter.load_exported(export)
        counts: dict[str, int] = {}
        num_counts: dict[str, int] = {}  # the [NUM]s each side wrote (the head's work: plugin and numadapter)

        def on_engine(name: str):
            def run() -> None:
                outputs = engines[name].generate(prompts, params, use_tqdm=False)
                counts[name] = sum(len(o.outputs[0].token_ids) for o in outputs)
                num_counts[name] = sum(list(o.outputs[0].token_ids).count(ntok.num_token_id) for o in outputs)

            return run

        def on_numadapter() -> None:
            out = numadapter.generate(
                model, ntok, prompts, max_new_tokens=args.new_tokens, eos_token_id=[], return_dict=True,
                batch_size=len(prompts),
            )  # fmt: skip
            counts["numadapter"] = sum(len(ids) for ids in out.token_ids)
            num_counts["numadapter"] = sum(ids.count(ntok.num_token_id) for ids in out.token_ids)

        fns = {"plugin": on_engine("plugin"), "plain": on_engine("plain"), "numadapter": on_numadapter}
        times = interleaved_times(fns, args.repeats, warmup=1)["wall"]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    medians = {side: statistics.median(seconds) for side, seconds in times.items()}
    ratios = {f"plugin/{other}": median_ratio(times, "plugin", other) for other in ("plain", "numadapter")}
    result = {"prompts": len(prompts), "new_tokens": args.new_tokens, "repeats": args.repeats, "depth": args.depth,
              "tokens": counts, "num_tokens": num_counts,
              "seconds": medians, "ratios": ratios, "goal_plugin_over_plain": 1.10}  # fmt: skip
    for side, seconds in medians.items():
        print(f"{side:<11} {seconds:7.3f} s for {len(prompts)} prompts x {args.new_tokens} new tokens "
              f"({counts.get(side, 0)} tokens)")  # fmt: skip
    for name, ratio in ratios.items():
        print(f"{name:<22} {ratio:.3f}")
    write_json(result, args.json)
    return result


if __name__ == "__main__":  # vLLM starts its engines in new processes: the guard keeps them from re-running this
    main()
