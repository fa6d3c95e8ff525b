"""Trains and evaluates methods on a task under one budget, and writes one JSON result per run.

A run (`RunSpec`) is one method trained on one training-set size with one model (a FoNE Table 6 size from scratch,
or a pretrained base with adapters). Runs that differ only in the method form a *group* and are trained in
lockstep: epoch 1 of every method, then epoch 2 of every method, ..., with the order rotated each epoch. So the
methods see the same data (same examples, same batch order: the order generator is seeded with the run seed), the
same budget (epochs, batch size, schedule) and the same machine conditions while their epoch times are taken; the
FoNE-vs-digit-wise time ratios of Table 1 come from such a group ("side by side in one run").

Training loop (the same for every method): AdamW, gradient clipping at 1.0, linear warmup then cosine decay to zero
(or a constant rate), batches trimmed to their longest sequence. The loss is the model's own: transformers' token
cross-entropy for plain methods, numadapter's ``CE + number-head loss (+ NTL) (+ aggregate loss)`` for the others.
Epoch times cover forward, backward and optimizer steps only (no evaluation), with a device synchronisation
before each clock read. Test time covers prediction over the test split (see `eval_harness.arms.predict`).

Each result file (``<out>/<experiment>/<method>-n<train>-m<size>-s<seed>.json``) holds the full configuration and
seed, the method, parameter counts, data statistics (tokens per number, sequence lengths), the metrics of
`eval_harness.metrics` (exact match, MAE, R^2, MAPE, CER), timings, the loss / validation curve, sample predictions,
the first wrong predictions (``errors``, up to 50) and the environment (versions, device, threads, load average);
`eval_harness.records` builds those parts. ``metrics`` are those of the "test" split; a task with further test splits
(named ``test_*``, e.g. the NTL tasks' "test_extrapolation" next to their interpolation "test") gets them under
``extra_splits[<split>]`` (``n_test``, ``metrics``, ``test_s``, ``samples``, ``errors``), each with `RunSpec.n_test`
examples.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from eval_harness import metrics as M
from eval_harness import records as R
from eval_harness.arms import Method, get_method
from eval_harness.arms.encode import EncodedSet, number_places, numbers_of
from eval_harness.arms.models import TABLE6, Built, LoraSettings, build
from eval_harness.arms.predict import TRAIN_FORMATS, Predictions, predict, train_format
from eval_harness.product import TRAIN_PATHS, predict_product, train_product
from eval_harness.tasks import get_task
from eval_harness.tasks.base import Example

SCHEDULES = ("cosine", "constant", "wsd")
WSD_DECAY = 0.2  # "wsd": the last 20% of the steps decay linearly to 0


@dataclass(frozen=True)
class RunSpec:
    """Everything that defines one run (written into its result file).

    Attributes:
        preset: the preset it comes from (or "custom").
        experiment: the experiment (table) name, e.g. "data_size".
        task: the task name (`eval_harness.tasks`).
        method: the method name (`eval_harness.arms`).
        train_size: training examples (the first `train_size` of the task's train split: nested subsets).
        regime: "scratch" or "adapter".
        model_size: FoNE Table 6 size 1-6 (scratch).
        base: path of the pretrained base (adapter).
        n_test: test examples (of each test split).
        n_valid: validation examples for the curve (0: none).
        eval_every: validate every this many epochs (0: never).
        eval_every_steps: validate every this many optimizer steps and after the last (0: never); the points go to
            the result's ``step_curve`` (step, training seconds so far, mean loss since the last point, validation
            exact match); their prediction time is left out of the epoch times. Needs `n_valid`.
        epochs: passes over the training set.
        max_steps: stop after this many optimizer steps (None: every step of `epochs`); the schedule (warmup, decay)
            spans them. The epochs must hold them: ``max_steps <= epochs * ceil(train_size / batch_size)``.
        batch_size: examples per optimizer step.
        lr: peak learning rate.
        schedule: after a linear warmup: "cosine" (cosine decay to 0), "constant", or "wsd" (constant, then a
            linear decay to 0 over the last 20% of the steps: warmup-stable-decay).
        warmup: warmup steps as a fraction of all steps.
        weight_decay: AdamW weight decay of the weight matrices (norm gains and biases are not decayed).
        grad_clip: gradient-norm clip (0: off).
        seed: seeds the data split, the model init and the batch order.
        device: "cpu", "cuda", "cuda:1", "mps".
        threads: torch CPU threads (None: torch's default).
        eval_batch_size: prompts per prediction batch.
        lora: LoRA settings of the adapter regime.
        number_settings: `NumberAdapterConfig` fields that replace the method's (numadapter methods only), e.g.
            ``{"fone_head_input": "linear"}`` for an ablation.
        train_format: "auto" (a head-read method whose every training answer is one [NUM] trains on the prompts
            alone, the head at the last prompt position on the answer, as the FoNE paper trains; the rest on prompt
            + answer + eos) or "sequence" (every method on prompt + answer + eos);
            `eval_harness.arms.predict.train_format`.
        train_path: "harness" (this module's loop and prediction paths) or "product" (numadapter methods, and
            ``lora`` as numadapter's plain LoRA (`Method.product_adapter`): `numadapter.NumberSFTTrainer` trains,
            `numadapter.generate` predicts; `eval_harness.product`). Product runs train one after another, not in
            lockstep, and their files end in ``-product``.
    """

    preset: str
    experiment: str
    task: str
    method: str
    train_size: int
    regime: str = "scratch"
    model_size: int | None = 4
    base: str | None = None
    n_test: int = 2000
    n_valid: int = 0
    eval_every: int = 0
    eval_every_steps: int = 0
    epochs: int = 10
    max_steps: int | None = None
    batch_size: int = 64
    lr: float = 1e-3
    schedule: str = "cosine"
    warmup: float = 0.05
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    seed: int = 0
    device: str = "cpu"
    threads: int | None = None
    eval_batch_size: int = 500
    lora: LoraSettings = field(default_factory=LoraSettings)
    number_settings: dict[str, Any] = field(default_factory=dict)
    train_format: str = "auto"
    train_path: str = "harness"

    def __post_init__(self) -> None:
        method = get_method(self.method)
        if self.number_settings and method.backend != "numadapter":
            raise ValueError(
                f"number_settings {self.number_settings} apply to numadapter methods, not to the plain method "
                f"{self.method!r}: drop --set or choose numadapter methods."
            )
        get_task(self.task)
        if self.train_path not in TRAIN_PATHS:
            raise ValueError(f"`train_path` must be one of {list(TRAIN_PATHS)}, got {self.train_path!r}.")
        if self.train_path == "product":
            if not method.on_product_path:
                raise ValueError(
                    f"the product train path trains numadapter methods (and lora) with NumberSFTTrainer; "
                    f"{self.method!r} is a plain method: train it with --train-path harness."
                )
            if self.n_valid and self.eval_every:
                raise ValueError(
                    "the product train path has no validation curve by epochs: pass --eval-every 0 (its curve is "
                    "--eval-every-steps N) or --n-valid 0."
                )
        for name in ("train_size", "n_test", "epochs", "batch_size", "eval_batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive integer, got {value!r}.")
        if self.max_steps is not None:
            if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1:
                raise ValueError(f"`max_steps` must be a positive integer or None, got {self.max_steps!r}.")
            held = self.epochs * math.ceil(self.train_size / self.batch_size)
            if self.max_steps > held:
                raise ValueError(
                    f"`max_steps` {self.max_steps} exceeds the {held} steps of {self.epochs} epoch(s) of "
                    f"{self.train_size} examples in batches of {self.batch_size}: raise --epochs or lower --max-steps."
                )
        if isinstance(self.eval_every_steps, bool) or not isinstance(self.eval_every_steps, int):
            raise ValueError(f"`eval_every_steps` must be an integer >= 0, got {self.eval_every_steps!r}.")
        if self.eval_every_steps < 0 or (self.eval_every_steps and not self.n_valid):
            raise ValueError(
                f"`eval_every_steps` must be >= 0 and needs validation examples, got {self.eval_every_steps} with "
                f"n_valid={self.n_valid}: pass --n-valid N."
            )
        if self.train_format not in TRAIN_FORMATS:
            raise ValueError(f"`train_format` must be one of {list(TRAIN_FORMATS)}, got {self.train_format!r}.")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"`schedule` must be one of {list(SCHEDULES)}, got {self.schedule!r}.")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"`lr` must be a positive number, got {self.lr!r}.")
        if not 0.0 <= self.warmup < 1.0:
            raise ValueError(f"`warmup` is a fraction of the steps in [0, 1), got {self.warmup!r}.")
        if self.regime == "scratch" and self.model_size not in TABLE6:
            raise ValueError(f"`model_size` must be one of {sorted(TABLE6)} (FoNE Table 6), got {self.model_size!r}.")
        if self.regime == "adapter" and not self.base:
            raise ValueError("the adapter regime needs a pretrained base: pass --base PATH.")
        if self.regime not in ("scratch", "adapter"):
            raise ValueError(f"`regime` must be 'scratch' or 'adapter', got {self.regime!r}.")

    @property
    def run_id(self) -> str:
        size = f"m{self.model_size}" if self.regime == "scratch" else "lora"
        suffix = "-product" if self.train_path == "product" else ""
        return f"{self.method}-n{self.train_size}-{size}-s{self.seed}{suffix}"

    @property
    def group_key(self) -> str:
        """Runs with the same key (all fields but the method and its learning rate) train in lockstep."""
        return json.dumps({k: v for k, v in asdict(self).items() if k not in ("method", "lr")}, sort_keys=True)


# -- training --------------------------------------------------------------------------------------------------------


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def lr_factor(step: int, total: int, warmup_steps: int, schedule: str) -> float:
    """The learning-rate multiplier at optimizer step `step` (0-based) of `total`."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    if schedule == "wsd":  # warmup, stable, decay (linear to 0 over the last WSD_DECAY of the steps)
        decay_start = total - int(WSD_DECAY * total)
        return 1.0 if step < decay_start else max(0.0, (total - step) / max(1, total - decay_start))
    progress = (step - warmup_steps) / max(1, total - warmup_steps)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


class _Run:
    """One run's state while its group trains."""

    def __init__(self, spec: RunSpec, method: Method, built: Built, train: EncodedSet) -> None:
        self.spec, self.method, self.built, self.train = spec, method, built, train
        self.model = built.model.to(spec.device)
        params = [p for p in self.model.parameters() if p.requires_grad]
        groups = [  # weight decay on matrices only (not on norms' gains and biases), as in GPT-2 / nanoGPT
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": spec.weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
        self.optimizer = torch.optim.AdamW(groups, lr=spec.lr)
        self.params = params
        self.steps_per_epoch = math.ceil(len(train) / spec.batch_size)
        total = self.steps_per_epoch * spec.epochs
        if spec.max_steps is not None:
            total = min(total, spec.max_steps)
        self.total_steps = total
        warmup = int(spec.warmup * total)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: lr_factor(step, total, warmup, spec.schedule)
        )
        self.order = torch.Generator().manual_seed(spec.seed)
        self.format = train_format(method, train, spec.train_format)
        self.batch = train.head_batch if self.format == "head" else train.batch
        # tokens each example feeds per epoch: the prompt alone in the head format
        self.lengths = train.prompt_lengths if self.format == "head" else train.lengths
        self.epoch_s: list[float] = []
        self.losses: list[float] = []
        self.load: list[float] = []
        self.curve: list[dict[str, Any]] = []
        self.product: dict[str, Any] | None = None  # what NumberSFTTrainer did (train_path "product")
        self.step = 0  # optimizer steps done
        self.seen = 0  # training examples fed
        self.step_curve: list[dict[str, Any]] = []  # `RunSpec.eval_every_steps` points
        self.valid: tuple[EncodedSet, list[Example]] | None = None  # set by run_group when n_valid > 0
        self.since_point: list[float] = []  # losses since the last step point

    @property
    def done(self) -> bool:
        """Whether every optimizer step of the budget has run."""
        return self.step >= self.total_steps

    def step_point_due(self) -> bool:
        """Whether a `RunSpec.eval_every_steps` point falls on the step just done."""
        every = self.spec.eval_every_steps
        return bool(every) and self.valid is not None and (self.step % every == 0 or self.done)

    def step_point(self, train_s: float) -> float:
        """Appends a validation point for the step just done (`train_s`: training seconds so far); returns the
        seconds its prediction took (left out of the epoch time)."""
        _sync(self.spec.device)
        start = time.perf_counter()
        point = {
            "step": self.step,
            "train_s": train_s,
            "loss": statistics.fmean(self.since_point) if self.since_point else math.nan,
            "valid_exact_match": _valid_exact_match(self, *self.valid),
        }
        self.step_curve.append(point)
        self.since_point = []
        self.model.train()
        _sync(self.spec.device)
        return time.perf_counter() - start

    def epoch(self, position: int) -> None:
        spec = self.spec
        self.model.train()
        perm = torch.randperm(len(self.train), generator=self.order)
        total = torch.zeros((), device=spec.device)
        bar = tqdm(
            range(0, len(self.train), spec.batch_size),
            desc=f"{spec.method} ep {len(self.epoch_s) + 1}/{spec.epochs}",
            leave=False,
            unit="step",
            position=position,
        )
        _sync(spec.device)
        start, paused, steps = time.perf_counter(), 0.0, 0
        for offset in bar:
            index = perm[offset : offset + spec.batch_size]
            batch = self.batch(index, spec.device)
            self.seen += len(index)
            loss = self.model(**batch).loss
            loss.backward()
            if spec.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(self.params, spec.grad_clip)
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)
            total += loss.detach()
            self.step, steps = self.step + 1, steps + 1
            if self.spec.eval_every_steps:
                self.since_point.append(float(loss.detach()))
            if self.step_point_due():
                paused += self.step_point(sum(self.epoch_s) + time.perf_counter() - start - paused)
            if self.done:
                break
        _sync(spec.device)
        self.epoch_s.append(time.perf_counter() - start - paused)
        self.losses.append(float(total) / steps)
        self.load.append(os.getloadavg()[0])


def _predictions(run: _Run, examples: Sequence[Example], encoded: EncodedSet, budget: int) -> Predictions:
    """The run's answers to `examples` by its own prediction path: `numadapter.generate` for a run of the product
    train path, else the method's (`eval_harness.arms.predict.predict`); `budget` new tokens at most."""
    spec = run.spec
    if spec.train_path == "product":
        return predict_product(run, examples, budget)
    return predict(
        run.method, run.built, encoded, [e.target for e in examples],
        batch_size=spec.eval_batch_size, device=spec.device, max_new_tokens=budget,
    )  # fmt: skip


def _valid_exact_match(run: _Run, encoded: EncodedSet, examples: list[Example]) -> float:
    """Exact match of the run's predictions on the validation examples (the run's own prediction path)."""
    preds = _predictions(run, examples, encoded, _max_new_tokens(run.train))
    return M.exact_match(preds.texts, [e.target for e in examples]).value


def _valid_point(run: _Run, valid: tuple[EncodedSet, list[Example]] | None, epoch: int) -> dict[str, Any]:
    point: dict[str, Any] = {"epoch": epoch, "loss": run.losses[-1], "epoch_s": run.epoch_s[-1]}
    spec = run.spec
    if valid is not None and spec.eval_every and (epoch % spec.eval_every == 0 or epoch == spec.epochs):
        point["valid_exact_match"] = _valid_exact_match(run, *valid)
    return point


def _max_new_tokens(train: EncodedSet) -> int:
    """Decode budget: the longest answer of `train` (eos included) plus 2 (test splits: the larger of the training
    set's and their own)."""
    return int((train.lengths - train.prompt_lengths).max()) + 2


# -- groups ----------------------------------------------------------------------------------------------------------


def run_group(
    specs: Sequence[RunSpec],
    out_dir: str | os.PathLike,
    workdir: str | os.PathLike | None = None,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Trains the runs of one group in lockstep, evaluates them, writes their JSON files, returns the results.

    Args:
        specs: runs with equal `RunSpec.group_key` (different methods).
        out_dir: the results directory (files go to ``<out_dir>/<experiment>/<run_id>.json``).
        workdir: where local tokenizers are saved (default: a temporary directory).
        log: where one summary line per run goes.

    Returns:
        The result dicts, in the order of `specs`.
    """
    if not specs:
        return []
    keys = {spec.group_key for spec in specs}
    if len(keys) != 1:
        raise ValueError("run_group needs runs that differ only in the method (and its lr); got differing settings.")
    first = specs[0]
    if first.threads:
        torch.set_num_threads(first.threads)
    if first.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
    task = get_task(first.task)
    train_examples = task.generate("train", first.train_size, seed=first.seed)
    test_examples = task.generate("test", first.n_test, seed=first.seed)
    valid_examples = task.generate("valid", first.n_valid, seed=first.seed) if first.n_valid else []
    extra_tests = {split: task.generate(split, first.n_test, seed=first.seed) for split in extra_test_splits(task)}
    everything = list(train_examples) + list(test_examples) + list(valid_examples)
    places = number_places(everything + [e for examples in extra_tests.values() for e in examples])
    xval_values = [abs(M.target_value(text) or 0) for text in numbers_of(train_examples)]
    own_tmp = None
    if workdir is None:
        own_tmp = tempfile.TemporaryDirectory(prefix="eval_harness-")
        workdir = own_tmp.name
    runs: list[_Run] = []
    extra: list[dict[str, Any]] = []
    try:
        for spec in specs:
            method = get_method(spec.method)
            built = build(
                method, spec.regime, workdir=workdir, seed=spec.seed, places=places,
                xval_values=[float(v) for v in xval_values], size=TABLE6.get(spec.model_size),
                base_path=spec.base, lora=spec.lora, number_settings=spec.number_settings,
                product=spec.train_path == "product",
            )  # fmt: skip
            train = built.codec.encode(train_examples, desc=f"encode train ({spec.method})")
            runs.append(_Run(spec, method, built, train))
            valid = built.codec.encode(valid_examples) if valid_examples else None
            extra.append({"valid": (valid, valid_examples) if valid is not None else None})
            runs[-1].valid = extra[-1]["valid"]
        lockstep = [spec.method for spec in specs]
        load_start = os.getloadavg()
        epochs = first.epochs
        if first.train_path == "product":  # NumberSFTTrainer runs all epochs of a run: one run after another
            for run in runs:
                run.product = train_product(run, train_examples, workdir)
        else:
            for epoch in tqdm(range(1, epochs + 1), desc=f"{first.experiment} n={first.train_size} (lockstep)"):
                shift = (epoch - 1) % len(runs)
                for index in list(range(shift, len(runs))) + list(range(shift)):
                    run = runs[index]
                    if run.done:  # its max_steps ran out in an earlier epoch
                        continue
                    run.epoch(position=1)
                    run.curve.append(_valid_point(run, extra[index]["valid"], epoch))
        results = []
        for run in runs:
            together = [run.spec.method] if run.product is not None else lockstep
            results.append(_evaluate(run, test_examples, places, together, load_start, extra_tests))
        for result in results:
            path = Path(out_dir) / result["experiment"] / f"{result['run_id']}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            R.write_json(path, result)
            timing, em = result["timing"], result["metrics"]["exact_match"]["value"]
            extra = "".join(
                f"  {split} EM {100 * part['metrics']['exact_match']['value']:6.2f}%"
                for split, part in result["extra_splits"].items()
            )
            log(
                f"{result['experiment']:>12} {result['method']:<20} n={result['config']['train_size']:<7} "
                f"s={result['seed']} EM {100 * em:6.2f}%{extra}  epoch {timing['epoch_s_median']:.2f}s  "
                f"test {timing['test_s']:.1f}s  -> {path}"
            )
        return results
    finally:
        if own_tmp is not None:
            own_tmp.cleanup()


def extra_test_splits(task: Any) -> list[str]:
    """The task's test splits besides "test" (e.g. NTL's "test_extrapolation"), in the task's order."""
    return [split for split in task.splits if split.startswith("test_")]


def _predict_split(run: _Run, examples: Sequence[Example], split: str) -> tuple[Predictions, float]:
    """Predictions of the trained run on one test split, and the seconds prediction took."""
    spec, built = run.spec, run.built
    encoded = built.codec.encode(examples, desc=f"encode {split} ({spec.method})")
    _sync(spec.device)
    start = time.perf_counter()
    # a budget, not a hint: long enough for the split's longest answer too (extrapolation answers are longer)
    preds = _predictions(run, examples, encoded, max(_max_new_tokens(run.train), _max_new_tokens(encoded)))
    _sync(spec.device)
    return preds, time.perf_counter() - start


def _evaluate(
    run: _Run,
    test_examples: Sequence[Example],
    places: tuple[int, int],
    lockstep: list[str],
    load_start,
    extra_tests: dict[str, Sequence[Example]] | None = None,
) -> dict[str, Any]:
    spec, built = run.spec, run.built
    preds, test_s = _predict_split(run, test_examples, "test")
    extra_splits = {}
    for split, examples in (extra_tests or {}).items():
        split_preds, split_s = _predict_split(run, examples, split)
        extra_splits[split] = {
            "n_test": len(examples),
            "metrics": R.split_metrics(split_preds, examples),
            "test_s": split_s,
            "samples": R.samples(examples, split_preds),
            "errors": R.errors(examples, split_preds),
        }
    train_s = sum(run.epoch_s)
    train = run.train
    answer = train.lengths - train.prompt_lengths
    return {
        "schema": R.RESULT_SCHEMA,
        "run_id": spec.run_id,
        "preset": spec.preset,
        "experiment": spec.experiment,
        "task": spec.task,
        "method": spec.method,
        "method_info": run.method.to_dict(),
        "regime": spec.regime,
        "seed": spec.seed,
        "config": asdict(spec),
        "train_path": spec.train_path,
        "product_training": run.product,
        "model": {**built.settings, "params": built.params},
        "data": {
            "n_train": len(train),
            "n_test": len(test_examples),
            "number_places": list(places),
            **R.number_stats(built, test_examples[:2000]),
            "train_format": run.format,
            "seq_len_mean": float(run.lengths.float().mean()),
            "seq_len_max": int(run.lengths.max()),
            "prompt_len_mean": float(train.prompt_lengths.float().mean()),
            "answer_tokens_mean": float(answer.float().mean()),
            "train_tokens_per_epoch": int(run.lengths.sum()),
        },
        "metrics": R.split_metrics(preds, test_examples),
        "extra_splits": extra_splits,
        "prediction_path": preds.path,
        "timing": {
            "train_s": train_s,
            "epoch_s": run.epoch_s,
            "epoch_s_median": statistics.median(run.epoch_s),
            "train_examples_per_s": run.seen / train_s,
            "optimizer_steps": run.step,
            "test_s": test_s,
            "test_examples_per_s": len(test_examples) / test_s,
            "load_avg_per_epoch": run.load,
            "load_avg_start": list(load_start),
            "load_avg_end": list(os.getloadavg()),
            "lockstep_with": lockstep,
        },
        "curve": run.curve,
        "step_curve": run.step_curve,
        "samples": R.samples(test_examples, preds),
        "errors": R.errors(test_examples, preds),
        "environment": R.environment(spec.device),
    }


def group_specs(specs: Sequence[RunSpec]) -> list[list[RunSpec]]:
    """Splits runs into lockstep groups (same `RunSpec.group_key`), keeping first-appearance order."""
    groups: dict[str, list[RunSpec]] = {}
    for spec in specs:
        groups.setdefault(spec.group_key, []).append(spec)
    return list(groups.values())


def run_specs(
    specs: Sequence[RunSpec],
    out_dir: str | os.PathLike,
    resume: bool = False,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Runs every group of `specs` (skipping, with `resume`, runs whose result file exists) and returns the results."""
    results = []
    with tempfile.TemporaryDirectory(prefix="eval_harness-") as workdir:
        for group in group_specs(specs):
            todo = [s for s in group if not (resume and (Path(out_dir) / s.experiment / f"{s.run_id}.json").exists())]
            if len(todo) < len(group):
                log(f"resume: {len(group) - len(todo)} result(s) of this group exist, skipped")
            results += run_group(todo, out_dir, workdir, log)
    return results


__all__ = ["RunSpec", "extra_test_splits", "group_specs", "lr_factor", "run_group", "run_specs"]
