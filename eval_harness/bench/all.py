"""Runs every speed benchmark in one process and writes ``bench.json`` and ``bench.md`` (the headline ratios).

Each benchmark runs through its own ``main(argv)`` (so it prints what it prints when run alone), one after the
other; its headline ratio is read off the dict it returns and compared with the target of the issue:

=================  ======================================================================  ==============
benchmark          headline ratio                                                          target
=================  ======================================================================  ==============
table_tokens       tokens per table, digit-wise / FoNE (and subword / FoNE)                reference 2.21
tokenizer_speed    encoding throughput, NumberTokenizer / raw fast tokenizer               >= 0.5
train_step         training step time, numadapter / LoRA alone                             <= 1.03
ntl_overhead       CE + NTL / CE: loss forward + backward, and a whole training step       <= 1.02, 1.01
generate_speed     ms per token, numadapter.generation / transformers generate (per size)  <= 1.05
train_throughput   epoch time from scratch, digit-wise / FoNE (and subword / FoNE)         >= 4
dataset_size       prepared-dataset bytes, dense (0.1.0, per token) / sparse (per number)  reference only
real               SmolLM2-135M: step time, fone / lora                                    <= 1.03
                   epoch time, digits / fone                                               reference only
                   ms/token, adapted / base ``model.generate``                             <= 1.05
                   trainable parameters, fone / lora                                       <= 1.01
=================  ======================================================================  ==============

The table-token reference is the FoNE paper's 329.7 / 149.25 on WikiTableQuestions, a different corpus, so it is
reported without a pass / fail. ``real`` (the real checkpoint, `eval_harness.bench.real`, 3-5 minutes) runs only when
asked for: ``--real`` or ``--only real``. ``bench.json`` holds the machine (CPU count, torch version, threads,
device, date, load average, git commit), the options, the headlines and every benchmark's full result; ``bench.md``
a markdown table (benchmark, measured ratio, target, met?) and each benchmark's setup. A benchmark that raises is
recorded with its error and the others still run.

Run: ``python -m eval_harness.bench [--out DIR] [--quick] [--only table_tokens,train_step] [--real] [--threads 1]
[--clock thread] [--device cuda]``. ``--quick`` uses small sizes and few repetitions (smoke runs and tests; its
ratios are noisy). On a shared CPU machine ``--threads 1 --clock thread`` times CPU time of the calling thread where
a benchmark supports it (train_step, generate_speed, train_throughput, real; ntl_overhead then reports process CPU
time).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import math
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from eval_harness.bench.common import check_clock
from eval_harness.records import git_commit, write_json

BENCHMARKS = (
    "table_tokens", "tokenizer_speed", "train_step", "ntl_overhead", "generate_speed", "train_throughput",
    "dataset_size", "real",
)  # fmt: skip
OPT_IN = ("real",)  # run only when named (--only real, --real)
DEFAULT = tuple(name for name in BENCHMARKS if name not in OPT_IN)
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "results" / "bench"
REAL_OUT = DEFAULT_OUT.parent / "bench-real"
QUICK_ARGS: dict[str, list[str]] = {
    "table_tokens": ["--tables", "20"],
    "tokenizer_speed": ["--texts", "100", "--repeats", "2"],
    "train_step": "--vocab 512 --hidden 64 --layers 2 --rank 4 --batch 2 --seq 32 --repeats 3 --warmup 1".split(),
    "ntl_overhead": "--batch 2 --seq 64 --vocab 4000 --repeats 3 --step-repeats 2".split(),
    "generate_speed": ["--sizes", "64x2", "--new-tokens", "8", "--repeats", "2"],
    "train_throughput": "--model-size 1 --batch-size 16 --steps 2 --repeats 2 --warmup 1".split(),
    "dataset_size": ["--examples", "64"],
    "real": "--batch 2 --step-repeats 1 --epoch-steps 1 --epoch-repeats 1 --gen-batch 2 --new-tokens 2 "
    "--gen-repeats 1 --warmup 0 --no-rss".split(),
}
# which options each benchmark's CLI takes
_TAKES_THREADS = {"train_step", "ntl_overhead", "generate_speed", "train_throughput", "real"}
_TAKES_CLOCK = {"train_step", "generate_speed", "train_throughput", "real"}
_TAKES_DEVICE = {"train_step", "ntl_overhead", "train_throughput"}


def parse_only(only: str | None) -> list[str]:
    """The benchmarks named in a comma-separated `only` (`DEFAULT`: all but ``real``, for None / empty), in the order
    of BENCHMARKS.

    Raises:
        ValueError: an unknown name; the message lists the valid ones.
    """
    if not only:
        return list(DEFAULT)
    names = [name.strip() for name in only.split(",") if name.strip()]
    unknown = [name for name in names if name not in BENCHMARKS]
    if unknown or not names:
        raise ValueError(f"--only got unknown benchmark(s) {unknown or only!r}; choose from {', '.join(BENCHMARKS)}.")
    return [name for name in BENCHMARKS if name in names]


def select(only: str | None, real: bool = False) -> list[str]:
    """The benchmarks to run: `parse_only`'s, and with `real` the real-checkpoint one too (alone without `only`)."""
    names = parse_only(only)
    if real:
        names = [name for name in BENCHMARKS if name == "real" or (only and name in names)]
    return names


def bench_argv(
    name: str, quick: bool = False, threads: int | None = None, clock: str = "wall", device: str | None = None
) -> list[str]:
    """The command-line arguments `name`'s ``main`` gets for these options."""
    argv = list(QUICK_ARGS[name]) if quick else []
    if threads is not None and name in _TAKES_THREADS:
        argv += ["--threads", str(threads)]
    if clock != "wall" and name in _TAKES_CLOCK:
        argv += ["--clock", clock]
    if device is not None and name in _TAKES_DEVICE:
        argv += ["--device", device]
    return argv


def _row(benchmark: str, metric: str, value: float | None, op: str | None, target: float | None, note: str = ""):
    met = None
    if op is not None and value is not None and math.isfinite(value):
        met = value >= target if op == ">=" else value <= target
    return {"benchmark": benchmark, "metric": metric, "value": value, "op": op, "target": target, "met": met,
            "note": note}  # fmt: skip


def headlines(name: str, result: Any, clock: str = "wall") -> list[dict[str, Any]]:
    """The headline rows of one benchmark's result: metric, measured ratio, target and whether it is met."""
    if name == "table_tokens":
        per_number = result["ratios"]["numbers"]
        note = (
            f"reference: FoNE paper {result['paper_ratio']:.2f} (WikiTableQuestions); tokens of the numbers alone: "
            f"digits/fone x{per_number['digits/fone']:.2f}, subword/fone x{per_number['subword/fone']:.2f}"
        )
        return [
            _row(name, "tokens per table, digits / fone", result["ratio"], None, None, note),
            _row(name, "tokens per table, subword / fone", result["ratios"]["table"]["subword/fone"], None, None),
        ]  # fmt: skip
    if name == "tokenizer_speed":
        return [_row(name, "throughput, NumberTokenizer / raw", result["ratio"], ">=", 0.5)]
    if name == "train_step":
        note = f"FLOPs ratio x{result['flops_ratio_to_lora']['numadapter']:.4f}"
        return [_row(name, "step time, numadapter / lora", result["ratio_to_lora"]["numadapter"], "<=", 1.03, note)]
    if name == "ntl_overhead":
        key = "cpu" if clock == "thread" else "wall"
        rows = []
        for scenario, target in (("loss", 1.02), ("step", 1.01)):
            if scenario in result:
                res = result[scenario][key]
                note = f"{key} clock; NTL's own work timed alone: x{res['ratio_ce_plus_ntl_work_vs_ce']:.4f}"
                rows.append(_row(name, f"{scenario}: (CE + NTL) / CE", res["ratio_fused_ce_ntl_vs_ce"], "<=", target,
                                 note))  # fmt: skip
        return rows
    if name == "generate_speed":
        rows = []
        for res in result:
            cfg = res["config"]
            note = f"same ids as hf: {res['same_ids']}; vs hf_base x{res['ratio_vs_hf_base']:.3f}"
            metric = f"ms/token, numadapter / hf generate ({cfg['hidden']}x{cfg['layers']})"
            rows.append(_row(name, metric, res["ratio_vs_hf_adapted"], "<=", 1.05, note))
            habit = f"ms/token, adapted model.generate / base model.generate ({cfg['hidden']}x{cfg['layers']})"
            rows.append(_row(name, habit, res["model_generate_ratio_vs_hf_base"], "<=", 1.05, "number-aware loop"))
        return rows
    if name == "train_throughput":
        ratios, ref = result["epoch_time_ratio"], result["setup"]["reference"]
        rows = []
        if f"digits/{ref}" in ratios:
            fed = result["methods"][ref]["train_format"]
            note = "FoNE paper Table 1: 3.6" + (
                f"; {ref} trained on the prompts alone (the paper's format)" if fed == "head" else ""
            )
            rows.append(_row(name, f"epoch time, digits / {ref}", ratios[f"digits/{ref}"], ">=", 4.0, note))
        if f"subword/{ref}" in ratios:
            rows.append(_row(name, f"epoch time, subword / {ref}", ratios[f"subword/{ref}"], None, None,
                             "FoNE paper Table 1: 2.0"))  # fmt: skip
        if result.get("sequence_ratio") is not None:
            note = f"{ref} fed prompt + answer + eos, as the digit-wise baseline is"
            rows.append(_row(name, f"epoch time, digits / {ref}_sequence", result["sequence_ratio"], None, None,
                             note))  # fmt: skip
        if result.get("ceiling") is not None:
            note = f"the same Llama on {ref}'s token ids without number work: the sequence length alone"
            rows.append(_row(name, f"epoch time, digits / {ref}_ids_only (ceiling)", result["ceiling"], None, None,
                             note))  # fmt: skip
        return rows
    if name == "dataset_size":
        return [
            _row(
                name,
                f"prepared Arrow bytes, dense / sparse ({run['method']})",
                run["ratio_arrow"],
                None,
                None,
                f"number columns alone x{run['ratio_numbers']:.2f}; {run['examples']} examples",
            )
            for run in result["runs"]
        ]
    if name == "real":
        return _real_rows(result)
    raise ValueError(f"unknown benchmark {name!r}; choose from {', '.join(BENCHMARKS)}.")


def _real_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The headline rows of `eval_harness.bench.real` (SmolLM2-135M-Instruct)."""
    step, epoch, gen, memory = (result[k] for k in ("train_step", "epoch", "generate", "memory"))
    seq = epoch["seq_len_mean"]
    rss = f"; peak RSS x{memory['rss_ratio']:.3f}" if "rss_ratio" in memory else ""
    return [
        _row("real", "step time, fone / lora (SmolLM2-135M)", step["ratio"], "<=", 1.03,
             f"FLOPs x{step['flops_ratio']:.4f}; same ids and shapes, batch {result['setup']['batch']}"),
        _row("real", "epoch time, digits / fone (SmolLM2-135M adapter)", epoch["ratio"], None, None,
             f"tokens per example: digits {seq['digits']:.1f}, fone {seq['fone']:.1f}"),
        _row("real", "ms/token, adapted model.generate / base generate (SmolLM2-135M)", gen["ratio"], "<=", 1.05,
             f"PEFT LoRA alone / base x{gen['lora_ratio']:.3f}, adapted / LoRA x{gen['ratio_to_lora']:.3f}; same "
             f"ids: {gen['same_ids']}"),
        _row("real", "trainable parameters, fone / lora (SmolLM2-135M)", memory["trainable_ratio"], "<=", 1.01,
             f"saved adapter bytes x{memory['bytes_ratio']:.4f}{rss}"),
    ]  # fmt: skip


def machine_info(device: str | None = None) -> dict[str, Any]:
    """CPU count, versions, torch threads, device, date and load average of this run."""
    import transformers

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    info: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch_threads": torch.get_num_threads(),  # torch's setting before any benchmark (--threads changes it)
        "device": device,
        "device_name": torch.cuda.get_device_name(0)
        if device.startswith("cuda") and torch.cuda.is_available()
        else (platform.processor() or platform.machine()),
        "load_avg": list(os.getloadavg()),
    }
    return {**info, **git_commit()}


def _fmt_target(row: dict[str, Any]) -> str:
    return "reference only" if row["op"] is None else f"{row['op']} {row['target']:g}"


def _fmt_met(row: dict[str, Any]) -> str:
    return {True: "yes", False: "**no**", None: "n/a"}[row["met"]]


def to_markdown(report: dict[str, Any]) -> str:
    """``bench.md``: the machine line, the headline table (benchmark, measured, target, met?) and the setups."""
    m, options = report["machine"], report["options"]
    threads = m["torch_threads"] if options["threads"] is None else options["threads"]
    lines = [
        "# numadapter speed benchmarks",
        "",
        f"`{report['command']}` on {m['date']}: {m['cpu_count']} CPUs ({m['device_name']}), device {m['device']}, "
        f"torch {m['torch']}, {threads} torch thread(s), {options['clock']} clock, load average "
        f"{m['load_avg'][0]:.2f} at the start{', quick sizes (noisy)' if options['quick'] else ''}.",
        "",
        "| benchmark | measured ratio | target | met? |",
        "|---|---|---|---|",
    ]
    for row in report["summary"]:
        value = "error" if row["value"] is None else f"{row['value']:.3f}"
        lines.append(f"| {row['benchmark']}: {row['metric']} | {value} | {_fmt_target(row)} | {_fmt_met(row)} |")
    lines += ["", "## Setups and notes", ""]
    for name, entry in report["benchmarks"].items():
        lines.append(f"- **{name}** ({entry['seconds']:.0f} s, `python -m eval_harness.bench.{name} "
                     f"{' '.join(entry['argv'])}`)".replace(" `)", "`)"))  # fmt: skip
        if "error" in entry:
            lines.append(f"  - error: `{entry['error']}`")
        for row in report["summary"]:
            if row["benchmark"] == name and row["note"]:
                lines.append(f"  - {row['metric']}: {row['note']}")
    return "\n".join(lines) + "\n"


def run_all(
    out_dir: str | os.PathLike = DEFAULT_OUT,
    *,
    quick: bool = False,
    only: list[str] | None = None,
    threads: int | None = None,
    clock: str = "wall",
    device: str | None = None,
    command: str = "python -m eval_harness.bench",
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Runs the benchmarks one after the other and writes ``bench.json`` and ``bench.md`` into `out_dir`.

    Args:
        out_dir: the output directory (created).
        quick: small sizes and few repetitions (`QUICK_ARGS`).
        only: the benchmarks to run (default: `DEFAULT`, every one of `BENCHMARKS` but ``real``).
        threads: ``--threads`` for the benchmarks that take it.
        clock: ``"wall"`` or ``"thread"`` (needs ``threads=1``) for the benchmarks that take it.
        device: ``--device`` for the benchmarks that take it (generate_speed always runs on the CPU).
        command: the command line recorded in the report.
        log: where progress lines go.

    Returns:
        The report: ``machine``, ``options``, ``summary`` (headline rows), ``benchmarks`` (per benchmark: argv,
        seconds, full result or error) and ``failed`` (names of benchmarks that raised).
    """
    check_clock(clock)
    if clock == "thread" and threads != 1:
        raise ValueError(f"--clock thread times one thread's CPU time and needs --threads 1, got threads={threads}.")
    names = list(only) if only else list(DEFAULT)
    for name in names:
        if name not in BENCHMARKS:
            raise ValueError(f"unknown benchmark {name!r}; choose from {', '.join(BENCHMARKS)}.")
    report: dict[str, Any] = {
        "schema": "eval_harness.bench/1",
        "command": command,
        "machine": machine_info(device),
        "options": {"quick": quick, "only": names, "threads": threads, "clock": clock, "device": device},
        "summary": [],
        "benchmarks": {},
        "failed": [],
    }
    saved_threads = torch.get_num_threads()
    for index, name in enumerate(names, 1):
        argv = bench_argv(name, quick, threads, clock, device)
        log(f"\n=== [{index}/{len(names)}] {name}: python -m eval_harness.bench.{name} {' '.join(argv)}".rstrip())
        start = time.perf_counter()
        entry: dict[str, Any] = {"argv": argv}
        try:
            result = importlib.import_module(f"eval_harness.bench.{name}").main(argv)
            entry["result"] = result
            report["summary"] += headlines(name, result, clock)
        except Exception as err:  # keep going: one broken benchmark should not hide the others' numbers
            log(traceback.format_exc())
            entry["error"] = f"{type(err).__name__}: {err}"
            report["failed"].append(name)
            report["summary"].append(_row(name, "(failed)", None, None, None, entry["error"]))
        finally:
            torch.set_num_threads(saved_threads)
        entry["seconds"] = time.perf_counter() - start
        report["benchmarks"][name] = entry
        log(f"=== {name} done in {entry['seconds']:.1f} s")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "bench.json", report)
    (out / "bench.md").write_text(to_markdown(report), encoding="utf-8")
    log("\n" + "\n".join(line for line in to_markdown(report).splitlines() if line.startswith("|")))
    log(f"\nwrote {out / 'bench.json'} and {out / 'bench.md'}")
    return report


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m eval_harness.bench", description=__doc__.splitlines()[0],
        epilog=f"benchmarks: {', '.join(BENCHMARKS)}; each also runs alone: python -m eval_harness.bench.NAME --help",
    )  # fmt: skip
    parser.add_argument("--out", default=None, help=f"output directory (default: {DEFAULT_OUT})")
    parser.add_argument("--quick", action="store_true", help="small sizes, few repetitions (smoke runs, tests)")
    parser.add_argument("--only", default=None, help=f"comma-separated subset of: {','.join(BENCHMARKS)}")
    parser.add_argument(
        "--real", action="store_true", help="add the real-checkpoint comparisons (SmolLM2-135M, 3-5 min; alone: "
        f"the only benchmark, written to {REAL_OUT} unless --out)"
    )  # fmt: skip
    parser.add_argument("--threads", type=int, default=None, help="torch threads for the benchmarks that take it")
    parser.add_argument(
        "--clock", default="wall", choices=["wall", "thread"], help="thread: CPU time of one thread (--threads 1)"
    )
    parser.add_argument("--device", default=None, help="cpu / cuda for the benchmarks that take it")
    return parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        only = select(args.only, args.real)
        if args.clock == "thread" and args.threads != 1:
            raise ValueError(f"--clock thread needs --threads 1, got --threads {args.threads}.")
    except ValueError as err:
        parser.error(str(err))
    command = " ".join(["python -m eval_harness.bench", *(sys.argv[1:] if argv is None else argv)])
    out = args.out or (REAL_OUT if only == ["real"] else DEFAULT_OUT)
    return run_all(out, quick=args.quick, only=only, threads=args.threads, clock=args.clock,
                   device=args.device, command=command)  # fmt: skip


if __name__ == "__main__":
    main()
