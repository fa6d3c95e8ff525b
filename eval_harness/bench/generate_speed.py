"""Per-token generation time: `numadapter.generation.generate` vs transformers' ``model.generate``.

Text without numbers, greedy, the same prompts and ``max_new_tokens`` with ``min_new_tokens`` equal to it (every
run produces exactly the same number of tokens), text in and text out on every side:

- ``numadapter``: ``generate(adapted, ntok, prompts)`` on the number-adapted PEFT model (FoNE by default): its own
  decode loop with KV cache, number hooks and side buffer.
- ``hf_adapted``: ``tokenizer(prompts)`` + ``adapted.get_base_model().generate(...)`` + ``batch_decode``:
  transformers' loop on the *same* adapted model (same LoRA and [NUM] rows; no number hooks are needed on text
  without numbers; ``adapted.generate`` itself is numadapter's number-aware loop). The ratio
  ``numadapter / hf_adapted`` is the cost of numadapter's loop itself; the target is <= 1.05.
- ``hf_base``: the same on the base model without any adapter. ``numadapter / hf_base`` adds what the adapter costs
  per token (LoRA matmuls, the [NUM] embedding / LM-head rows), which is not the loop's doing.
- ``model_generate``: ``adapted.generate(**ntok(prompts, ...))`` + ``ntok.batch_decode``: the Hugging Face habit on
  the adapted model, which runs numadapter's number-aware loop. ``model_generate / hf_base`` is what a user of
  ``model.generate`` pays per token for the adapter and the loop (issue target: <= 1.05).
- ``numadapter_merged``: ``generate`` on a copy of the adapted model after ``merge_adapter()`` (LoRA and the [NUM]
  rows folded into the base weights, as for deployment; the number hooks stay). ``numadapter_merged / hf_base`` is
  numadapter's whole per-token overhead over plain transformers generation with the adapter's weights merged.

Models are random-init Llama-shaped (``--sizes``, default a tiny 64-wide 2-layer model, which is overhead-dominated,
and a 512-wide 4-layer one) with the local byte-level BPE of `numadapter.testing.toy`. Each repetition runs every side
once, in rotating order, so drifts in machine load hit all alike; reported are per-token medians and the median of the
per-repetition ratios. The generated ids of ``numadapter`` and ``hf_adapted`` are checked to be equal.

Run: ``python -m eval_harness.bench.generate_speed [--sizes 64x2,512x4] [--batch-size 1] [--new-tokens 64]
[--repeats 9] [--threads 1] [--clock thread] [--json out.json]``. On a shared machine ``--threads 1 --clock thread``
measures the CPU time of the calling thread instead of wall time.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
from typing import Any

import torch

from eval_harness.bench.common import check_clock, interleaved_times, median_ratio, write_json

PROMPTS = [
    "Alice and Bob went to the store on a Monday and",
    "The report of the company was about the river and the city, which",
    "What is the answer to the question of the students",
    "Grace counted the books",
    "People in London and Paris",
    "The average of the cost",
    "Henry received a ticket from the store in Tokyo after",
    "It",
]
SIDES = ("numadapter", "hf_adapted", "hf_base", "numadapter_merged", "model_generate")


def build(hidden: int, layers: int, encoding: str, rank: int, tokenizer_dir: str) -> dict[str, Any]:
    """Tokenizer, NumberTokenizer, base model and number-adapted model (random init, float32, eval mode)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from numadapter import NumberAdapterConfig, NumberTokenizer, get_peft_model
    from numadapter.testing.toy import build_tokenizer

    tokenizer = build_tokenizer("digits", tokenizer_dir, padding_side="left")
    heads = max(1, hidden // 64)
    config = LlamaConfig(
        vocab_size=len(tokenizer) + 1, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=max(1, heads // 2), max_position_embeddings=1024,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    base = LlamaForCausalLM(config).eval()
    settings = dict(aggregate=True) if encoding == "digits" else {"fone_numbers": "all"}  # every number a [NUM]
    adapter_config = NumberAdapterConfig(
        encoding=encoding, r=rank, lora_alpha=2 * rank, target_modules=["q_proj", "v_proj"], **settings
    )
    adapted = get_peft_model(copy.deepcopy(base), adapter_config, tokenizer=tokenizer).eval()
    ntok = NumberTokenizer(tokenizer, adapter_config)
    merged = copy.deepcopy(adapted)
    merged.merge_adapter()
    return {"tokenizer": tokenizer, "ntok": ntok, "base": base, "adapted": adapted, "merged": merged}


def _sides(parts: dict[str, Any], prompts: list[str], new_tokens: int) -> dict[str, Any]:
    from numadapter import generate

    tokenizer = parts["tokenizer"]

    def hf(model: Any, coder: Any = tokenizer) -> Any:
        """transformers' habit: `coder` encodes, ``model.generate``, `coder` decodes."""

        def run() -> list[list[int]]:
            enc = coder(prompts, padding=True, return_tensors="pt")
            with torch.no_grad():
                out = model.generate(**enc, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
            coder.batch_decode(out, skip_special_tokens=True)
            return out[:, enc["input_ids"].shape[1] :].tolist()

        return run

    def ours(model: Any) -> Any:
        def run() -> list[list[int]]:
            out = generate(
                model, parts["ntok"], prompts, max_new_tokens=new_tokens, min_new_tokens=new_tokens, return_dict=True
            )
            return out.token_ids

        return run

    return {
        "model_generate": hf(parts["adapted"], parts["ntok"]),  # number-aware: numadapter's loop
        "numadapter": ours(parts["adapted"]),
        "hf_adapted": hf(parts["adapted"].get_base_model()),  # transformers' loop, LoRA injected
        "hf_base": hf(parts["base"]),
        "numadapter_merged": ours(parts["merged"]),
    }


def run(
    *,
    hidden: int = 64,
    layers: int = 2,
    batch_size: int = 1,
    new_tokens: int = 64,
    repeats: int = 9,
    warmup: int = 2,
    encoding: str = "fone",
    rank: int = 8,
    threads: int | None = None,
    clock: str = "wall",
) -> dict[str, Any]:
    """Measures the four sides on one model size; returns per-token medians and the ratios.

    Args:
        hidden: model width (heads of 64 dims, half as many kv heads).
        layers: decoder layers.
        batch_size: prompts per call (left-padded when their lengths differ).
        new_tokens: tokens generated per prompt (``max_new_tokens = min_new_tokens``).
        repeats: timed repetitions (each runs every side once, in rotating order).
        warmup: untimed repetitions first.
        encoding: the adapter's ``encoding`` (``"fone"``, ``"xval"`` or ``"digits"``, with [AGG]).
        rank: LoRA rank on q_proj / v_proj.
        threads: ``torch.set_num_threads`` (None: leave torch's default).
        clock: ``"wall"`` (perf_counter) or ``"thread"`` (CPU time of this thread; use with ``threads=1``).

    Returns:
        A dict with the config, ``ms_per_token`` per side (medians), ``ratio_vs_hf_adapted`` and
        ``ratio_vs_hf_base``, ``merged_ratio_vs_hf_base`` (medians of per-repetition ratios) and ``same_ids``
        (numadapter == hf_adapted).
    """
    check_clock(clock)
    if threads is not None:
        torch.set_num_threads(threads)
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(batch_size)]
    with tempfile.TemporaryDirectory() as tmp:
        parts = build(hidden, layers, encoding, rank, tmp)
    sides = _sides(parts, prompts, new_tokens)
    results: dict[str, list[list[int]]] = {}
    for _ in range(warmup):
        for name, fn in sides.items():
            results[name] = fn()
    for name, ids in results.items():
        if any(len(row) != new_tokens for row in ids):
            raise RuntimeError(f"{name} generated {[len(r) for r in ids]} tokens, expected {new_tokens} per prompt.")
    times = interleaved_times({name: sides[name] for name in SIDES}, repeats, clocks=[clock])[clock]
    tokens = batch_size * new_tokens
    per_token = {name: 1000 * statistics.median(ts) / tokens for name, ts in times.items()}
    return {
        "config": {
            "hidden": hidden,
            "layers": layers,
            "batch_size": batch_size,
            "new_tokens": new_tokens,
            "repeats": repeats,
            "encoding": encoding,
            "rank": rank,
            "threads": torch.get_num_threads(),
            "clock": clock,
            "params": sum(p.numel() for p in parts["base"].parameters()),
        },  # fmt: skip
        "ms_per_token": per_token,
        "ratio_vs_hf_adapted": median_ratio(times, "numadapter", "hf_adapted"),
        "ratio_vs_hf_base": median_ratio(times, "numadapter", "hf_base"),
        "merged_ratio_vs_hf_base": median_ratio(times, "numadapter_merged", "hf_base"),
        "model_generate_ratio_vs_hf_base": median_ratio(times, "model_generate", "hf_base"),
        "same_ids": results["numadapter"] == results["hf_adapted"] == results["model_generate"],
    }


def _print(result: dict[str, Any]) -> None:
    cfg = result["config"]
    print(
        f"hidden {cfg['hidden']} x {cfg['layers']} layers ({cfg['params'] / 1e6:.1f}M params), batch "
        f"{cfg['batch_size']}, {cfg['new_tokens']} new tokens, {cfg['repeats']} reps, {cfg['threads']} thread(s), "
        f"{cfg['clock']} clock, encoding={cfg['encoding']}"
    )
    for name, ms in result["ms_per_token"].items():
        print(f"  {name:11s} {ms:8.3f} ms/token")
    print(f"  numadapter / hf_adapted: {result['ratio_vs_hf_adapted']:.3f}  (the loop's own cost; target <= 1.05)")
    print(f"  numadapter / hf_base:    {result['ratio_vs_hf_base']:.3f}  (incl. LoRA and [NUM] rows)")
    print(f"  numadapter_merged / hf_base: {result['merged_ratio_vs_hf_base']:.3f}  (adapter merged)")
    habit = result["model_generate_ratio_vs_hf_base"]
    print(f"  model_generate / hf_base: {habit:.3f}  (adapted.generate; target <= 1.05)")
    print(f"  same ids (numadapter, hf_adapted, model_generate): {result['same_ids']}")


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64x2,512x4", help="comma-separated HIDDENxLAYERS model sizes")
    parser.add_argument("--batch-size", type=int, default=1, help="prompts per call")
    parser.add_argument("--new-tokens", type=int, default=64, help="tokens generated per prompt")
    parser.add_argument("--repeats", type=int, default=9, help="timed repetitions (interleaved)")
    parser.add_argument("--encoding", default="fone", choices=["fone", "xval", "digits"])
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--clock", default="wall", choices=["wall", "thread"], help="wall time or thread CPU time")
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    results = []
    for size in args.sizes.split(","):
        hidden, layers = (int(x) for x in size.lower().split("x"))
        result = run(
            hidden=hidden, layers=layers, batch_size=args.batch_size, new_tokens=args.new_tokens,
            repeats=args.repeats, encoding=args.encoding, threads=args.threads, clock=args.clock,
        )  # fmt: skip
        _print(result)
        results.append(result)
    write_json(results, args.json)
    return results


if __name__ == "__main__":
    main()
