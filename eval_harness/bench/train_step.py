"""Speed of one training step (forward + backward): the number adapter vs a LoRA-only adapter.

Variants, each on its own copy of the same random-init Llama-shaped base (embedding already holding the [NUM] row,
so every variant sees identical shapes), with the same LoRA rank and target modules, on the same batch:

- ``lora``: ``peft.LoraConfig``; forward with ``labels`` (transformers' own loss) + backward. The reference.
- ``lora_tokens``: LoRA + PEFT's own ``trainable_token_indices=[NUM]`` (for comparison: PEFT's layer builds a
  merged ``[V, H]`` weight and, with a tied head, a full LM-head weight gradient every step).
- ``numadapter``: `NumberAdapterConfig` (``--encoding``, default FoNE; ``digits`` means digits + [AGG]); forward
  with labels and the number tensors (CE + number-head loss) + backward.

The batch has ``--fraction`` of its tokens set to [NUM] with random place digits. Each repetition runs every variant
once, in rotating order, so drifts of machine load hit all alike; reported are the medians (seconds) and the median of
the per-repetition ratios to ``lora`` (target for ``numadapter``: <= 1.03), and the matmul FLOPs of one step of each
variant (deterministic). Most of the numadapter FLOP overhead is structural: trainable input-side rows (the [NUM]
row, the number features) need the gradient with respect to the embeddings, i.e. the input gradient of layer 0,
which LoRA alone skips; it is about 2% of a step with 4 layers and shrinks as 1 / layers (0.6% at 16).

Run: ``python -m eval_harness.bench.train_step [--device cuda] [--repeats 30] [--encoding fone] [--json out.json]``;
on a shared CPU machine ``--threads 1 --clock thread`` measures CPU time per step instead of wall time.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
from collections.abc import Callable
from typing import Any

import torch

from eval_harness.bench.common import check_clock, cuda_sync, interleaved_times, median_ratio, write_json

VARIANTS = ("lora", "lora_tokens", "numadapter")
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def build_models(
    vocab: int, hidden: int, layers: int, rank: int, encoding: str, tie: bool, device: str, dtype: torch.dtype
) -> dict[str, Any]:
    """The three adapted models; the [NUM] id is ``vocab`` (a new row), digits are ids 0..9."""
    import peft
    from transformers import LlamaConfig, LlamaForCausalLM

    from numadapter import NumberAdapterConfig

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab + 1, hidden_size=hidden, intermediate_size=int(hidden * 8 / 3) // 64 * 64,
        num_hidden_layers=layers, num_attention_heads=max(1, hidden // 64), num_key_value_heads=max(1, hidden // 128),
        tie_word_embeddings=tie, max_position_embeddings=4096,
    )  # fmt: skip
    base = LlamaForCausalLM(config).to(device=device, dtype=dtype)  # every variant gets the same [V + 1, H] embedding
    lora = dict(r=rank, lora_alpha=2 * rank, target_modules=TARGETS, task_type="CAUSAL_LM")
    tokens = peft.LoraConfig(**lora, trainable_token_indices=[vocab])
    models = {
        "lora": peft.get_peft_model(copy.deepcopy(base), peft.LoraConfig(**lora)),
        "lora_tokens": peft.get_peft_model(copy.deepcopy(base), tokens),
    }
    marker = dict(num_token_id=vocab) if encoding != "digits" else dict(agg_token_id=vocab, aggregate=True)
    number = NumberAdapterConfig(
        encoding=encoding, digit_token_ids=list(range(10)), xval_scale=1e8, fone_numbers="all", **marker, **lora
    )
    models["numadapter"] = peft.get_peft_model(copy.deepcopy(base), number)
    for model in models.values():
        model.train()
    return models


def make_batch(
    vocab: int, batch: int, seq: int, fraction: float, places: int, device: str, seed: int = 0
) -> dict[str, torch.Tensor]:
    """Random text ids with a fraction of [NUM] tokens (id ``vocab``) and their side tensors."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(10, vocab, (batch, seq), generator=generator)
    is_number = torch.rand(batch, seq, generator=generator) < fraction
    ids = torch.where(is_number, vocab, ids)
    digits = torch.randint(0, 10, (batch, seq, places), generator=generator) * is_number.unsqueeze(-1)
    values = (digits[..., :-4] * 10 ** torch.arange(places - 5, -1, -1)).sum(-1).float() * is_number
    out = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "labels": ids.clone(),
        "num_mask": is_number.long(),
        "num_digits": digits,
        "num_sign": is_number.long(),
        "num_values": values,
    }
    return {k: v.to(device) for k, v in out.items()}


def _step_fn(model: Any, batch: dict[str, torch.Tensor], numbers: bool) -> Callable[[], None]:
    keys = batch if numbers else {k: batch[k] for k in ("input_ids", "attention_mask", "labels")}

    def step() -> None:
        model.zero_grad(set_to_none=True)
        model(**keys).loss.backward()

    return step


def count_flops(step: Callable[[], None]) -> int:
    """Matmul FLOPs of one step (`torch.utils.flop_counter`): deterministic, unlike times on a shared machine."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        step()
    return counter.get_total_flops()


def run(
    device: str | None = None,
    encoding: str = "fone",
    vocab: int = 2048,
    hidden: int = 256,
    layers: int = 4,
    rank: int = 16,
    batch: int = 8,
    seq: int = 128,
    fraction: float = 0.05,
    tie: bool = True,
    dtype: str = "float32",
    repeats: int = 20,
    warmup: int = 3,
    clock: str = "wall",
    threads: int | None = None,
) -> dict[str, Any]:
    """Measures the three variants; returns medians (s), per-repetition-ratio medians and the setup.

    ``clock="thread"`` (CPU only, with ``threads=1``) times the CPU time of the calling thread instead of wall time:
    on a machine shared with other jobs it measures the work of each step rather than the wait for a core.
    """
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    check_clock(clock)
    if clock == "thread" and (device != "cpu" or threads != 1):
        raise ValueError(f"clock='thread' needs device='cpu' and threads=1, got device={device!r}, threads={threads}.")
    if threads is not None:
        torch.set_num_threads(threads)
    torch_dtype = getattr(torch, dtype)
    models = build_models(vocab, hidden, layers, rank, encoding, tie, device, torch_dtype)
    places = models["numadapter"].peft_config["default"].num_places
    data = make_batch(vocab, batch, seq, fraction, places, device)
    fns = {name: _step_fn(model, data, numbers=name == "numadapter") for name, model in models.items()}
    flops = {name: count_flops(fn) for name, fn in fns.items()}
    times = interleaved_times(fns, repeats, warmup, [clock], cuda_sync(device))[clock]
    medians = {name: statistics.median(values) for name, values in times.items()}
    ratios = {name: median_ratio(times, name, "lora") for name in times if name != "lora"}
    return {
        "setup": dict(device=device, encoding=encoding, vocab=vocab + 1, hidden=hidden, layers=layers, rank=rank,
                      batch=batch, seq=seq, fraction=fraction, tie=tie, dtype=dtype, repeats=repeats, clock=clock,
                      threads=torch.get_num_threads()),
        "median_s": medians,
        "ratio_to_lora": ratios,
        "ratio_of_medians": {name: medians[name] / medians["lora"] for name in medians if name != "lora"},
        "flops": flops,
        "flops_ratio_to_lora": {name: flops[name] / flops["lora"] for name in flops if name != "lora"},
    }  # fmt: skip


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="cpu / cuda (default: cuda when available)")
    parser.add_argument("--encoding", default="fone", choices=["fone", "xval", "digits"])
    parser.add_argument("--vocab", type=int, default=2048)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--fraction", type=float, default=0.05, help="share of tokens that are [NUM]")
    parser.add_argument("--untied", action="store_true", help="untied LM head (default: tied, like Llama-3.2-1B)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument(
        "--clock",
        default="wall",
        choices=["wall", "thread"],
        help="thread: CPU time of the main thread (CPU, --threads 1; for shared machines)",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--json", default=None, help="also write the result to this file")
    return parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = make_parser().parse_args(argv)
    result = run(
        device=args.device, encoding=args.encoding, vocab=args.vocab, hidden=args.hidden, layers=args.layers,
        rank=args.rank, batch=args.batch, seq=args.seq, fraction=args.fraction, tie=not args.untied,
        dtype=args.dtype, repeats=args.repeats, warmup=args.warmup, clock=args.clock, threads=args.threads,
    )  # fmt: skip
    print(json.dumps(result["setup"]))
    for name in VARIANTS:
        line = f"{name:12s} median {result['median_s'][name] * 1000:8.2f} ms  {result['flops'][name] / 1e9:8.3f} GFLOP"
        if name != "lora":
            time_ratio, flop_ratio = result["ratio_to_lora"][name], result["flops_ratio_to_lora"][name]
            line += f"   time x{time_ratio:.3f}, FLOPs x{flop_ratio:.4f} vs lora (target for numadapter: <= 1.03)"
        print(line)
    write_json(result, args.json)
    return result


if __name__ == "__main__":
    main()
