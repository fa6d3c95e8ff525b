"""The `numadapter` command line.

Commands (``numadapter COMMAND --help`` shows each one's options):
    numadapter quickstart [--model PATH] [--out DIR] [--tiny] [--steps N | --seconds S]
        offline, on the installed SmolLM2-135M (``--model PATH`` another, ``--tiny`` a toy Llama built here):
        fine-tunes FoNE + LoRA and a LoRA-only baseline on addition, prints a before/after table, exports the
        merged model, reloads it and generates (`numadapter.app.quickstart`).
    numadapter train --config RECIPE.yaml [section.key=value ...]
        trains the recipe's adapter (`numadapter.app.commands.train`); launch it with ``accelerate launch`` /
        ``torchrun`` for many processes: ``accelerate launch --config_file recipes/accelerate/zero3.yaml
        -m numadapter.app.cli train --config ...``.
    numadapter eval --config RECIPE.yaml [--adapter DIR | --exported DIR] [section.key=value ...]
        exact match and mean absolute error of generated answers on the recipe's evaluation data.
    numadapter export --adapter DIR --out DIR [--base PATH] [--tokenizer DIR] [--dtype DTYPE]
        merges a saved adapter into its base offline (also after DeepSpeed ZeRO-3 training) (`numadapter.export`).
    numadapter validate --config RECIPE.yaml [--portable] [section.key=value ...]
        checks a recipe without loading a model: keys, types, training arguments, DeepSpeed config, and what
        ``train`` checks on this machine (`numadapter.app.commands.check_runnable`: model directory or hub id, GGUF
        file, bf16 support, data files); ``--portable`` skips this machine's checks.
    numadapter tour [--out DIR] [--text TEXT]
        what NumberTokenizer does to numbers in text, on a small local tokenizer (seconds, no model).

Heavy imports happen inside the commands so `numadapter --help` stays fast.

``train``, ``validate``, ``eval`` and ``export`` take ``--import MODULE`` (repeatable): the modules are imported
before anything else, so a number method registered there (`numadapter.methods.register_method`) can be named by a
recipe's ``adapter.encoding`` or be the encoding of a saved adapter.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence

DEMO_TEXT = (
    "Invoice 2024-117: 12,345.67 dollars for 3 pallets of 1,250 kg, paid at 6.5% interest; "
    "Avogadro's number is 6.02214076e23 and 123456789012345678901234567890 has 30 digits."
)
IMPORT_HELP = (
    "a Python module to import first (repeatable), e.g. one that registers a number method with "
    "numadapter.methods.register_method so that its encoding name can be used"
)
OVERRIDES_HELP = "recipe overrides section.key=value, e.g. training.max_steps=10 adapter.r=8 (values parsed as YAML)"


def make_parser() -> argparse.ArgumentParser:
    """The argument parser of every command (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="numadapter", description="Teach pretrained language models to read and write numbers as numbers."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    quick = sub.add_parser(
        "quickstart",
        help="offline: FoNE + LoRA vs LoRA-only on addition, before/after table, export, reload, generate",
        description="Offline quick start on the real SmolLM2-135M-Instruct that the install brings: fine-tunes FoNE + "
        "LoRA and a LoRA-only baseline on digit tokens with the same data and the same wall time on addition of 3-4 "
        "digit numbers, prints the curve, exact match and mean absolute error on held-out problems and which won, "
        "exports the merged FoNE model, reloads it and generates answers. About 10 minutes on 2 CPU cores. With "
        "--model it fine-tunes that checkpoint instead.",
    )
    quick.add_argument(
        "--model", default=None, help="a local directory or hub id to fine-tune instead of SmolLM2-135M-Instruct"
    )
    quick.add_argument("--out", default=None, help="directory for models and the export (default: a temporary one)")
    quick.add_argument(
        "--tiny", action="store_true", help="a seconds-long smoke run on a toy base (tests); its numbers mean nothing"
    )
    quick.add_argument("--steps", type=int, default=None, help="a step budget per adapter instead of wall time")
    quick.add_argument(
        "--seconds", type=float, default=None, help="wall-time budget of each adapter's training (default 160)"
    )
    quick.add_argument("--seed", type=int, default=0, help="seed of the data, the models and the training")

    for name, text in (("train", "train an adapter from a recipe"), ("validate", "check a recipe without training")):
        command = sub.add_parser(
            name, help=text, description=f"{text[0].upper()}{text[1:]} (recipes/<family>/*.yaml)."
        )
        command.add_argument("--config", required=True, help="the recipe YAML file")
        add_import_option(command)
        if name == "validate":
            command.add_argument(
                "--portable", action="store_true", help="check only the recipe itself, not whether this machine can "
                "run it (model sources, GGUF file, bf16 support, data files), e.g. for a recipe meant for a GPU"
            )  # fmt: skip
        command.add_argument("overrides", nargs="*", metavar="section.key=value", help=OVERRIDES_HELP)

    ev = sub.add_parser(
        "eval",
        help="exact match / mean absolute error of generated answers",
        description="Generates answers for the recipe's evaluation data and scores the last number of each against "
        "the reference (exact match, mean absolute error). Loads the adapter from --adapter (default: the recipe's "
        "training.output_dir) onto model.name_or_path, or an exported model from --exported.",
    )
    ev.add_argument("--config", required=True, help="the recipe YAML file")
    which = ev.add_mutually_exclusive_group()
    which.add_argument("--adapter", default=None, help="a saved adapter directory (default: training.output_dir)")
    which.add_argument("--exported", default=None, help="an export directory (numadapter export)")
    add_import_option(ev)
    ev.add_argument("overrides", nargs="*", metavar="section.key=value", help=OVERRIDES_HELP)

    ex = sub.add_parser(
        "export",
        help="merge a saved adapter into its base: one self-contained directory",
        description="Merges a saved adapter (numadapter train's output_dir or a checkpoint-N directory) into its "
        "base model offline and writes model + tokenizer + number modules (safetensors + JSON) to --out. This is "
        "also how to export after DeepSpeed ZeRO-3 training, where PEFT cannot merge.",
    )
    ex.add_argument("--adapter", required=True, help="the saved adapter directory")
    ex.add_argument("--out", required=True, help="the export directory")
    ex.add_argument("--base", default=None, help="base model directory / hub id (default: from adapter_config.json)")
    ex.add_argument("--tokenizer", default=None, help="NumberTokenizer directory (default: the adapter directory)")
    ex.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"], help="export dtype")
    add_import_option(ex)

    tour_cmd = sub.add_parser(
        "tour",
        help="what NumberTokenizer does to numbers in text (seconds, no model)",
        description="Offline tour of numadapter's tokenization on a small tokenizer trained locally.",
    )
    tour_cmd.add_argument("--out", default=None, help="directory for the local tokenizer (default: a temporary one)")
    tour_cmd.add_argument("--text", default=DEMO_TEXT, help="the text to show (default: a number-heavy sentence)")
    return parser


def add_import_option(command: argparse.ArgumentParser) -> None:
    """Adds ``--import MODULE`` (repeatable) to a command that reads a recipe or a saved adapter."""
    command.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE", help=IMPORT_HELP)


def import_modules(names: Sequence[str]) -> None:
    """Imports the ``--import`` modules; `FileNotFoundError` (exit status 2) naming one that cannot be found."""
    import importlib

    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            raise FileNotFoundError(
                f"--import {name}: {exc}; give an importable module name (on PYTHONPATH or installed), as for "
                "`python -c 'import MODULE'`."
            ) from exc


def tour(text: str = DEMO_TEXT, out: str | None = None, print_fn=print) -> dict[str, int]:
    """Runs the tokenizer tour and returns the token counts it printed (raw, FoNE, digits) for `text`.

    Args:
        text: the text to tokenize.
        out: directory to save the local tokenizer to (a temporary directory when None).
        print_fn: where lines go (``print`` by default).

    Returns:
        ``{"raw": ..., "fone": ..., "digits": ..., "numbers": ...}`` token and number counts for `text`.
    """
    import math

    from numadapter import NumberAdapterConfig, NumberTokenizer, find_numbers, fone_decode, fone_features
    from numadapter.testing.toy import build_tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        base = build_tokenizer("llama3", out or tmp)
        print_fn(f"Text:\n  {text}\n")
        spans = find_numbers(text)
        print_fn(f"find_numbers found {len(spans)} numbers (exact, never via float64):")
        for span in spans:
            print_fn(f"  {span.text!r:36} -> {span.exact}")

        raw_ids = base(text, add_special_tokens=False)["input_ids"]
        print_fn(f"\nA Llama-3-style tokenizer cuts them into digit groups ({len(raw_ids)} tokens):")
        print_fn("  " + " | ".join(base.convert_ids_to_tokens(raw_ids)).replace("\u0120", "_"))

        # every number a [NUM], to show them all (the default writes as [NUM] only answers the head computes)
        config = NumberAdapterConfig(encoding="fone", int_digits=30, frac_digits=4, fone_numbers="all")
        ntok = NumberTokenizer(base, config)
        enc = ntok(text, add_special_tokens=False)
        ids = enc["input_ids"]
        print_fn(f"\nNumberTokenizer (encoding='fone'): one [NUM] per number ({len(ids)} tokens):")
        print_fn("  " + " | ".join(ntok.tokenizer.convert_ids_to_tokens(ids)).replace("\u0120", "_"))
        kept = len(enc["number_texts"])
        print_fn(
            f"  {kept} numbers became [NUM] (exact digits ride along in side tensors); {len(spans) - kept} stay "
            f"text (beyond int_digits={config.int_digits}/frac_digits={config.frac_digits}, out_of_range='text')."
        )
        print_fn(f"  decode(encode(text)) == text: {ntok.decode(enc) == text}")

        big = "123456789012345678901234567890"
        feats = fone_features([big], int_digits=30, frac_digits=0)
        print_fn(f"\nFoNE features of {big} (int_digits=30): {feats.shape[1]} values, cos/sin(2*pi*x/10^i)")
        print_fn(f"  fone_decode(features) = {fone_decode(feats, 30, 0)[0]}  (exact)")
        naive = [math.cos(2 * math.pi * float(big) / 10**i) for i in (1, 2, 3)]
        exact = feats[0, 0:6:2].tolist()
        print_fn(
            "  cos for periods 10, 100, 1000 from exact digits: "
            + ", ".join(f"{v:+.4f}" for v in exact)
            + "\n  the same from float64(x):                        "
            + ", ".join(f"{v:+.4f}" for v in naive)
        )

        digits = NumberTokenizer(base, NumberAdapterConfig(encoding="digits", aggregate=True, int_digits=30))
        n_digits = len(digits(text, add_special_tokens=False)["input_ids"])
        print_fn(f"\nencoding='digits' + [AGG]: one token per digit plus [AGG] per number ({n_digits} tokens).")
    return {"raw": len(raw_ids), "fone": len(ids), "digits": n_digits, "numbers": kept}


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one command; returns the exit status (2 for a bad recipe, argument or missing file, as argparse does)."""
    parser = make_parser()
    args = parser.parse_args(argv)
    from numadapter.app.recipe import RecipeError

    try:
        status = _run(args)
        close_process_group(wait=True)  # every process done: close together
        return status
    except (RecipeError, FileNotFoundError) as exc:  # bad input: the message says what to change; others: traceback
        print(f"numadapter {args.command}: error: {exc}", file=sys.stderr)
        return 2
    finally:
        close_process_group()  # after an error: no barrier (another process may never reach it)


def close_process_group(wait: bool = False) -> None:
    """Destroys the default process group if a launched command (torchrun / accelerate launch) initialised one.

    Without it the gloo / DeepSpeed communicator threads are torn down by interpreter exit, in no set order; a
    worker can then abort with ``terminate called without an active exception`` after its work is done.

    Args:
        wait: first wait at a barrier until every process got here, so that none tears its connections down while
            another still uses them (the main process saves, prints and exports after the others are done: a
            ZeRO-3 run aborted there once in CI). Only after a command that succeeded: a process that failed may
            never reach the barrier.
    """
    if "torch.distributed" not in sys.modules:  # never imported: nothing to close, and no torch import for --help
        return
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        if wait:
            dist.barrier()
        dist.destroy_process_group()


def _run(args: argparse.Namespace) -> int:
    import_modules(getattr(args, "imports", ()))
    if args.command == "tour":
        tour(text=args.text, out=args.out)
    elif args.command == "quickstart":
        from numadapter.app.quickstart import run_quickstart

        run_quickstart(
            model=args.model, out=args.out, tiny=args.tiny, steps=args.steps, seed=args.seed, seconds=args.seconds
        )
    elif args.command in ("train", "validate", "eval"):
        from numadapter.app.recipe import load_recipe

        if args.command == "validate":
            from numadapter.app.commands import validate

            recipe = validate(args.config, args.overrides, portable=args.portable)
            print(f"{args.config}: valid ({'Seq2SeqTrainingArguments' if recipe.seq2seq else 'SFTConfig'}).")
            return 0
        recipe = load_recipe(args.config, args.overrides)
        from numadapter.app import commands as entry

        if args.command == "train":
            entry.train(recipe)
        else:
            entry.evaluate(recipe, adapter=args.adapter, exported=args.exported)
    elif args.command == "export":
        from numadapter.app.commands import export

        export(args.adapter, args.out, base=args.base, tokenizer=args.tokenizer, dtype=args.dtype)
    return 0


if __name__ == "__main__":
    sys.exit(main())
