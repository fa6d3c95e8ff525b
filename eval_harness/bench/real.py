"""The number adapter on the real pretrained checkpoint (SmolLM2-135M-Instruct, `numadapter.smollm2_path`): four
comparisons, each pair measured side by side in one run.

Data: the quick start's task (harness task ``quickstart_add``: ``"1234 + 567 ="`` -> ``" 1801"``). Models: the
harness's adapter regime (`eval_harness.arms.models.build`): the base frozen, LoRA r=16 (alpha 32) on the seven
projections of every layer; ``fone`` is FoNE + that LoRA (numadapter), ``lora`` PEFT's LoRA alone on the
checkpoint's own digit tokens (one token per digit).

1. ``train_step``: one training step (forward with labels + backward) of the FoNE adapter vs LoRA alone, on the same
   batch: the FoNE encoding of the examples (prompt + answer + eos), the LoRA side getting the same ids with every
   [NUM] replaced by the digit token "0", so both run identical shapes and the ratio is the number work alone
   (FoNE features, digit head and its loss, the [NUM] rows); also their matmul FLOPs.
2. ``epoch``: training time on the same examples in the same batches (AdamW steps, clip 1.0, the harness's step):
   digit tokens (``lora``, prompt + answer + eos) vs FoNE (fed as the harness feeds it); with the same examples per
   step both take the same steps per epoch, so the ratio of block times is the ratio of epoch times.
3. ``generate``: ``adapted.generate(**ntok(prompts))`` (numadapter's number-aware loop on the FoNE adapter) vs the
   base model's own ``generate``, per token: greedy, ``min_new_tokens = max_new_tokens``, text without numbers,
   left-padded batch. PEFT's LoRA alone (same r / targets, transformers' loop) runs in the same rotation, splitting
   the ratio into LoRA's own cost (``lora_ratio``) and numadapter's beyond it (``ratio_to_lora``). The generated
   ids are compared (a fresh adapter's LoRA B is zero: the same text on every side).
4. ``memory``: trainable parameters and saved adapter bytes (``save_pretrained``) of the FoNE adapter vs PEFT's LoRA
   with the same r / targets, and (``rss=True``) the resident memory of a fresh process per side that loads the
   base, builds the side and trains two optimizer steps on the batch of 1 (identical shapes): its peak (``VmHWM``;
   ``ru_maxrss`` would carry the parent's peak over ``exec``) and that peak less the memory before training (the
   base's weights are memory-mapped and count once touched, and FoNE's build copies the resized embedding first, so
   that difference is not the training memory alone: compare the peaks).

The timed pairs run interleaved (each repetition times both sides, in alternating order) and report medians and the
median of the per-repetition ratios. Run: ``python -m eval_harness.bench.real [--base DIR] [--threads 1 --clock
thread] [--json out.json]`` (``python -m eval_harness.bench --only real`` adds it to ``bench.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from eval_harness.bench.common import check_clock, interleaved_times, median_ratio, write_json

SIDES = ("lora", "fone")
METHODS = {"lora": "lora", "fone": "fone_context"}  # each side's harness arm: FoNE with every number a [NUM]
TASK = "quickstart_add"


def _interleave(fns: dict[str, Callable[[], Any]], repeats: int, warmup: int, clock: str) -> dict[str, list[float]]:
    """Times every function once per repetition, in rotating order, after `warmup` untimed rounds (on the CPU)."""
    return interleaved_times(fns, repeats, warmup, [clock])[clock]


def build_side(name: str, base: str, workdir: str, places: tuple[int, int], seed: int = 0) -> Any:
    """The harness's adapter-regime build of side `name` (``"lora"`` or ``"fone"``, `METHODS`) on `base` (a
    `Built`)."""
    from eval_harness.arms import get_method
    from eval_harness.arms.models import build

    return build(get_method(METHODS[name]), "adapter", workdir=workdir, seed=seed, places=places, base_path=base)


def same_shape_batches(fone: Any, digit_id: int, index: torch.Tensor, encoded: Any) -> dict[str, dict]:
    """The FoNE training batch of rows `index` and the LoRA side's copy: the same ids, [NUM] -> `digit_id`."""
    batch = encoded.batch(index, "cpu")
    is_num = batch["num_mask"].bool()
    plain = {
        "input_ids": torch.where(is_num, digit_id, batch["input_ids"]),
        "attention_mask": batch["attention_mask"],
        "labels": torch.where(batch["labels"] == fone.number_tokenizer.marker_token_id, digit_id, batch["labels"]),
    }
    return {"fone": batch, "lora": plain}


def adapter_bytes(model: Any, out: str) -> int:
    """Bytes of the adapter `model` writes with ``save_pretrained(out)`` (every file under `out`)."""
    model.save_pretrained(out)
    return sum(path.stat().st_size for path in Path(out).rglob("*") if path.is_file())


def _memory_mb(field: str) -> float:
    """``VmRSS`` / ``VmHWM`` (peak) of this process in MB, from ``/proc/self/status`` (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field}: the peak-RSS measurement needs Linux; pass rss=False.")


def rss_child(side: str, base: str, batch_path: str) -> dict[str, Any]:
    """Loads the base, builds `side` and trains two AdamW steps on the batch saved at `batch_path` (``torch.save`` of
    ``{"batches": {side: batch}, "places": (m, n)}``); returns this process's peak and pre-training RSS (MB)."""
    saved = torch.load(batch_path)
    with tempfile.TemporaryDirectory(prefix="bench-real-") as workdir:
        built = build_side(side, base, workdir, tuple(saved["places"]))
    model = built.model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    before = _memory_mb("VmRSS")
    for _ in range(2):
        model(**saved["batches"][side]).loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    peak = _memory_mb("VmHWM")
    return {"side": side, "peak_rss_mb": peak, "before_training_mb": before, "training_mb": peak - before}


def _rss_in_child(side: str, base: str, batch_path: str, threads: int | None) -> dict[str, Any]:
    code = (
        "import json, torch; from eval_harness.bench.real import rss_child; "
        f"{'' if threads is None else f'torch.set_num_threads({threads}); '}"
        f"print(json.dumps(rss_child({side!r}, {base!r}, {batch_path!r})))"
    )
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"the peak-RSS process of {side!r} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(
    *,
    base: str | None = None,
    batch: int = 16,
    step_repeats: int = 8,
    epoch_steps: int = 2,
    epoch_repeats: int = 4,
    gen_batch: int = 4,
    new_tokens: int = 12,
    gen_repeats: int = 5,
    warmup: int = 1,
    rss: bool = True,
    threads: int | None = None,
    clock: str = "wall",
    seed: int = 0,
) -> dict[str, Any]:
    """Runs the four comparisons on `base` (default: `numadapter.smollm2_path()`); returns medians and ratios.

    Args:
        base: a local causal LM directory with its tokenizer.
        batch: examples per training step (train step and epoch).
        step_repeats: timed training steps per side (interleaved).
        epoch_steps, epoch_repeats: optimizer steps per timed block, and timed blocks per side.
        gen_batch, new_tokens, gen_repeats: prompts per ``generate`` call, tokens each, timed calls per side.
        warmup: untimed rounds first (every timed pair).
        rss: measure each side's resident memory in its own process (about 10 s each).
        threads: ``torch.set_num_threads`` (None: torch's default).
        clock: ``"wall"`` or ``"thread"`` (CPU time of this thread; needs ``threads=1``).
        seed: seeds the examples and the adapters' init.

    Returns:
        ``setup``; ``train_step``, ``epoch``, ``generate``, ``memory`` (each with its medians and ``ratio``); and
        ``ratios``: the four headline ratios (numadapter side / plain side, digits / FoNE for the epoch).
    """
    from eval_harness.arms import get_method
    from eval_harness.arms.encode import number_places
    from eval_harness.arms.models import load_base
    from eval_harness.arms.predict import train_format
    from eval_harness.bench.generate_speed import PROMPTS
    from eval_harness.bench.train_step import count_flops
    from eval_harness.bench.train_throughput import _feed, _trainer
    from eval_harness.tasks import get_task

    check_clock(clock)
    if clock == "thread" and threads != 1:
        raise ValueError(f"clock='thread' times one thread's CPU time and needs threads=1, got threads={threads}.")
    for name, value in (("batch", batch), ("step_repeats", step_repeats), ("epoch_steps", epoch_steps),
                        ("epoch_repeats", epoch_repeats), ("gen_batch", gen_batch), ("new_tokens", new_tokens),
                        ("gen_repeats", gen_repeats)):  # fmt: skip
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"`{name}` must be a positive integer, got {value!r}.")
    if base is None:
        import numadapter

        base = numadapter.smollm2_path()
    if threads is not None:
        torch.set_num_threads(threads)
    started = time.perf_counter()
    examples = get_task(TASK).generate("train", batch * epoch_steps, seed=seed)
    places = number_places(examples)
    with tempfile.TemporaryDirectory(prefix="bench-real-") as workdir:
        built = {name: build_side(name, base, workdir, places, seed) for name in SIDES}
        fresh = build_side("fone", base, workdir, places, seed)  # for generate and the saved size: untrained
        base_model, tokenizer = load_base(base)
        out: dict[str, Any] = {}

        # 1. one training step, identical shapes
        encoded = {name: built[name].codec.encode(examples) for name in SIDES}
        digit_id = int(tokenizer.convert_tokens_to_ids("0"))
        batches = same_shape_batches(built["fone"], digit_id, torch.arange(batch), encoded["fone"])
        models = {name: built[name].model.train() for name in SIDES}

        def step(name: str) -> Callable[[], None]:
            def fn() -> None:
                models[name].zero_grad(set_to_none=True)
                models[name](**batches[name]).loss.backward()

            return fn

        fns = {name: step(name) for name in SIDES}
        flops = {name: count_flops(fn) for name, fn in fns.items()}
        times = _interleave(fns, step_repeats, warmup, clock)
        out["train_step"] = {
            "median_s": {name: statistics.median(ts) for name, ts in times.items()},
            "ratio": median_ratio(times, "fone", "lora"),
            "flops": flops,
            "flops_ratio": flops["fone"] / flops["lora"],
            "tokens_per_row": float(batches["fone"]["attention_mask"].sum(1).float().mean()),
        }
        for model in models.values():
            model.zero_grad(set_to_none=True)
        batch_path = os.path.join(workdir, "rss-batch.pt")
        torch.save({"batches": batches, "places": places}, batch_path)

        # 2. epoch time: digit tokens vs FoNE, the same examples in the same batches
        formats = {name: train_format(get_method(METHODS[name]), encoded[name]) for name in SIDES}
        fed = {name: _feed(encoded[name], formats[name], batch, "cpu") for name in SIDES}
        trainers = {name: _trainer(models[name], fed[name]["batches"], 1e-4) for name in SIDES}
        blocks = {"digits": lambda: trainers["lora"](epoch_steps), "fone": lambda: trainers["fone"](epoch_steps)}
        times = _interleave(blocks, epoch_repeats, warmup, clock)
        out["epoch"] = {
            "step_s": {name: statistics.median(ts) / epoch_steps for name, ts in times.items()},
            "ratio": median_ratio(times, "digits", "fone"),
            "seq_len_mean": {"digits": fed["lora"]["seq_len_mean"], "fone": fed["fone"]["seq_len_mean"]},
            "train_format": {"digits": formats["lora"], "fone": formats["fone"]},
        }
        for parts in (blocks, trainers, models, built):  # free the trained copies before generating
            parts.clear()

        # 3. model.generate, adapted vs base (and vs PEFT's LoRA alone), per token
        import peft

        plain = peft.get_peft_model(load_base(base)[0], peft.LoraConfig(task_type="CAUSAL_LM", **_lora(fresh)))
        plain.eval()
        prompts = [PROMPTS[i % len(PROMPTS)] for i in range(gen_batch)]
        adapted, ntok = fresh.model.eval(), fresh.number_tokenizer
        base_model.eval()
        settings = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
        generated: dict[str, list] = {}

        def generate(name: str) -> Callable[[], None]:
            model, coder = {"adapted": (adapted, ntok), "lora": (plain, tokenizer), "base": (base_model, tokenizer)}[
                name
            ]

            def fn() -> None:
                enc = coder(prompts, padding=True, padding_side="left", return_tensors="pt")
                with torch.no_grad():
                    ids = model.generate(**enc, pad_token_id=tokenizer.pad_token_id, **settings)
                coder.batch_decode(ids, skip_special_tokens=True)
                generated[name] = ids[:, enc["input_ids"].shape[1] :].tolist()

            return fn

        sides = ("base", "adapted", "lora")
        times = _interleave({name: generate(name) for name in sides}, gen_repeats, warmup, clock)
        lengths = {len(row) for rows in generated.values() for row in rows}
        if lengths != {new_tokens}:
            raise RuntimeError(f"generate made {sorted(lengths)} tokens per prompt, expected {new_tokens}.")
        tokens = gen_batch * new_tokens
        out["generate"] = {
            "ms_per_token": {name: 1000 * statistics.median(ts) / tokens for name, ts in times.items()},
            "ratio": median_ratio(times, "adapted", "base"),
            "ratio_to_lora": median_ratio(times, "adapted", "lora"),
            "lora_ratio": median_ratio(times, "lora", "base"),
            "same_ids": generated["adapted"] == generated["base"] == generated["lora"],
        }

        # 4. memory
        trainable = {
            "lora": sum(p.numel() for p in plain.parameters() if p.requires_grad),
            "fone": sum(p.numel() for p in adapted.parameters() if p.requires_grad),
        }
        saved = {
            "lora": adapter_bytes(plain, os.path.join(workdir, "lora")),
            "fone": adapter_bytes(adapted, os.path.join(workdir, "fone")),
        }
        rss_runs = {side: _rss_in_child(side, base, batch_path, threads) for side in SIDES} if rss else {}
    memory: dict[str, Any] = {
        "trainable": trainable,
        "trainable_ratio": trainable["fone"] / trainable["lora"],
        "adapter_bytes": saved,
        "bytes_ratio": saved["fone"] / saved["lora"],
    }
    if rss:
        peak = {side: run["peak_rss_mb"] for side, run in rss_runs.items()}
        training = {side: run["training_mb"] for side, run in rss_runs.items()}
        memory.update(peak_rss_mb=peak, rss_ratio=peak["fone"] / peak["lora"], training_rss_mb=training,
                      training_rss_ratio=training["fone"] / training["lora"])  # fmt: skip
    out["memory"] = memory
    out["ratios"] = {
        "train_step": out["train_step"]["ratio"],
        "epoch_digits_over_fone": out["epoch"]["ratio"],
        "generate": out["generate"]["ratio"],
        "trainable_params": memory["trainable_ratio"],
        "adapter_bytes": memory["bytes_ratio"],
        **({"peak_rss": memory["rss_ratio"]} if rss else {}),
    }
    out["setup"] = {
        "base": base, "task": TASK, "params": sum(p.numel() for p in base_model.parameters()),
        "lora": _lora(fresh), "batch": batch, "step_repeats": step_repeats, "epoch_steps": epoch_steps,
        "epoch_repeats": epoch_repeats, "gen_batch": gen_batch, "new_tokens": new_tokens, "gen_repeats": gen_repeats,
        "warmup": warmup, "threads": torch.get_num_threads(), "clock": clock, "seed": seed,
        "seconds": time.perf_counter() - started,
    }  # fmt: skip
    return out


def _lora(built: Any) -> dict[str, Any]:
    """The LoRA settings of a numadapter build (r, alpha, dropout, targets), for PEFT's own LoraConfig."""
    config = built.config
    return {
        "r": config.r,
        "lora_alpha": config.lora_alpha,
        "lora_dropout": config.lora_dropout,
        "target_modules": sorted(config.target_modules),
    }


def _print(result: dict[str, Any]) -> None:
    setup, step, epoch, gen, memory = (result[k] for k in ("setup", "train_step", "epoch", "generate", "memory"))
    print(f"{setup['base']} ({setup['params'] / 1e6:.1f}M parameters), {setup['threads']} thread(s), "
          f"{setup['clock']} clock, {setup['seconds']:.0f} s")  # fmt: skip
    ms = {k: 1000 * v for k, v in step["median_s"].items()}
    print(f"  train step (batch {setup['batch']}, {step['tokens_per_row']:.1f} tokens/row): fone {ms['fone']:.1f} ms, "
          f"lora {ms['lora']:.1f} ms: x{step['ratio']:.3f} (FLOPs x{step['flops_ratio']:.4f})")  # fmt: skip
    s = epoch["step_s"]
    print(
        f"  epoch: digits {s['digits']:.3f} s/step (seq {epoch['seq_len_mean']['digits']:.1f}), fone "
        f"{s['fone']:.3f} s/step (seq {epoch['seq_len_mean']['fone']:.1f}): digits / fone x{epoch['ratio']:.3f}"
    )
    t = gen["ms_per_token"]
    print(f"  model.generate: adapted {t['adapted']:.2f} ms/token, base {t['base']:.2f}: x{gen['ratio']:.3f}; PEFT "
          f"LoRA alone {t['lora']:.2f} (x{gen['lora_ratio']:.3f} the base; adapted / LoRA "
          f"x{gen['ratio_to_lora']:.3f}); same ids: {gen['same_ids']}")  # fmt: skip
    print(f"  trainable parameters: fone {memory['trainable']['fone']:,} / lora {memory['trainable']['lora']:,} = "
          f"x{memory['trainable_ratio']:.4f}; saved adapter bytes x{memory['bytes_ratio']:.4f}")  # fmt: skip
    if "peak_rss_mb" in memory:
        rss = memory["peak_rss_mb"]
        grow = memory["training_rss_mb"]
        print(
            f"  peak RSS: fone {rss['fone']:.0f} MB, lora {rss['lora']:.0f} MB: x{memory['rss_ratio']:.3f}; of it "
            f"training: fone {grow['fone']:.0f} MB, lora {grow['lora']:.0f} MB: x{memory['training_rss_ratio']:.3f}"
        )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=None, help="local model directory (default: numadapter.smollm2_path())")
    parser.add_argument("--batch", type=int, default=16, help="examples per training step")
    parser.add_argument("--step-repeats", type=int, default=8, help="timed training steps per side")
    parser.add_argument("--epoch-steps", type=int, default=2, help="optimizer steps per timed epoch block")
    parser.add_argument("--epoch-repeats", type=int, default=4, help="timed epoch blocks per side")
    parser.add_argument("--gen-batch", type=int, default=4, help="prompts per generate call")
    parser.add_argument("--new-tokens", type=int, default=12, help="tokens generated per prompt")
    parser.add_argument("--gen-repeats", type=int, default=5, help="timed generate calls per side")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds before each timed pair")
    parser.add_argument("--no-rss", action="store_true", help="skip the peak-RSS processes")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--clock", default="wall", choices=["wall", "thread"], help="thread: needs --threads 1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the result to this JSON file")
    args = parser.parse_args(argv)
    result = run(
        base=args.base, batch=args.batch, step_repeats=args.step_repeats, epoch_steps=args.epoch_steps,
        epoch_repeats=args.epoch_repeats, gen_batch=args.gen_batch, new_tokens=args.new_tokens,
        gen_repeats=args.gen_repeats, warmup=args.warmup, rss=not args.no_rss, threads=args.threads,
        clock=args.clock, seed=args.seed,
    )  # fmt: skip
    _print(result)
    write_json(result, args.json)
    return result


if __name__ == "__main__":
    main()
