"""``python -m eval_harness.suite``: train and score arms on task families, and write the suite's report.

``run`` trains every requested arm on every requested family with `eval_harness.study.run_arm` (the product path),
each with the same training-time budget (``--seconds``) or step budget (``--steps``), and writes
``<out>/<family>/<arm>.json``. ``report`` writes ``<out>/README.md`` and the plots (`eval_harness.suite.report`).
``list`` prints the families.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from eval_harness.suite.families import FAMILIES, family, family_rows
from eval_harness.suite.gates import parse_settings

DEFAULT_OUT = Path(__file__).parent.parent / "results" / "suite"
DEFAULT_ARMS = ("lora_digits", "digits_ntl", "fone_tool_compute", "xval")
STEP_CAP = 100_000  # the step cap of a time-budgeted run: the budget always stops it first


def _names(text: str, known: list[str], what: str) -> list[str]:
    """A comma-separated list checked against `known` (``all``: every one)."""
    names = list(known) if text == "all" else [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown {what} {', '.join(map(repr, unknown)) or '(none given)'}: use 'all' or a comma-separated list "
            f"of {', '.join(known)}."
        )
    return names


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; ``run`` checks ``--families`` / ``--arms`` and needs a positive budget."""
    from eval_harness.study import ARMS

    parser = argparse.ArgumentParser(prog="python -m eval_harness.suite", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="train and score arms on families")
    run.add_argument("--families", default="all", type=lambda t: _names(t, list(FAMILIES), "family"))
    run.add_argument("--arms", default=",".join(DEFAULT_ARMS), type=lambda t: _names(t, sorted(ARMS), "arm"))
    run.add_argument("--seconds", type=float, default=None, help="training seconds per arm (default 300)")
    run.add_argument("--steps", type=int, default=None, help="optimizer steps per arm (with --seconds: a cap)")
    run.add_argument("--eval-every", type=int, default=100, help="score the held-out rows every N steps")
    run.add_argument("--schedule", default="constant_with_warmup",
                     choices=["constant_with_warmup", "linear", "cosine"],
                     help="the learning rate over --steps after the warmup (flat by default: a --seconds budget "
                     "far from the step cap is not cut short by a decay)")  # fmt: skip
    run.add_argument("--n-train", type=int, default=8000)
    run.add_argument("--n-eval", type=int, default=200)
    run.add_argument("--batch", type=int, default=32)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--retention", action=argparse.BooleanOptionalAction, default=True,
                     help="score every trained arm on the held-out base-known facts too")  # fmt: skip
    run.add_argument("--base", default=None, help="model directory (default: numadapter.smollm2_path())")
    run.add_argument("--out", type=Path, default=DEFAULT_OUT)
    run.add_argument("--note", default="")
    run.add_argument("--answers", action="store_true",
                     help="record every held-out answer after training: the text, and whether the head wrote its "
                     "last number (and with which combination) or the LM did in digits")  # fmt: skip
    run.add_argument("--gate-sweep", default=[], type=parse_settings,
                     help="after training, answer the held-out rows again under each ';'-separated setting of the "
                     "generation gates, e.g. 'fone_head_digit_check=0;fone_head_digit_check=2' "
                     "(eval_harness.suite.gates)")  # fmt: skip
    rep = sub.add_parser("report", help="table + plots from the JSON records")
    rep.add_argument("--out", type=Path, default=DEFAULT_OUT)
    sub.add_parser("list", help="the families")
    cov = sub.add_parser("coverage", help="the share of each family's answers FoNE's context head can form")
    cov.add_argument("--base", default=None, help="model directory (default: numadapter.smollm2_path())")
    cov.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.command == "run":
        if args.steps is None and args.seconds is None:
            args.seconds = 300.0
        budgets = {"--seconds": args.seconds, "--steps": args.steps, "--eval-every": args.eval_every,
                   "--n-train": args.n_train, "--n-eval": args.n_eval, "--batch": args.batch}  # fmt: skip
        for flag, value in budgets.items():
            if value is not None and value <= 0:
                parser.error(f"{flag} must be positive, got {value}: e.g. {flag} 100.")
    return args


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every family x arm of `args` through `run_arm`; returns the records (each also written as JSON)."""
    from eval_harness.study import ARMS, run_arm
    from eval_harness.suite import facts

    base = args.base
    facts_train: list[dict[str, str]] = []
    held_facts: list[dict[str, str]] = []
    if args.retention or "facts" in args.families:
        facts_train, held_facts = facts.fact_rows(facts.base_known(base, args.out), args.seed)
        print(f"base-known facts: {len(facts_train)} train, {len(held_facts)} held out", flush=True)
    records = []
    for name in args.families:
        found = family(name)
        is_facts = found.draw is None and found.load is None
        if is_facts:
            rows = facts_train, held_facts
        else:
            rows = family_rows(name, args.n_train, args.n_eval, args.seed)
        unseen = held_facts if is_facts else facts_train + held_facts  # facts the arm does not train on
        for arm in args.arms:
            after = _after_training(args, facts, unseen, rows[1], found.max_new_tokens, equations=found.equations)
            record = run_arm(arm, name, args.steps or STEP_CAP, args.eval_every, len(rows[0]), len(rows[1]),
                             args.batch, args.seed, base, args.out, args.note, None, rows=rows,
                             config=found.arm_config(ARMS[arm].encoding, "xval_fit" in ARMS[arm].config),
                             seconds=args.seconds,
                             max_new_tokens=found.max_new_tokens, after_training=after,
                             chat=found.chat, schedule=args.schedule)  # fmt: skip
            records.append(record)
    return records


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.command == "list":
        for found in FAMILIES.values():
            print(f"{found.name:24} {found.description}")
        return
    if args.command == "report":
        from eval_harness.suite.report import report

        print(report(args.out))
        return
    from eval_harness.study import prepare_run

    args.base = prepare_run(args.base)
    if args.command == "coverage":
        from eval_harness.suite.coverage import write_coverage

        for name, found in write_coverage(args.base, args.out).items():
            print(f"{name:24} {found['formed']:4d} / {found['answers']:4d} = {found['share']:.0%}")
        return
    run(args)


def _after_training(args: argparse.Namespace, facts: Any, unseen: list[dict[str, str]], held: list[dict[str, str]],
                    max_new_tokens: int, equations: bool = False) -> Any:  # fmt: skip
    """What runs on each trained adapter: the facts (``--retention``) and the gate sweep, if asked; the held-out
    answers with ``--answers`` or for a family scored on its equations (`equations`), generated once for both."""
    from eval_harness.suite.gates import sweep

    steps = []
    if args.retention:  # the retention score on the facts the arm did not train on
        steps.append(lambda model, ntok: facts.score_facts(model, ntok, unseen))
    if args.gate_sweep:
        refs = [r["completion"] for r in held]
        steps.append(sweep([r["prompt"] for r in held], refs, max_new_tokens, args.gate_sweep))
    if getattr(args, "answers", False) or equations:
        steps.append(_answers(held, max_new_tokens, equations))
    if not steps:
        return None

    def after(model: Any, ntok: Any) -> dict[str, Any]:
        return {key: value for step in steps for key, value in step(model, ntok).items()}

    return after


def _answers(held: list[dict[str, str]], max_new_tokens: int, equations: bool = False) -> Any:
    """``after(model, ntok)``: every held-out answer (``--answers``): prompt, reference, the completion, and for its
    last number whether the head wrote it (its combination, most recent number first) or the LM did in digits.

    With `equations` (a family of worked solutions), also the `numadapter.evaluation.equation_score` of the
    completions (``equations_written``, ``equations_right``, ``equations_share``, ``equations_per_text``) and each
    answer's own counts: a right last number can follow wrong steps."""

    def after(model: Any, ntok: Any) -> dict[str, Any]:
        from numadapter.evaluation import equation_score, equations_in, last_number
        from numadapter.generation import generate

        model.eval()
        rows = []
        out = generate(model, ntok, [r["prompt"] for r in held], max_new_tokens=max_new_tokens, return_dict=True,
                       batch_size=100)  # fmt: skip
        for row, text, confidences, combinations in zip(held, out.completions, out.confidences, out.combinations):
            wrote, expected = last_number(text), last_number(row["completion"])
            rows.append({
                "prompt": row["prompt"], "reference": row["completion"], "completion": text,
                "right": wrote is not None and wrote == expected,
                "by_head": bool(confidences) and confidences[-1] is not None,
                "combination": list(combinations[-1]) if combinations and combinations[-1] else None,
            })  # fmt: skip
            if equations:
                written = equations_in(text)
                rows[-1].update(equations_written=len(written), equations_right=sum(e.right for e in written))
        if not equations:
            return {"answers": rows}
        return {**equation_score(r["completion"] for r in rows), "answers": rows}

    return after
