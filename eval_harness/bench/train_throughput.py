"""Training throughput from scratch: FoNE (one [NUM] per number) vs digit-wise vs subword tokens, side by side.

FoNE paper (Zhou et al.), Table 1: one token per number makes an epoch faster (decimal addition: 318 s FoNE,
1148 s digit-wise, 646 s subword per epoch; digit-wise / FoNE = 3.6). This benchmark measures the same point with
the harness's own machinery (`eval_harness.arms.models.build`, `Codec.encode`, `EncodedSet.batch`), so the
models, tokenizers and losses are those of ``python -m eval_harness`` runs:

- every method gets the same training examples of one task (default ``fone_decimal_add_6``: ``"123.456+7.891="``),
  the same FoNE Table 6 model size (random-init tied Llama; vocabularies differ per tokenizer, as in the paper),
  the same batch size and the same fixed sequence of batches (``steps`` batches, the same examples per step);
- a training step is the runner's: forward with the model's own loss (token CE; FoNE adds its digit-head loss),
  backward, gradient clipping at 1.0, AdamW step, ``zero_grad``; batches are trimmed to their longest sequence;
- each method is fed as the runner feeds it (`eval_harness.arms.predict.train_format`): FoNE / xVal, whose
  answers here are one [NUM] read by the head at "=", train on the prompts alone (``"[a]+[b]="``, the head at the
  last position on the answer: the FoNE paper's own format), digit-wise and subword on prompt + answer + eos
  (teacher forcing needs every answer token fed). ``--train-format sequence`` feeds every method prompt + answer +
  eos;
- each repetition runs ``steps`` optimizer steps of every method, in rotating order (so drifts of machine load hit
  all alike), timed as one block with a device synchronisation before each clock read.

When the reference is a numadapter method, a ceiling is timed in the same rotation: ``<reference>_ids_only``, the
reference's own transformers model (``model.base_model.model``) trained on the reference's token ids, attention mask
and labels alone, without numadapter's number work (no features, no head, no side tensors). ``ceiling`` is
``digits / <reference>_ids_only``: the ratio an implementation of the reference would reach at zero cost for its
number work, i.e. the cost of the shorter sequence alone (about the sequence-length ratio: 25.3 / 5.0 tokens in
the head format). When the reference trains in the head format, ``<reference>_sequence`` (the same model fed
prompt + answer + eos, 7.0 tokens) is timed in the rotation too, so both formats' ratios come from one run.

Reported per method: median seconds per step, examples/s, tokens/s (non-padding tokens), sequence lengths, and the
time per epoch relative to the reference method (default FoNE): the median of the per-repetition ratios of block
times. With the same examples and batch size every method takes the same number of steps per epoch, so this is the
epoch-time ratio (goal in the issue: digits / fone >= 4). ``epoch_s_estimate`` extrapolates the median step time to
one epoch of the task's default training split.

Run: ``python -m eval_harness.bench.train_throughput [--task fone_decimal_add_6] [--methods fone,digits,subword]
[--model-size 4] [--batch-size 64] [--steps 8] [--repeats 5] [--threads 1] [--clock thread] [--json out.json]``;
on a shared CPU machine ``--threads 1 --clock thread`` measures CPU time of the calling thread instead of wall time.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import torch

from eval_harness.arms import get_method
from eval_harness.bench.common import check_clock, cuda_sync, interleaved_times, median_ratio, write_json

DEFAULT_METHODS = ("fone", "digits", "subword")


IDS_ONLY = ("input_ids", "attention_mask", "labels", "shift_labels")


def _trainer(
    model: torch.nn.Module, batches: list[dict[str, torch.Tensor]], lr: float, keys: Sequence[str] | None = None
) -> Callable[[int], None]:
    """A function running the first `n` batches as optimizer steps (the runner's step: clip 1.0, AdamW).

    `keys`: pass only these batch entries to the model (None: all of them).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    if keys is not None:
        batches = [{k: batch[k] for k in keys if k in batch} for batch in batches]
        for batch in batches:  # transformers computes a loss only with `labels` (then reads shift_labels instead)
            if "shift_labels" in batch:
                batch["labels"] = batch["shift_labels"]

    def steps(n: int) -> None:
        for batch in batches[:n]:
            loss = model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    return steps


def _feed(encoded: Any, form: str, batch_size: int, device: str) -> dict[str, Any]:
    """The fixed batches of `encoded` in the runner's `form` ("sequence" / "head") and their token counts."""
    head = form == "head"
    make, lengths = (encoded.head_batch, encoded.prompt_lengths) if head else (encoded.batch, encoded.lengths)
    index = torch.arange(len(encoded))
    batches = [make(index[i : i + batch_size], device) for i in range(0, len(encoded), batch_size)]
    return {
        "batches": batches,
        "tokens": int(lengths.sum()),
        "padded_tokens": sum(int(b["input_ids"].numel()) for b in batches),
        "seq_len_mean": float(lengths.float().mean()),
    }


def prepare(
    task_name: str, methods: Sequence[str], model_size: int, batch_size: int, steps: int, seed: int, device: str,
    workdir: str, fmt_request: str = "auto",
) -> dict[str, Any]:  # fmt: skip
    """Builds every method's model and its fixed batches on the same examples.

    `fmt_request`: ``"auto"`` (each method fed as the runner feeds it) or ``"sequence"``.

    Returns:
        ``{"task": Task, "n_examples": int, "methods": {name: {"model", "batches", "tokens", "padded_tokens",
        "seq_len_mean", "params", "train_format"}}}``; a method trained in the head format also has ``"sequence"``
        (its batches and counts in the sequence format).
    """
    from eval_harness.arms import get_method
    from eval_harness.arms.encode import number_places, numbers_of
    from eval_harness.arms.models import TABLE6, build
    from eval_harness.arms.predict import train_format
    from eval_harness.metrics import target_value
    from eval_harness.tasks import get_task

    if model_size not in TABLE6:
        raise ValueError(f"`model_size` must be one of {sorted(TABLE6)} (FoNE Table 6), got {model_size!r}.")
    for name, value in (("batch_size", batch_size), ("steps", steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"`{name}` must be a positive integer, got {value!r}.")
    task = get_task(task_name)
    examples = task.generate("train", batch_size * steps, seed=seed)
    places = number_places(examples)
    xval_values = [float(abs(target_value(text) or 0)) for text in numbers_of(examples)]  # as the runner does
    out: dict[str, Any] = {"task": task, "n_examples": len(examples), "places": places, "methods": {}}
    for name in methods:
        method = get_method(name)
        if "scratch" not in method.regimes:
            raise ValueError(f"method {name!r} does not train from scratch; choose scratch methods, e.g. fone,digits.")
        built = build(
            method, "scratch", workdir=workdir, seed=seed, places=places, xval_values=xval_values,
            size=TABLE6[model_size],
        )  # fmt: skip
        encoded = built.codec.encode(examples, desc=f"encode ({name})")
        model = built.model.to(device).train()
        fmt = train_format(method, encoded, fmt_request)
        part = {"model": model, "params": built.params, "train_format": fmt, **_feed(encoded, fmt, batch_size, device)}
        if fmt == "head":
            part["sequence"] = _feed(encoded, "sequence", batch_size, device)
        out["methods"][name] = part
    return out


def run(
    *,
    task: str = "fone_decimal_add_6",
    methods: Sequence[str] = DEFAULT_METHODS,
    reference: str = "fone",
    model_size: int = 4,
    batch_size: int = 64,
    steps: int = 8,
    repeats: int = 5,
    warmup: int = 2,
    lr: float = 1e-3,
    seed: int = 0,
    device: str | None = None,
    threads: int | None = None,
    clock: str = "wall",
    train_format: str = "auto",
) -> dict[str, Any]:
    """Measures training throughput of `methods` side by side; returns per-method medians and epoch-time ratios.

    Args:
        task: a harness task (``python -m eval_harness tasks``).
        methods: scratch methods (``fone``, ``digits``, ``subword``, ``xval``, ``digits_agg``, ...).
        reference: the method the epoch-time ratios divide by (must be in `methods`).
        model_size: FoNE Table 6 size (1: 64 wide, 1 layer ... 6: 384 wide, 6 layers).
        batch_size: examples per optimizer step.
        steps: optimizer steps per timed block (``batch_size * steps`` distinct examples).
        repeats: timed blocks per method (interleaved, rotating order).
        warmup: untimed optimizer steps per method first.
        lr: AdamW learning rate (constant; it does not change the work).
        seed: seeds the examples and the model init.
        device: ``"cpu"`` / ``"cuda"`` (default: cuda when available).
        threads: ``torch.set_num_threads`` (None: torch's default).
        clock: ``"wall"`` (perf_counter) or ``"thread"`` (CPU time of this thread; needs cpu and ``threads=1``).
        train_format: ``"auto"`` (each method fed as the runner feeds it) or ``"sequence"`` (every method on prompt
            + answer + eos).

    Returns:
        A dict with ``setup``, per method ``step_s`` (median), ``examples_per_s``, ``tokens_per_s``,
        ``seq_len_mean``, ``epoch_s_estimate``, ``params``; ``epoch_time_ratio`` (``"<method>/<reference>"`` ->
        median of per-repetition ratios; with a numadapter reference also ``"<reference>_ids_only/<reference>"``),
        ``ratio``: digits / reference when both were run, else None, ``ceiling``: digits /
        ``<reference>_ids_only`` (None without digits or with a plain reference), and ``sequence_ratio``: digits /
        ``<reference>_sequence`` (None unless the reference trains in the head format).
    """
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    methods = list(methods)
    check_clock(clock)
    if clock == "thread" and (device != "cpu" or threads != 1):
        raise ValueError(f"clock='thread' needs device='cpu' and threads=1, got device={device!r}, threads={threads}.")
    if reference not in methods:
        raise ValueError(f"`reference` {reference!r} must be one of the methods {methods}: add it to --methods.")
    if repeats < 1:
        raise ValueError(f"`repeats` must be >= 1, got {repeats}.")
    if threads is not None:
        torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory(prefix="train_throughput-") as workdir:
        prepared = prepare(task, methods, model_size, batch_size, steps, seed, device, workdir, train_format)
    parts = prepared["methods"]
    fns = {name: _trainer(part["model"], part["batches"], lr) for name, part in parts.items()}
    timed = list(methods)
    ceiling_name = f"{reference}_ids_only"
    ref = parts[reference]
    if get_method(reference).backend == "numadapter":  # its transformers model on its ids alone (module docstring)
        inner = ref["model"].base_model.model
        fns[ceiling_name] = _trainer(inner, ref["batches"], lr, keys=IDS_ONLY)
        parts[ceiling_name] = {**ref, "model": inner}
        timed.append(ceiling_name)
    if ref["train_format"] == "head":  # the same model in the sequence format, for comparison
        sequence_name = f"{reference}_sequence"
        fns[sequence_name] = _trainer(ref["model"], ref["sequence"]["batches"], lr)
        parts[sequence_name] = {**ref, **ref["sequence"], "train_format": "sequence"}
        timed.append(sequence_name)
    for name in timed:
        fns[name](warmup)
    n_batches = len(parts[methods[0]]["batches"])
    blocks = {name: functools.partial(fns[name], n_batches) for name in timed}
    times = interleaved_times(blocks, repeats, clocks=[clock], sync=cuda_sync(device))[clock]
    n_train = prepared["task"].splits["train"]
    steps_per_epoch = math.ceil(n_train / batch_size)
    per_method = {}
    for name in timed:
        block = statistics.median(times[name])
        part = parts[name]
        per_method[name] = {
            "step_s": block / n_batches,
            "examples_per_s": prepared["n_examples"] / block,
            "tokens_per_s": part["tokens"] / block,
            "padded_tokens_per_s": part["padded_tokens"] / block,
            "seq_len_mean": part["seq_len_mean"],
            "train_format": part["train_format"],
            "epoch_s_estimate": block / n_batches * steps_per_epoch,
            "params": part["params"],
        }
    ratios = {f"{name}/{reference}": median_ratio(times, name, reference) for name in timed if name != reference}
    ceiling = sequence_ratio = None
    if ceiling_name in times and "digits" in times:
        ceiling = median_ratio(times, "digits", ceiling_name)
    if f"{reference}_sequence" in times and "digits" in times:
        sequence_ratio = median_ratio(times, "digits", f"{reference}_sequence")
    return {
        "setup": {"task": task, "methods": methods, "reference": reference, "model_size": model_size,
                  "batch_size": batch_size, "steps": n_batches, "repeats": repeats, "warmup": warmup,
                  "device": device, "threads": torch.get_num_threads(), "clock": clock, "seed": seed,
                  "train_format": train_format,
                  "number_places": list(prepared["places"]), "epoch_examples": n_train,
                  "steps_per_epoch": steps_per_epoch},
        "methods": per_method,
        "times_s": times,
        "epoch_time_ratio": ratios,
        "ratio": ratios.get(f"digits/{reference}"),
        "ceiling": ceiling,
        "sequence_ratio": sequence_ratio,
    }  # fmt: skip


def _print(result: dict[str, Any]) -> None:
    setup = result["setup"]
    print(json.dumps(setup))
    for name, row in result["methods"].items():
        print(
            f"  {name:10s} {row['step_s'] * 1000:9.2f} ms/step  {row['examples_per_s']:9.1f} examples/s  "
            f"{row['tokens_per_s']:10.0f} tokens/s  seq {row['seq_len_mean']:5.1f} ({row['train_format']})  "
            f"epoch ~{row['epoch_s_estimate']:8.1f} s ({setup['epoch_examples']} examples)"
        )
    for key, value in result["epoch_time_ratio"].items():
        goal = "  (goal >= 4; FoNE paper Table 1: 3.6)" if key.startswith("digits/") else ""
        print(f"  epoch time {key}: x{value:.3f}{goal}")
    if result["ceiling"] is not None:
        print(f"  ceiling digits / {setup['reference']}_ids_only: x{result['ceiling']:.3f} (zero-cost number work)")
    if result["sequence_ratio"] is not None:
        print(f"  digits / {setup['reference']}_sequence: x{result['sequence_ratio']:.3f} (fed prompt + answer + eos)")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="fone_decimal_add_6", help="harness task (python -m eval_harness tasks)")
    parser.add_argument("--methods", default=",".join(DEFAULT_METHODS), help="comma-separated scratch methods")
    parser.add_argument("--reference", default="fone", help="the method the ratios divide by")
    parser.add_argument(
        "--model-size", type=int, default=4, help="FoNE Table 6 size 1-6 (4: 256 wide, 4 layers, the headline's)"
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=8, help="optimizer steps per timed block")
    parser.add_argument("--repeats", type=int, default=5, help="timed blocks per method (interleaved)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per method first")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None, help="cpu / cuda (default: cuda when available)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument(
        "--clock", default="wall", choices=["wall", "thread"], help="thread: CPU time of this thread (--threads 1)"
    )
    parser.add_argument(
        "--train-format", default="auto", choices=["auto", "sequence"],
        help="auto: each method fed as the runner feeds it (FoNE / xVal: prompts alone); sequence: prompt + answer",
    )  # fmt: skip
    parser.add_argument("--json", default=None, help="also write the result to this JSON file")
    args = parser.parse_args(argv)
    result = run(
        task=args.task, methods=[m for m in args.methods.split(",") if m], reference=args.reference,
        model_size=args.model_size, batch_size=args.batch_size, steps=args.steps, repeats=args.repeats,
        warmup=args.warmup, seed=args.seed, device=args.device, threads=args.threads, clock=args.clock,
        train_format=args.train_format,
    )  # fmt: skip
    _print(result)
    write_json(result, args.json)
    return result


if __name__ == "__main__":
    main()
