"""``python -m eval_harness``: list tasks, generate their data, train and evaluate methods, write reports.

Subcommands:
    tasks      list the built-in tasks with their descriptions, split sizes and metrics.
    generate   write examples of one task split as JSON Lines (stdout or --out).
    run        train and evaluate methods on a preset's tables (`eval_harness.presets`), one JSON per run, then
               the markdown report and PNG plots (`eval_harness.report`).
    report     rebuild the report from existing result files.
    pretrain-base
               pretrain a small base LM on generated text with numbers and save it (model + tokenizer) for the
               adapter tables (``run --base DIR``), see `eval_harness.pretrain`.

Heavy imports (torch, transformers, numadapter) happen inside the commands, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

DEFAULT_RESULTS = Path("eval_harness") / "results"


def _epilog() -> str:
    from .arms import METHODS
    from .presets import PRESETS
    from .tasks import TASKS

    lines = ["tasks:", "  " + ", ".join(TASKS), "", "methods:"]
    width = max(len(name) for name in METHODS)
    for name, method in METHODS.items():
        lines.append(f"  {name:<{width}}  {method.description} [{'/'.join(method.regimes)}]")
    lines += ["", "presets:"]
    for name, preset in PRESETS.items():
        tables = ", ".join(e.name for e in preset.experiments)
        lines.append(f"  {name:<{width}}  {preset.description} (tables: {tables}; default device {preset.device})")
    lines += ["", "example: python -m eval_harness run --preset cpu-small --experiments data_size"]
    return "\n".join(lines)


def _csv(kind: type):
    def parse(text: str) -> list:
        try:
            return [kind(item) for item in text.split(",") if item.strip()]
        except ValueError as err:
            message = f"expected a comma-separated list of {kind.__name__}, got {text!r}"
            raise argparse.ArgumentTypeError(message) from err

    return parse


def make_parser() -> argparse.ArgumentParser:
    """The argument parser (separate from `main` so tests and docs can inspect it)."""
    parser = argparse.ArgumentParser(
        prog="python -m eval_harness",
        description="numadapter evaluation harness: tasks from the FoNE, xVal, NTL and digit-aggregation papers, "
        "methods compared on the same data, model and budget.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    sub.add_parser("tasks", help="list tasks with descriptions, split sizes and metrics")

    gen = sub.add_parser(
        "generate",
        help="write examples of a task split as JSON Lines",
        description="Write the first N examples of a task split as JSON Lines, one object per line with keys "
        "prompt, target, answer, sep, metadata (and split).",
    )
    gen.add_argument("--task", required=True, help="task name (see `python -m eval_harness tasks`)")
    gen.add_argument("--split", default="test", help="split name, e.g. train, valid, test (default: test)")
    gen.add_argument("--n", type=int, default=None, help="number of examples (default: the task's split size)")
    gen.add_argument("--seed", type=int, default=0, help="seed fixing the split partition and order (default: 0)")
    gen.add_argument("--out", type=Path, default=None, help="output .jsonl file (default: print to stdout)")

    run = sub.add_parser(
        "run",
        help="train and evaluate methods on a preset's tables; write JSON results, a markdown report and plots",
        description="Train and evaluate methods on the tables of a preset. Every option below overrides the "
        "preset for all its tables.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--preset", default="cpu-small", help="preset name (default: cpu-small)")
    run.add_argument("--experiments", type=_csv(str), default=None, help="only these tables, e.g. data_size")
    run.add_argument("--methods", type=_csv(str), default=None, help="only these methods, e.g. fone,digits")
    run.add_argument("--task", default=None, help="replace the tables' task")
    run.add_argument("--train-sizes", type=_csv(int), default=None, help="replace the training sizes, e.g. 3200,6400")
    run.add_argument("--model-sizes", type=_csv(int), default=None, help="replace the FoNE Table 6 sizes, e.g. 1,2")
    run.add_argument("--epochs", type=int, default=None, help="epochs (the budget; same for every method)")
    run.add_argument(
        "--steps", type=int, default=None, help="budget in optimizer steps: each training size gets as many epochs"
    )
    run.add_argument(
        "--max-steps", type=int, default=None,
        help="an exact budget in optimizer steps for every run (replaces the preset's, e.g. pretrained's per-method "
        "budgets)",
    )  # fmt: skip
    run.add_argument("--batch-size", type=int, default=None, help="examples per optimizer step")
    run.add_argument("--lr", type=float, default=None, help="one peak learning rate for every method")
    run.add_argument("--schedule", choices=["cosine", "constant", "wsd"], default=None, help="learning-rate schedule")
    run.add_argument("--warmup", type=float, default=None, help="warmup as a fraction of the steps")
    run.add_argument("--weight-decay", type=float, default=None, help="AdamW weight decay of the weight matrices")
    run.add_argument("--n-test", type=int, default=None, help="test examples")
    run.add_argument("--n-valid", type=int, default=None, help="validation examples for the accuracy curve")
    run.add_argument("--eval-every", type=int, default=None, help="validate every N epochs (0: never)")
    run.add_argument(
        "--eval-every-steps",
        type=int,
        default=None,
        help="validate every N optimizer steps (0: never; needs --n-valid)",
    )
    run.add_argument(
        "--seed", type=int, default=None, help="one seed of data, init and batch order (default: the tables' seeds)"
    )
    run.add_argument(
        "--seeds",
        type=_csv(int),
        default=None,
        help="several seeds, one run each, e.g. 0,1,2 (replaces the tables' seeds; the report adds mean ± std)",
    )
    run.add_argument("--device", default=None, help="cpu, cuda, cuda:1, mps (default: the preset's)")
    run.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    run.add_argument(
        "--train-format",
        choices=["auto", "sequence"],
        default=None,
        help="auto (default): FoNE / xVal train on the prompts alone when every answer is one [NUM], the head at "
        "the last prompt position on the answer (the FoNE paper's format); sequence: every method on prompt + "
        "answer + eos",
    )
    run.add_argument(
        "--train-path",
        choices=["harness", "product"],
        default="harness",
        help="harness (default): the harness's own training loop and encoder; product: numadapter methods train "
        "through numadapter.NumberSFTTrainer (NumberTokenizer, NumberDataCollator, answer_format='head' where the "
        "harness trains the head format) and predict with numadapter.generate; lora too, as numadapter's plain LoRA "
        "(encoding='digits', no [AGG] or NTL, EOS rows frozen); the other plain methods keep the harness loop. "
        "Results go to eval_harness/results/PRESET-product by default, files ending in -product",
    )
    run.add_argument(
        "--base", default=None,
        help="pretrained base (path) for the adapter tables (default: the preset's; pretrained: "
        "numadapter.smollm2_path())",
    )  # fmt: skip
    run.add_argument("--lora-r", type=int, default=16, help="LoRA rank (adapter tables; default 16)")
    run.add_argument("--lora-alpha", type=int, default=32, help="LoRA alpha (adapter tables; default 32)")
    run.add_argument(
        "--lora-targets",
        type=_csv(str),
        default=None,
        help="LoRA target modules (default: q,k,v,o,gate,up,down _proj)",
    )
    run.add_argument(
        "--set",
        dest="number_settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a NumberAdapterConfig field for the numadapter methods (repeatable; VALUE is JSON or a string), "
        "e.g. --set fone_head_input=linear",
    )
    run.add_argument("--out", type=Path, default=None, help="results directory (default: eval_harness/results/PRESET)")
    run.add_argument("--resume", action="store_true", help="skip runs whose result file exists")
    run.add_argument("--dry-run", action="store_true", help="list the runs and exit")

    rep = sub.add_parser("report", help="rebuild report.md and the plots from result files")
    rep.add_argument("--results", type=Path, required=True, help="results directory (searched recursively)")
    rep.add_argument("--out", type=Path, default=None, help="markdown path (default: RESULTS/report.md)")

    from .pretrain import DEFAULT

    pre = sub.add_parser(
        "pretrain-base",
        help="pretrain a small base LM on generated text with numbers, for the adapter tables (--base DIR)",
        description="Pretrain a small causal LM from scratch on generated text with numbers (numadapter's toy "
        "corpus, counting, copying and comparing numbers; no arithmetic task) with numadapter's digit-wise toy "
        "tokenizer, and save model and tokenizer with save_pretrained, so that `run --experiments adapter --base "
        "DIR` fine-tunes adapters on it. Defaults: a base for the cpu-small adapter table, a few minutes on 2 cores.",
    )
    pre.add_argument("--out", type=Path, required=True, help="directory to write the base into")
    pre.add_argument("--family", choices=["llama", "granite"], default=DEFAULT.family, help="model family")
    pre.add_argument("--hidden", type=int, default=DEFAULT.hidden, help=f"hidden size (default {DEFAULT.hidden})")
    pre.add_argument("--layers", type=int, default=DEFAULT.layers, help=f"layers (default {DEFAULT.layers})")
    pre.add_argument("--heads", type=int, default=None, help="attention heads (default: hidden / 32, at least 2)")
    pre.add_argument("--steps", type=int, default=DEFAULT.steps, help=f"optimizer steps (default {DEFAULT.steps})")
    pre.add_argument(
        "--batch-size", type=int, default=DEFAULT.batch_size, help=f"lines per step (default {DEFAULT.batch_size})"
    )
    pre.add_argument("--seed", type=int, default=0, help="seed of the text, the init and the batches (default 0)")
    pre.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    return parser


def _list_tasks(out: TextIO) -> None:
    from .tasks import TASKS

    width = max(len(name) for name in TASKS)
    for name, task in TASKS.items():
        sizes = ", ".join(f"{split} {size:,}" for split, size in task.splits.items())
        out.write(f"{name:<{width}}  {task.description}\n")
        out.write(f"{'':<{width}}  splits: {sizes}; metrics: {', '.join(task.metrics)}; source: {task.source}\n")


def _generate(args: argparse.Namespace, out: TextIO) -> None:
    from .tasks import get_task

    task = get_task(args.task)
    examples = task.generate(args.split, n=args.n, seed=args.seed)
    lines = [json.dumps({**e.to_dict(), "split": args.split}, ensure_ascii=False) + "\n" for e in examples]
    if args.out is None:
        out.writelines(lines)
        return
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as handle:
        handle.writelines(lines)
    out.write(f"wrote {len(lines)} examples of {task.name}/{args.split} (seed {args.seed}) to {args.out}\n")


def _settings(items: Sequence[str]) -> dict:
    from numadapter.integrations.command_line import parse_settings

    return parse_settings(items, flag="--set", form="KEY=VALUE", example="fone_head_input=linear")


def _run(args: argparse.Namespace, out: TextIO) -> None:
    from dataclasses import replace

    from .arms import get_method
    from .arms.sizes import LoraSettings
    from .presets import expand, get_preset

    preset = get_preset(args.preset)
    for name in args.methods or []:
        get_method(name)
    lora = LoraSettings(r=args.lora_r, alpha=args.lora_alpha)
    if args.lora_targets:
        lora = LoraSettings(r=args.lora_r, alpha=args.lora_alpha, target_modules=tuple(args.lora_targets))
    skipped: list[str] = []
    specs = expand(
        preset, experiments=args.experiments, methods=args.methods, train_sizes=args.train_sizes,
        model_sizes=args.model_sizes, steps=args.steps, max_steps=args.max_steps, base=args.base, lora=lora,
        skipped=skipped, task=args.task, epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
        schedule=args.schedule, warmup=args.warmup, weight_decay=args.weight_decay, n_test=args.n_test,
        n_valid=args.n_valid, eval_every=args.eval_every, eval_every_steps=args.eval_every_steps, seed=args.seed,
        seeds=args.seeds, device=args.device or preset.device, threads=args.threads,
        train_format=args.train_format,
    )  # fmt: skip
    settings = _settings(args.number_settings)
    if settings:
        numadapter = [s for s in specs if get_method(s.method).backend == "numadapter"]
        specs = [replace(s, number_settings=settings) for s in numadapter]
    if args.train_path == "product":
        specs = [replace(s, train_path="product") if get_method(s.method).on_product_path else s for s in specs]
        plain = sorted({s.method for s in specs if s.train_path != "product"})
        if plain:
            out.write(f"train-path product: the plain methods {', '.join(plain)} keep the harness loop\n")
    for line in skipped:
        out.write(f"skipped table {line}\n")
    if not specs:
        raise ValueError("no runs to do: check --experiments / --methods (and --base for adapter tables).")
    default_dir = DEFAULT_RESULTS / (preset.name + ("-product" if args.train_path == "product" else ""))
    results_dir = args.out if args.out is not None else default_dir
    if args.dry_run:
        for spec in specs:
            out.write(
                f"{spec.experiment}/{spec.run_id}  lr={spec.lr:g} epochs={spec.epochs} "
                f"{'' if spec.max_steps is None else f'max_steps={spec.max_steps} '}device={spec.device} "
                f"train_format={spec.train_format} train_path={spec.train_path}\n"
            )
        return
    from .report import build_report
    from .runner import run_specs

    if specs[0].device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise ValueError(f"--device {specs[0].device} was asked for but CUDA is not available: pass --device cpu.")
    run_specs(specs, results_dir, resume=args.resume, log=lambda line: out.write(line + "\n"))
    report = build_report(results_dir)
    out.write(f"report: {report}\n")


def _pretrain(args: argparse.Namespace, out: TextIO) -> None:
    from .pretrain import BaseSettings, pretrain_base

    settings = BaseSettings(
        family=args.family, hidden=args.hidden, layers=args.layers, heads=args.heads, steps=args.steps,
        batch_size=args.batch_size,
    )  # fmt: skip
    info = pretrain_base(
        args.out, settings, seed=args.seed, threads=args.threads, print_fn=lambda s: out.write(s + "\n")
    )
    probes = ", ".join(f"{skill} {100 * share:.0f}%" for skill, share in info["skills"].items())
    out.write(
        f"saved a {info['family']} base ({info['params'] / 1e6:.2f}M parameters, held-out loss "
        f"{info['heldout_loss']:.3f}, probes answered: {probes}) to {args.out} in {info['seconds']:.0f} s; use it "
        f"with: python -m eval_harness run --preset cpu-small --experiments adapter --base {args.out}\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 with a message on bad input)."""
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "tasks":
            _list_tasks(sys.stdout)
        elif args.command == "generate":
            _generate(args, sys.stdout)
        elif args.command == "run":
            _run(args, sys.stdout)
        elif args.command == "report":
            from .report import build_report

            sys.stdout.write(f"report: {build_report(args.results, args.out)}\n")
        elif args.command == "pretrain-base":
            _pretrain(args, sys.stdout)
    except (ValueError, TypeError) as err:
        parser.exit(2, f"error: {err}\n")
    return 0
