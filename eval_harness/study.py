"""The pretrained-base study: which number encoding learns arithmetic on the real SmolLM2-135M, and how fast.

Every arm goes the product path a user runs: `NumberAdapterConfig` -> `numadapter.get_peft_model` ->
`NumberTokenizer` -> `NumberSFTTrainer` (prompt/completion data) -> `numadapter.generate` on held-out prompts
(`numadapter.evaluation.generate_answers` / `answer_metrics`). No private training loop. An arm is a named set of
config fields and rates (`ARMS`); the same task rows, batch size, step budget and seed serve every arm.

Usage::

    python -m eval_harness.study run --arm fone --task addition --steps 200 --eval-every 50
    python -m eval_harness.study report            # table (README.md) + plot (curves.png) from every arm's JSON

Each run writes ``<out>/<task>/<arm>.json``: the settings, the curve (step, exact match, mean absolute error,
training seconds so far, scoring excluded) and the final figures. Training seconds are the trainer's own wall time on
this machine; when other jobs share the cores the JSON says so only if ``--note`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path(__file__).parent / "results" / "pretrained_study"
LINEAR = {"fone_head_input": "linear"}  # the head before the context head became the default ("auto" is "all" here)
# the context head with numbers kept in digits (round 5's arms build on it)
ANSWERS = {"number_lr_ratio": 10.0, "fone_head_input": "context", "fone_numbers": "answers"}
# round 6: products, half the answers in digits, copies left to the LM (the library's defaults since round 6)
TOOL = {**ANSWERS, "fone_context_products": True, "fone_digit_answers": 0.5, "fone_head_copies": False,
        "fone_head_in_use": True}  # fmt: skip  # the head always on, as measured before the trainer chose (round 7)
# the automatic choice's arms: TOOL's settings that the trainer decides left undecided (products at None, on in
# answers mode, so that the trainer may turn the pointer on: an explicit setting is never replaced)
AUTO = {k: v for k, v in TOOL.items() if k not in ("fone_head_in_use", "fone_context_products")}
# as every arm before round 7 was measured: the [NUM] / EOS rows at number_lr_ratio
COMMON = dict(int_digits=5, frac_digits=0, r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear",
              token_rows_lr_ratio=None)  # fmt: skip


@dataclass(frozen=True)
class Arm:
    """One arm: the adapter settings and the learning rate(s).

    Attributes:
        encoding: ``NumberAdapterConfig.encoding``.
        lr: the trainer's learning rate (LoRA's).
        config: further `NumberAdapterConfig` fields (e.g. ``number_lr_ratio``).
        hypothesis: what the arm tests, for the report.
    """

    encoding: str
    lr: float
    config: dict[str, Any] = field(default_factory=dict)
    hypothesis: str = ""


ARMS: dict[str, Arm] = {
    "lora_digits": Arm("digits", 1e-3, hypothesis="baseline: LoRA on the base's own digit tokens"),
    "lora_digits_2e-4": Arm("digits", 2e-4, hypothesis="baseline at the usual LoRA rate"),
    "digits_ntl": Arm("digits", 1e-3, {"ntl_weight": 0.3}, hypothesis="baseline: digits + Number Token Loss"),
    "fone": Arm("fone", 1e-3, LINEAR, hypothesis="FoNE + LoRA, one rate for everything"),
    "fone_2e-4": Arm("fone", 2e-4, LINEAR, hypothesis="FoNE + LoRA at the usual LoRA rate"),
    "fone_rotation": Arm(
        "fone",
        1e-3,
        {"number_lr_ratio": 10.0, "fone_head_input": "rotation"},
        hypothesis="head: the answer's features as the complex product of two read-outs (angles add)",
    ),
    "fone_rotation_r1": Arm(
        "fone",
        1e-3,
        {"fone_head_input": "rotation"},
        hypothesis="rotation head at LoRA's rate (the product of two read-outs diverged at 10x)",
    ),
    "fone_ratio10": Arm(
        "fone", 1e-3, {**LINEAR, "number_lr_ratio": 10.0}, hypothesis="optimisation: number modules at 10x LoRA's rate"
    ),
    "fone_context": Arm(
        "fone",
        1e-3,
        {"number_lr_ratio": 10.0, "fone_head_input": "context", "fone_numbers": "all"},
        hypothesis="head: the answer as a signed combination of the exact features of the numbers before it",
    ),
    "fone_context_r1": Arm(
        "fone",
        1e-3,
        {"fone_head_input": "context", "fone_numbers": "all"},
        hypothesis="the context head with the number modules at LoRA's rate (number_lr_ratio 1)",
    ),
    "fone_context_ntl": Arm(
        "fone",
        1e-3,
        {"fone_head_input": "context", "fone_numbers": "all", "ntl_weight": 0.3},
        hypothesis="the context head + NTL 0.3, expected over the combinations (as measured at 160ebf2; the head gets "
        "no NTL since)",
    ),
    "fone_answers": Arm(
        "fone",
        1e-3,
        ANSWERS,
        hypothesis="the head as a tool: every number stays digit tokens, [NUM] only for answers the context head can "
        "form (fone_numbers='answers')",
    ),
    "fone_tool": Arm(
        "fone",
        1e-3,
        {**ANSWERS, "fone_context_products": True},
        hypothesis="the head as a tool with products: digits everywhere, [NUM] only for answers the head forms as a "
        "signed sum, or a product / exact quotient of two numbers before it",
    ),
    "fone_tool_mix": Arm(
        "fone",
        1e-3,
        {**ANSWERS, "fone_context_products": True, "fone_digit_answers": 0.5},
        hypothesis="fone_tool, with half of the training answers kept in digits (fone_digit_answers=0.5) so the LM "
        "keeps writing numbers in digits; [NUM] wherever a number starts and the head forms it",
    ),
    "fone_tool_compute": Arm(
        "fone",
        1e-3,
        TOOL,
        hypothesis="fone_tool_mix with copies left to the LM: the head writes only numbers "
        "it computes (a sum, a difference, a product, a quotient), so picking which number to repeat (maxmin, the "
        "operands of a scratchpad) stays with the digits that LoRA copies well",
    ),
    "fone_tool_eos": Arm(
        "fone",
        1e-3,
        {**TOOL, "train_eos_row": False},
        hypothesis="fone_tool_compute with the base's EOS row kept frozen: trained at 10x after one-token [NUM] "
        "answers, it made the LM stop facts after one or two digits (' 6' for 60, ' 3' for 365)",
    ),
    "fone_tool_d80": Arm(
        "fone",
        1e-3,
        {**TOOL, "fone_digit_answers": 0.8},
        hypothesis="fone_tool_compute with 80% of the training answers in digits: less pull of the hidden state "
        "towards [NUM] where the LM writes numbers, so its digit recall (facts) degrades less",
    ),
    "fone_tool_r1": Arm(
        "fone",
        1e-3,
        {**TOOL, "number_lr_ratio": 1.0},
        hypothesis="fone_tool_compute with the number modules and [NUM] / EOS rows at LoRA's rate (10x moves the "
        "[NUM] row fast, which may pull the LM away from digits)",
    ),
    "fone_tool_rows1": Arm(
        "fone",
        1e-3,
        {**TOOL, "token_rows_lr_ratio": 1.0},
        hypothesis="fone_tool_compute with the [NUM] / EOS rows at LoRA's rate (the head at 10x): LoRA on digits "
        "trains the EOS row at 1x, the default at 10x, which may be what costs words and facts where no answer is a "
        "[NUM]",
    ),
    "fone_tool_detach": Arm(
        "fone",
        1e-3,
        {**TOOL, "head_loss_trains_lm": False},
        hypothesis="fone_tool_compute with the head reading a detached hidden state: its loss pulls LoRA at every "
        "number start, which may be what makes the LM write facts with the wrong length after sums ('6000' for 60)",
    ),
    "fone_tool_auto10": Arm(
        "fone",
        1e-3,
        {**AUTO, "fone_head_min_share": 0.1},
        hypothesis="fone_tool_compute with the head left out where it forms under 10% of the training answers "
        "(fone_head_min_share, decided by NumberSFTTrainer; the rows then at LoRA's rate): there the adapter trains "
        "as LoRA on digits, so it cannot lose to it; where the head forms the answers it is fone_tool_compute "
        "(round 7's default)",
    ),
    "fone_tool_auto": Arm(
        "fone",
        1e-3,
        AUTO,
        hypothesis="fone_tool_auto10 with the head left out where it forms under half of the training answers (round "
        "8: beside a head writing 21-31% of the answers the LM wrote its digit answers worse than LoRA on digits), "
        "and where the last 4 numbers form under half of the answers the trainer "
        "tries the pointer (fone_context_pointer: each of the last 16 numbers chosen by its own hidden state, which "
        "carries its role: the probe read ledger roles at 100%): a ledger's balance (21% by the last 4) is then "
        "formed exactly (the library default)",
    ),
    "xval": Arm(
        "xval",
        1e-3,
        {"number_lr_ratio": 10.0, "xval_scale": 4000.0},
        hypothesis="xVal + LoRA, number modules at 10x; values / 4000 so sums up to 20,000 fit the clip of 5",
    ),
    "xval_context": Arm(
        "xval",
        1e-3,
        {"number_lr_ratio": 10.0, "xval_scale": 4000.0, "xval_context_numbers": 4},
        hypothesis="xVal whose head adds a combination of the 4 latest numbers, weights read from the hidden state: "
        "a conversion or a rate is a weight to learn, not a magnitude the hidden state must carry to 1%",
    ),
    "xval_fitted_standard": Arm(
        "xval",
        1e-3,
        {"number_lr_ratio": 10.0, "xval_fit": "standard", "xval_context_numbers": 4},
        hypothesis="xval_context with the normalisation the trainer fits on the training numbers (mean and spread) "
        "instead of the family's largest value / 5: values spread over the range the embedding tells apart",
    ),
    "xval_fitted": Arm(
        "xval",
        1e-3,
        {"number_lr_ratio": 10.0, "xval_fit": "absmax", "xval_context_numbers": 4},
        hypothesis="xval_context with the scale the trainer fits on the training numbers, zero kept at zero (largest "
        "value / 5): a conversion stays a weight with no offset for the read-out to learn exactly",
    ),
    "xval_lr1": Arm(
        "xval",
        1e-3,
        {"xval_fit": "absmax", "xval_context_numbers": 4},
        hypothesis="xval_fitted with the number modules at LoRA's rate (the library's number_lr_ratio=1): from the "
        "least-squares start the weights need no long walk, and at 10x the optimizer's steps (0.01 in normalised "
        "units, 2 degrees C at a scale of 200) set the error floor",
    ),
    "xval_digits_half": Arm(
        "xval",
        1e-3,
        {"xval_fit": "absmax", "xval_context_numbers": 4, "xval_digit_answers": 0.5},
        hypothesis="xval_lr1 with half of the training answers left in digits (xval_digit_answers=0.5, as FoNE's "
        "fone_digit_answers): with every answer a [NUM] the LM stops a fact after its first digit ('6' for 60), "
        "with digit answers beside it the LM keeps writing numbers in digits where the head writes none",
    ),
    "xval_digits_quarter": Arm(
        "xval",
        1e-3,
        {"xval_fit": "absmax", "xval_context_numbers": 4, "xval_digit_answers": 0.25},
        hypothesis="xval_digits_half with a quarter of the answers in digits: on the forecast's 20 steps the LM "
        "learned [NUM] too little beside half digit answers to give it the 10% where a number starts that lets the "
        "head take it over (its answers were the LM's digits, 4.5% MAPE); a quarter keeps [NUM] the likelier start",
    ),
    "xval_rows1": Arm(
        "xval",
        1e-3,
        {"number_lr_ratio": 10.0, "token_rows_lr_ratio": 1.0, "xval_fit": "absmax", "xval_context_numbers": 4},
        hypothesis="xval_fitted with the [NUM] / EOS rows at LoRA's rate (the head and the input direction at 10x): "
        "at 10x the EOS row makes the LM stop a fact after its first digit (' 2' for 60), as it did for FoNE",
    ),
}


def within(answers: list[str], refs: list[str], share: float) -> float:
    """The share of the answers whose last number is within `share` of the reference's (relative; a reference of 0
    must be met exactly); an answer without a number counts as outside."""
    from numadapter.evaluation import last_number

    hits = 0
    for answer, ref in zip(answers, refs):
        got, want = last_number(answer), last_number(ref)
        hits += got is not None and want is not None and abs(got - want) <= abs(want) * Decimal(str(share))
    return hits / len(refs) if refs else float("nan")


def task_rows(task: str, n: int, seed: int, exclude: set[str] | None = None) -> list[dict[str, str]]:
    """`n` prompt/completion rows of a task with 3-4 digit operands (seeded; `exclude`: prompts to skip).

    ``addition``: the quick start's ``"a + b ="``; ``subtraction``: ``"a - b ="`` with ``a >= b``, so the answer is a
    non-negative integer (`numadapter.data.arithmetic.arithmetic_examples`).
    """
    from numadapter.data.arithmetic import arithmetic_examples

    operators = {"addition": "+", "subtraction": "-"}
    if task not in operators:
        raise ValueError(f"unknown task {task!r}: use 'addition' or 'subtraction'.")
    return arithmetic_examples(n, operators[task], 3, 4, seed=seed, exclude=exclude)


def run_arm(name: str, task: str, steps: int, eval_every: int, n_train: int, n_eval: int, batch: int, seed: int,
            base: str, out: Path, note: str, lr: float | None, *, rows: tuple[list, list] | None = None,
            config: dict[str, Any] | None = None, seconds: float | None = None, max_new_tokens: int = 8,
            after_training: Callable[[Any, Any], dict[str, Any]] | None = None,
            chat: bool = False, schedule: str = "constant_with_warmup") -> dict[str, Any]:  # fmt: skip
    """Trains one arm through `NumberSFTTrainer` and scores its curve; writes and returns the JSON record.

    The curve is scored every `eval_every` optimizer steps and when training stops. By default the rows are
    `task_rows(task)`; the task suite (`eval_harness.suite`) passes its own.

    Args:
        rows: ``(train_rows, held_out_rows)`` to use instead of `task_rows` (then `n_train` / `n_eval` are ignored).
        config: `NumberAdapterConfig` fields over the arm's (e.g. a family's ``int_digits``, ``xval_scale``).
        seconds: a training-time budget: training stops at the first step whose training seconds (scoring
            excluded) reach it; `steps` stays the cap.
        max_new_tokens: the most tokens generated per held-out answer.
        after_training: ``f(model, ntok) -> dict`` run on the trained adapter; its entries join the record.
        chat: train the rows as ``messages`` (a user turn, the assistant's answer) and ask the held-out prompts
            through the base's chat template.
        schedule: the learning-rate schedule (transformers' ``lr_scheduler_type``), over `steps` after the warmup:
            the default keeps the rate flat, so a time budget far from the step cap is not cut short by a decay.
    """
    import datasets
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import SFTConfig

    from eval_harness.metrics import mape
    from numadapter import NumberAdapterConfig, NumberSFTTrainer, NumberTokenizer, get_peft_model
    from numadapter.evaluation import answer_metrics, generate_answers, last_number

    arm = ARMS[name]
    rate = lr if lr is not None else arm.lr
    if rows is None:
        train_rows = task_rows(task, n_train, seed)
        rows = train_rows, task_rows(task, n_eval, seed + 1, exclude={r["prompt"] for r in train_rows})
    train_rows, eval_rows = rows
    fields = {**COMMON, **arm.config, **(config or {})}
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    adapter_config = NumberAdapterConfig(encoding=arm.encoding, **fields)
    torch.manual_seed(seed)
    model = get_peft_model(model, adapter_config, tokenizer=tokenizer)
    ntok = NumberTokenizer(tokenizer, adapter_config)
    prompts, refs = [r["prompt"] for r in eval_rows], [r["completion"] for r in eval_rows]
    if chat:  # trained as messages, asked through the chat template
        train_rows = [
            {
                "messages": [
                    {"role": "user", "content": r["prompt"].strip()},
                    {"role": "assistant", "content": r["completion"].strip()},
                ]
            }
            for r in train_rows
        ]
        prompts = [tokenizer.apply_chat_template([{"role": "user", "content": p.strip()}], tokenize=False,
                                                 add_generation_prompt=True) for p in prompts]  # fmt: skip
    curve: list[dict[str, float]] = []
    path = out / task / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    args = SFTConfig(
        output_dir=str(out / "tmp" / name), max_steps=steps, per_device_train_batch_size=batch, learning_rate=rate,
        lr_scheduler_type=schedule, warmup_steps=min(20, steps // 10), max_grad_norm=1.0,
        logging_steps=max(1, min(steps // 10, 50)), save_strategy="no", report_to=[], seed=seed, bf16=False,
        use_cpu=not torch.cuda.is_available(), dataset_num_proc=None,
        activation_checkpointing=False,  # TRL's default is on: a 135M model fits without, each step ~20% faster
    )  # fmt: skip
    settings = {
        "arm": name, "task": task, "hypothesis": arm.hypothesis, "encoding": arm.encoding, "lr": rate,
        "config": fields, "steps": steps, "seconds_budget": seconds, "batch_size": batch, "n_train": len(train_rows),
        "n_eval": len(eval_rows), "seed": seed, "note": note, "torch_threads": torch.get_num_threads(),
        "max_new_tokens": max_new_tokens, "gradient_checkpointing": args.activation_checkpointing, "chat": chat,
        "schedule": schedule,
    }  # fmt: skip

    def score(step: int, train_seconds: float) -> None:
        answers = generate_answers(model, ntok, prompts, max_new_tokens, 100, progress=False)
        metrics = answer_metrics(answers, refs)
        point = {"step": step, "exact_match": metrics["exact_match"], "mae": metrics["mae"], "seconds": train_seconds,
                 "mape": mape(answers, [last_number(r) for r in refs], which="last").value,
                 "within_1pct": within(answers, refs, 0.01)}  # fmt: skip
        curve.append(point)
        path.write_text(json.dumps({**settings, "curve": curve, "final": point, "complete": False}, indent=1))
        print(f"[{name}/{task}] step {step}: exact {point['exact_match']:.1%}, MAE {point['mae']:.1f}, "
              f"{train_seconds:.0f} s of training", flush=True)  # fmt: skip

    class Curve(TrainerCallback):
        def __init__(self) -> None:
            self.scoring = 0.0
            self.start = 0.0

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.start = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            begin = time.perf_counter()
            trained = begin - self.start - self.scoring
            out_of_time = seconds is not None and trained >= seconds
            control.should_training_stop = control.should_training_stop or out_of_time
            if state.global_step % eval_every and state.global_step != steps and not out_of_time:
                return
            score(state.global_step, trained)
            kwargs["model"].train()
            self.scoring += time.perf_counter() - begin

    score(0, 0.0)
    trainer = NumberSFTTrainer(
        model=model, args=args, train_dataset=datasets.Dataset.from_list(train_rows), processing_class=ntok,
        callbacks=[Curve()],
    )  # fmt: skip
    started = time.perf_counter()
    trainer.train()
    history = trainer.state.log_history
    losses = [{k: v for k, v in log.items() if "loss" in k} | {"step": log.get("step")} for log in history]
    record = {**settings, "curve": curve, "final": curve[-1], "complete": True, "losses": losses,
              "wall_seconds": time.perf_counter() - started, "steps_done": trainer.state.global_step,
              "fone_head_in_use": getattr(ntok.config, "fone_head_in_use", None)}  # fmt: skip  # the trainer's choice
    if arm.encoding == "xval":  # the normalisation trained with (fitted by the trainer where the arm left it)
        record["xval_normalization"] = {"center": ntok.config.xval_center, "scale": ntok.config.xval_scale}
    if after_training is not None:
        record.update(after_training(model, ntok))
    path.write_text(json.dumps(record, indent=1))
    print(f"wrote {path}")
    return record


def _hidden_at(base: str, prompts: list[str], inputs: str) -> tuple[Any, Any]:
    """Hidden states ``[L + 1, n, H]`` at the last prompt token ("=") and at the first operand's last position.

    ``inputs="digits"``: the frozen base on its own digit tokens. ``inputs="fone"``: the base wrapped by a fresh
    FoNE adapter (LoRA at its no-op init, the input projection at its init), each operand one [NUM] token.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
    encode = lambda chunk: tokenizer(chunk, return_tensors="pt", padding=True, padding_side="left")  # noqa: E731
    if inputs == "fone":
        from numadapter import NumberAdapterConfig, NumberTokenizer, get_peft_model

        config = NumberAdapterConfig(encoding="fone", fone_numbers="all", **COMMON)
        torch.manual_seed(0)
        model = get_peft_model(model, config, tokenizer=tokenizer).eval()
        ntok = NumberTokenizer(tokenizer, config)

        def encode(chunk: list[str]) -> dict[str, Any]:
            batch = ntok(chunk, return_tensors="pt", padding=True, padding_side="left")
            return {k: v for k, v in batch.items() if k != "number_texts"}

    last, operand = [], []
    with torch.no_grad():
        for start in range(0, len(prompts), 100):
            batch = encode(prompts[start : start + 100])
            hidden = torch.stack(model(**batch, output_hidden_states=True).hidden_states)  # (L + 1, B, T, H)
            last.append(hidden[:, :, -1, :])
            plus = tokenizer(" +", add_special_tokens=False)["input_ids"][-1]
            ids = batch["input_ids"]
            where = (ids == plus).float().argmax(-1) - 1  # (B,): the position just before " +"
            operand.append(hidden[:, torch.arange(ids.shape[0]), where, :])
    return torch.cat(last, 1).numpy(), torch.cat(operand, 1).numpy()


def probe(base: str, out: Path, n: int = 3000, n_fit: int = 2500, every: int = 3) -> dict[str, Any]:
    """Linear probes on the frozen base: which digits of the answer and of the operands its hidden states hold.

    Runs the base on ``n`` addition prompts, once on its own digit tokens and once through a fresh FoNE adapter
    (`_hidden_at`), takes the hidden state of the last prompt token ("=") and of the first operand's last position
    after every `every`-th layer, and fits a ridge regression from it to the FoNE features
    ``cos/sin(2*pi*y/10^k)``, ``k = 1..5``, of the answer ``y`` and of each operand on ``n_fit`` prompts. On the rest
    it reports, per place, how often the digit read from the predicted angle is right (chance: 10%). This is the
    smallest test of the "head placement" ideas (read the head from an intermediate layer, or start it as a probe
    fitted on the frozen base): they can only work where a layer holds the answer's digits; and of which side fails
    (does a [NUM]'s feature survive at its own position, and does it reach "=").
    """
    import math

    import numpy as np

    rows = task_rows("addition", n, seed=0)
    first = np.array([int(r["prompt"].split(" + ")[0]) for r in rows])
    values = {
        "answer": np.array([int(r["completion"]) for r in rows]),
        "first operand": first,
        "second operand": np.array([int(r["prompt"].split(" + ")[1].rstrip(" =")) for r in rows]),
    }
    places = range(1, 6)
    result: dict[str, Any] = {"n": n, "n_fit": n_fit, "places": ["units", "tens", "hundreds", "thousands", "1e4"]}
    probes = []
    for inputs in ("digits", "fone"):
        at_end, at_operand = _hidden_at(base, [r["prompt"] for r in rows], inputs)
        probes += [(f"{what} at '=' ({inputs} in)", v, at_end) for what, v in values.items()]
        probes.append((f"first operand at its own last position ({inputs} in)", first, at_operand))
    result["probes"] = [name for name, _, _ in probes]
    for what, v, layers in probes:
        target = np.stack([f(2 * math.pi * v / 10**k) for k in places for f in (np.cos, np.sin)], 1)  # (n, 10)
        per_layer = {}
        for layer in range(0, layers.shape[0], every):
            x = np.concatenate([layers[layer], np.ones((n, 1))], 1)
            fit, held = x[:n_fit], x[n_fit:]
            ridge = 1e-2 * (fit**2).sum() / n_fit
            weights = np.linalg.solve(fit.T @ fit + ridge * np.eye(x.shape[1]), fit.T @ target[:n_fit])
            guess = held @ weights
            accuracy = []
            for i, k in enumerate(places):
                angle = np.arctan2(guess[:, 2 * i + 1], guess[:, 2 * i]) % (2 * math.pi)
                # place k's angle is (digit + lower places as a fraction in [0, 1 - 10^(1-k)]) / 10 of a turn: read
                # the digit at the centre of that range (floor at its edge reads the units place, whose lower part
                # is exactly 0, as the digit below half the time)
                digit = np.floor(angle / (2 * math.pi) * 10 + 0.5 * 10.0 ** (1 - k)) % 10
                accuracy.append(float((digit == (v[n_fit:] // 10 ** (k - 1)) % 10).mean()))
            per_layer[layer] = accuracy
        result[what] = per_layer
    (out / "probe.json").write_text(json.dumps(result, indent=1))
    return result


def report(out: Path) -> str:
    """Writes ``<out>/README.md`` (one table per task) and ``<out>/curves.png``; returns the markdown."""
    from eval_harness.suite.report import load

    records = load(out)  # arms only (cli_recipe/ holds a CLI run)
    lines = ["# Pretrained-base study: SmolLM2-135M-Instruct, 3-4 digit operands", "",
             "Written by `python -m eval_harness.study report` from the JSON records beside it.", ""]  # fmt: skip
    for task in sorted({r["task"] for r in records}):
        header = "| arm | encoding | lr | steps | exact match (curve) | MAE | training s | hypothesis |"
        lines += [f"## {task}", "", header, "|---|---|---|---|---|---|---|---|"]
        for r in sorted((r for r in records if r["task"] == task), key=lambda r: -r["final"]["exact_match"]):
            curve = " / ".join(f"{p['exact_match']:.1%}" for p in r["curve"])
            curve += "" if r.get("complete", True) else " (stopped early)"
            extra = {k: v for k, v in r["config"].items() if k not in COMMON or COMMON[k] != v}
            lines.append(
                f"| {r['arm']} | {r['encoding']} {extra or ''} | {r['lr']:g} | {r['steps']} | {curve} | "
                f"{r['final']['mae']:.1f} | {r['final']['seconds']:.0f} | {r['hypothesis']} |"
            )
        lines.append("")
    probe_file = out / "probe.json"
    if probe_file.is_file():
        found = json.loads(probe_file.read_text())
        lines += ["## Linear probes of the frozen base at '=' (digits read from the fitted FoNE features; chance 10%)",
                  "", f"Ridge fits on {found['n_fit']} prompts, scored on {found['n'] - found['n_fit']} others "
                  "(`python -m eval_harness.study probe`).", "",
                  "| what | layer | " + " | ".join(found["places"]) + " |",
                  "|---|---|" + "---|" * len(found["places"])]  # fmt: skip
        for what in found.get("probes", []):
            for layer, accuracy in found[what].items():
                lines.append(f"| {what} | {layer} | " + " | ".join(f"{a:.0%}" for a in accuracy) + " |")
        lines.append("")
    text = "\n".join(lines)
    (out / "README.md").write_text(text)
    try:
        from eval_harness.report import pyplot

        plt = pyplot()
        tasks = sorted({r["task"] for r in records})
        fig, axes = plt.subplots(2, len(tasks), figsize=(6 * len(tasks), 7), squeeze=False)
        for column, task in enumerate(tasks):
            for r in (r for r in records if r["task"] == task):
                steps = [p["step"] for p in r["curve"]]
                axes[0][column].plot(steps, [p["exact_match"] for p in r["curve"]], marker="o", label=r["arm"])
                axes[1][column].plot(steps, [p["mae"] for p in r["curve"]], marker="o", label=r["arm"])
            axes[0][column].set(title=task, xlabel="optimizer steps (batch 32)", ylabel="held-out exact match")
            # symlog: an MAE of 0 stays on the plot
            axes[1][column].set(xlabel="optimizer steps (batch 32)", ylabel="mean absolute error", yscale="symlog")
            axes[0][column].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "curves.png", dpi=100)
    except ImportError:
        pass
    return text


def prepare_run(base: str | None) -> str:
    """Sets torch's threads (``STUDY_THREADS``, default 2) and returns `base` or the real SmolLM2-135M's directory."""
    import torch

    torch.set_num_threads(int(os.environ.get("STUDY_THREADS", "2")))
    if base is None:
        import numadapter

        base = numadapter.smollm2_path()
    return base


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m eval_harness.study", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="train and score one arm")
    run.add_argument("--arm", required=True, choices=sorted(ARMS))
    run.add_argument("--task", default="addition", choices=["addition", "subtraction"])
    run.add_argument("--steps", type=int, default=200)
    run.add_argument("--eval-every", type=int, default=50)
    run.add_argument("--n-train", type=int, default=8000)
    run.add_argument("--n-eval", type=int, default=200)
    run.add_argument("--batch", type=int, default=32)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--lr", type=float, default=None, help="override the arm's learning rate")
    run.add_argument("--base", default=None, help="model directory (default: numadapter.smollm2_path())")
    run.add_argument("--out", type=Path, default=DEFAULT_OUT)
    run.add_argument("--note", default="")
    pro = sub.add_parser("probe", help="linear probes of the frozen base's hidden states at '='")
    pro.add_argument("--base", default=None)
    pro.add_argument("--out", type=Path, default=DEFAULT_OUT)
    rep = sub.add_parser("report", help="table + plot from the JSON records")
    rep.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.command == "report":
        print(report(args.out))
        return
    args.base = prepare_run(args.base)
    if args.command == "probe":
        args.out.mkdir(parents=True, exist_ok=True)
        print(json.dumps(probe(args.base, args.out), indent=1))
        return
    run_arm(args.arm, args.task, args.steps, args.eval_every, args.n_train, args.n_eval, args.batch, args.seed,
            args.base, args.out, args.note, args.lr)  # fmt: skip


if __name__ == "__main__":
    main()
