"""Speed of NTL: CE alone vs CE + NTL-WAS, measured side by side (interleaved repetitions, medians).

Two scenarios, as in section 4.2 of the NTL paper (Zausinger et al., ICML 2025):
    - loss: forward + backward of the loss on a ``[B, T, V]`` logits tensor that requires grad (8 x 512 x 32k);
    - step: a full training step of a tiny Llama with a 32k vocabulary (forward + loss + backward).
Variants: ``ce`` = ``F.cross_entropy``; ``fused_ce`` = `cross_entropy_and_ntl` without NTL; ``fused_ce_ntl`` =
`cross_entropy_and_ntl` with NTL-WAS (what trainers use); ``ce_plus_ntl`` = ``F.cross_entropy`` + `NTLoss` as a
separate module. Every repetition runs each variant once, in rotating order, so machine load drifts hit all of
them alike; ratios are medians of the per-repetition ratios.

Run: ``python -m eval_harness.bench.ntl_overhead [--repeats 15] [--step-repeats 7] [--no-step] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from eval_harness.bench.common import interleaved_times, write_json

NTL_WEIGHT = 0.3  # the paper's lambda (eq. 6)
VARIANTS = ("ce", "fused_ce", "fused_ce_ntl", "ce_plus_ntl")
CPU = torch.device("cpu")
CLOCKS = ("wall", "cpu")  # wall-clock and process CPU time of every call


def build_tokenizer(vocab_size: int) -> Any:
    """A word-level tokenizer with digits "0".."9" at ids 0..9 and filler tokens up to ``vocab_size`` (offline)."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {str(d): d for d in range(10)}
    vocab.update({f"w{i}": i for i in range(10, vocab_size)})
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="w10")))


def make_labels(batch: int, seq: int, vocab: int, number_fraction: float, generator: torch.Generator) -> torch.Tensor:
    """(B, T) labels: a ``number_fraction`` share are digit ids 0..9 at random positions, the rest text ids."""
    labels = torch.randint(10, vocab, (batch, seq), generator=generator)
    is_number = torch.rand(batch, seq, generator=generator) < number_fraction
    return torch.where(is_number, torch.randint(0, 10, (batch, seq), generator=generator), labels)


def loss_fn(variant: str, ntl: Any) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The total loss of one variant as a function of aligned (logits, labels)."""
    from numadapter.ntl import cross_entropy_and_ntl

    def ce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1))

    def fused_ce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return cross_entropy_and_ntl(logits, labels, None)[0]

    def fused_ce_ntl(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        ce_value, ntl_value = cross_entropy_and_ntl(logits, labels, ntl)
        return ce_value + NTL_WEIGHT * ntl_value

    def ce_plus_ntl(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return ce(logits, labels) + NTL_WEIGHT * ntl(logits, labels)

    return {"ce": ce, "fused_ce": fused_ce, "fused_ce_ntl": fused_ce_ntl, "ce_plus_ntl": ce_plus_ntl}[variant]


def _summary(times: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    out: dict[str, Any] = {"repeats": len(times["wall"]["ce"])}
    for clock, series in times.items():

        def paired(a: str, b: str, series: dict[str, list[float]] = series) -> float:
            return statistics.median(x / y for x, y in zip(series[a], series[b]))

        out[clock] = {
            "median_s": {name: statistics.median(t) for name, t in series.items()},
            "min_s": {name: min(t) for name, t in series.items()},
            "ratio_fused_ce_ntl_vs_ce": paired("fused_ce_ntl", "ce"),
            "ratio_fused_ce_ntl_vs_fused_ce": paired("fused_ce_ntl", "fused_ce"),
            "ratio_ce_plus_ntl_vs_ce": paired("ce_plus_ntl", "ce"),
        }
    return out


def ntl_work(ntl: Any, logits: torch.Tensor, labels: torch.Tensor, repeats: int, sync: Callable[[], None]):
    """Median wall / CPU seconds of exactly the work NTL adds inside `cross_entropy_and_ntl`.

    That is: gather the number columns, NTL forward, its (N, K) gradient, and the in-place add into a (reused)
    gradient buffer. Timed alone because it is far below the run-to-run noise of a full CE pass on a shared machine
    (`interleaved_times` with this one side, 3 untimed runs first).
    """
    flat = logits.detach().reshape(-1, logits.shape[-1])  # (N, V)
    buffer = torch.zeros_like(flat)
    ids = torch.tensor(ntl.number_token_ids, device=flat.device)

    def work() -> None:
        sub = flat.index_select(1, ids).float().requires_grad_(True)  # (N, K)
        value = ntl._loss_from_columns(sub, None, labels, None, None)
        (grad_sub,) = torch.autograd.grad(value, sub)
        buffer.index_add_(1, ids, grad_sub)

    times = interleaved_times({"ntl": work}, repeats, 3, CLOCKS, sync)
    return statistics.median(times["wall"]["ntl"]), statistics.median(times["cpu"]["ntl"])


def _with_ntl_work(summary: dict[str, Any], work: tuple[float, float]) -> dict[str, Any]:
    for clock, seconds in zip(("wall", "cpu"), work):
        summary[clock]["ntl_work_s"] = seconds
        summary[clock]["ratio_ce_plus_ntl_work_vs_ce"] = 1 + seconds / summary[clock]["median_s"]["ce"]
    return summary


def _sync(device: torch.device) -> Callable[[], None]:
    return (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)


def bench_loss(ntl: Any, batch: int, seq: int, vocab: int, fraction: float, repeats: int, warmup: int, seed: int,
               device: torch.device = CPU):  # fmt: skip
    """Scenario 1: forward + backward of the loss on a logits leaf tensor."""
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, seq, vocab, generator=gen).to(device).requires_grad_(True)
    labels = make_labels(batch, seq, vocab, fraction, gen).to(device)

    def one(variant: str) -> Callable[[], None]:
        fn = loss_fn(variant, ntl)

        def step() -> None:
            logits.grad = None
            fn(logits, labels).backward()

        return step

    summary = _summary(interleaved_times({v: one(v) for v in VARIANTS}, repeats, warmup, CLOCKS, _sync(device)))
    return _with_ntl_work(summary, ntl_work(ntl, logits, labels, 5 * repeats, _sync(device)))


def bench_step(ntl: Any, batch: int, seq: int, vocab: int, fraction: float, repeats: int, warmup: int, seed: int,
               device: torch.device = CPU, hidden: int = 64, layers: int = 2):  # fmt: skip
    """Scenario 2: a training step (forward + loss + backward) of a tiny random Llama with a ``vocab`` vocabulary."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=seq, tie_word_embeddings=False,
    )  # fmt: skip
    model = LlamaForCausalLM(config).to(device)
    gen = torch.Generator().manual_seed(seed)
    input_ids = make_labels(batch, seq, vocab, fraction, gen).to(device)
    labels = F.pad(input_ids[:, 1:], (0, 1), value=-100)  # aligned with logits: no [N, V] copy for the shift

    def one(variant: str) -> Callable[[], None]:
        fn = loss_fn(variant, ntl)

        def step() -> None:
            model.zero_grad(set_to_none=True)
            fn(model(input_ids=input_ids).logits, labels).backward()

        return step

    out = _summary(interleaved_times({v: one(v) for v in VARIANTS}, repeats, warmup, CLOCKS, _sync(device)))
    with torch.no_grad():
        logits = model(input_ids=input_ids).logits
    out = _with_ntl_work(out, ntl_work(ntl, logits, labels, 5 * repeats, _sync(device)))
    del logits
    out["model"] = {"hidden": hidden, "layers": layers, "params": sum(p.numel() for p in model.parameters())}
    return out


def run(
    *,
    batch: int = 8,
    seq: int = 512,
    vocab: int = 32000,
    number_fraction: float = 0.5,
    repeats: int = 15,
    step_repeats: int = 7,
    warmup: int = 2,
    step: bool = True,
    seed: int = 0,
    threads: int | None = None,
    device: str = "cpu",
) -> dict[str, Any]:
    """Measure the NTL overhead; returns medians (seconds) and ratios per scenario (``"loss"``, ``"step"``).

    ``threads`` sets ``torch.set_num_threads`` for the run (restored afterwards); None keeps the current setting.
    Each scenario reports ``"wall"`` and ``"cpu"`` (process CPU time: robust when other jobs share the CPU, meaningful
    for CPU runs only) medians, minima and the medians of per-repetition ratios.
    """
    from numadapter.ntl import NTLoss

    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        ntl = NTLoss(build_tokenizer(vocab), "was")
        dev = torch.device(device)
        result: dict[str, Any] = {
            "config": {"batch": batch, "seq": seq, "vocab": vocab, "number_fraction": number_fraction,
                       "threads": torch.get_num_threads(), "device": device, "torch": torch.__version__},
            "loss": bench_loss(ntl, batch, seq, vocab, number_fraction, repeats, warmup, seed, dev),
        }  # fmt: skip
        if step:
            result["step"] = bench_step(ntl, batch, seq, vocab, number_fraction, step_repeats, warmup, seed, dev)
        return result
    finally:
        torch.set_num_threads(previous)


def _print(result: dict[str, Any]) -> None:
    print(f"config: {result['config']}")
    for scenario, target in (("loss", 0.02), ("step", 0.01)):
        if scenario not in result:
            continue
        res = result[scenario]
        print(f"\n[{scenario}] {res['repeats']} interleaved repetitions; target: NTL overhead <= {target:.0%}")
        for clock in ("wall", "cpu"):
            print(f"  {clock} clock:" + "".join(f"  {n} {s * 1000:.0f} ms" for n, s in res[clock]["median_s"].items()))
            print(f"    NTL's own work (timed alone): {res[clock]['ntl_work_s'] * 1000:.2f} ms")
            for key in ("ratio_ce_plus_ntl_work_vs_ce", "ratio_fused_ce_ntl_vs_ce", "ratio_fused_ce_ntl_vs_fused_ce",
                        "ratio_ce_plus_ntl_vs_ce"):  # fmt: skip
                print(f"    {key:32s} {res[clock][key]:.4f}  (overhead {res[clock][key] - 1:+.2%})")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8, help="sequences per batch")
    parser.add_argument("--seq", type=int, default=512, help="tokens per sequence")
    parser.add_argument("--vocab", type=int, default=32000, help="vocabulary size (digits are ids 0..9)")
    parser.add_argument("--repeats", type=int, default=15, help="loss-scenario repetitions per variant")
    parser.add_argument("--step-repeats", type=int, default=7, help="training-step repetitions per variant")
    parser.add_argument("--no-step", action="store_true", help="skip the training-step scenario")
    parser.add_argument("--number-fraction", type=float, default=0.5, help="share of labels that are digits")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: unchanged)")
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cuda")
    parser.add_argument("--json", default=None, help="also write the result dict to this JSON file")
    args = parser.parse_args(argv)
    result = run(
        batch=args.batch,
        seq=args.seq,
        vocab=args.vocab,
        number_fraction=args.number_fraction,
        repeats=args.repeats,
        step_repeats=args.step_repeats,
        step=not args.no_step,
        threads=args.threads,
        device=args.device,
    )
    _print(result)
    write_json(result, args.json)
    return result


if __name__ == "__main__":
    main()
