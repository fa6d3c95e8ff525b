"""Presets: named sets of experiments (tables), each a grid of methods x training sizes x model sizes.

- ``cpu-small``: fits a 2-core CPU, each table in at most about 30 minutes; measured figures in
  ``eval_harness/results/README.md``. FoNE Table 6 model 4 (4 layers x 256 wide) unless a table varies the size.
- ``paper``: the FoNE paper's sizes (Sec. 4.1, Appendix G: 100 epochs, batch 512, learning rate 0.005, xVal
  0.0001; Table 4 split sizes; Table 5: model 4 for the data-size sweep, 200,000 examples for the model-size sweep;
  Table 6 models), for GPUs (``--device cuda``).
- ``tiny``: a few steps on the smallest model, for tests and smoke runs.
- ``pretrained``: the adapter regime on the real checkpoint the install brings (SmolLM2-135M-Instruct,
  `numadapter.smollm2_path`, unless ``--base PATH``): the quick start's 3-4 digit addition, LoRA on digit tokens vs
  FoNE + LoRA vs digits + NTL vs xVal, each arm about 10 minutes of training on 2 cores, with a validation curve.

Every experiment trains all of its methods on the same data with the same budget (epochs, batch size, schedule;
the learning rate is per method only where a paper sets it so, as for xVal). Tables with ``regime="adapter"`` run
only when a pretrained base is given (``--base PATH``, or the preset's `Preset.default_base`; ``python -m
eval_harness pretrain-base --out DIR`` makes a small one locally, `eval_harness.pretrain`) and are skipped
otherwise. A table runs once per seed of `Experiment.seeds` (``--seeds`` / ``--seed`` replace them); the report adds
mean +- std over the seeds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from eval_harness.arms import METHODS, get_method
from eval_harness.arms.sizes import TABLE6, LoraSettings

if TYPE_CHECKING:
    from eval_harness.runner import RunSpec

ALL_SCRATCH = tuple(name for name, m in METHODS.items() if "scratch" in m.regimes)
ADAPTER_METHODS = ("lora", "fone", "fone_feature", "xval", "digits_ntl_was", "digits_agg")


@dataclass(frozen=True)
class Experiment:
    """One table: a grid of runs with a shared budget.

    Attributes:
        name: table name (results go to ``<out>/<name>/``).
        title: heading in the report.
        task: task name.
        methods: method names.
        train_sizes: training-set sizes (nested subsets of the train split).
        model_sizes: FoNE Table 6 sizes (scratch).
        regime: "scratch" or "adapter".
        n_test, n_valid, eval_every: test / validation sizes and the validation interval (epochs; 0: never).
        eval_every_steps: a validation point every this many optimizer steps (`RunSpec.eval_every_steps`; 0: never).
        epochs, batch_size, lr, schedule, warmup, weight_decay: the budget (`RunSpec`).
        steps: if set, a budget in optimizer steps instead of `epochs`: each training size gets
            ``ceil(steps * batch_size / train_size)`` epochs, so every size sees the same number of steps (a
            fixed-compute data-size sweep; `epochs` is then ignored).
        max_steps: if set, an exact budget in optimizer steps (`RunSpec.max_steps`): each run gets the epochs that
            hold them and stops after the last (`epochs` and `steps` are then ignored).
        max_steps_by_method: per-method `max_steps` that replace it (an equal wall-time budget: fewer steps for the
            methods whose steps take longer).
        lr_by_method: per-method learning rates that replace `lr` (only where a paper prescribes one).
        plots: the x axes of the accuracy plots ("train_size", "model_size").
        note: what the table shows, for the report.
        seeds: one run per seed of every (method, training size, model size); each seed fixes the data split,
            the model init and the batch order (`RunSpec.seed`). The report shows mean +- std over the seeds.
    """

    name: str
    title: str
    task: str
    methods: tuple[str, ...]
    train_sizes: tuple[int, ...]
    model_sizes: tuple[int, ...] = (4,)
    regime: str = "scratch"
    n_test: int = 2000
    n_valid: int = 0
    eval_every: int = 0
    eval_every_steps: int = 0
    epochs: int = 10
    steps: int | None = None
    max_steps: int | None = None
    max_steps_by_method: Mapping[str, int] = field(default_factory=dict)
    batch_size: int = 64
    lr: float = 1e-3
    lr_by_method: Mapping[str, float] = field(default_factory=dict)
    schedule: str = "cosine"
    warmup: float = 0.05
    weight_decay: float = 0.0
    plots: tuple[str, ...] = ()
    note: str = ""
    seeds: tuple[int, ...] = (0,)

    def __post_init__(self) -> None:
        seeds = self.seeds
        if (
            not isinstance(seeds, tuple)
            or not seeds
            or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds)
        ):
            raise ValueError(
                f"Experiment {self.name!r}: `seeds` must be a non-empty tuple of non-negative ints, got {seeds!r} "
                "(CLI: --seeds 0,1,2)."
            )
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"Experiment {self.name!r}: `seeds` repeats a seed: {seeds!r}; list each seed once.")

    def specs(self, preset: str, **overrides) -> list[RunSpec]:
        """The runs of this table, seed by seed (overrides: any `RunSpec` field, e.g. device, base, threads).

        A ``seed`` override replaces `seeds` by that one seed.
        """
        from eval_harness.runner import RunSpec

        seeds = self.seeds
        if overrides.get("seed") is not None:
            seeds = (overrides.pop("seed"),)
        overrides.pop("seed", None)
        out = []
        sizes = self.model_sizes if self.regime == "scratch" else (None,)
        for seed in seeds:
            for model_size in sizes:
                for train_size in self.train_sizes:
                    epochs = self.epochs
                    if self.steps is not None:
                        epochs = max(1, math.ceil(self.steps * self.batch_size / train_size))
                    for method in self.methods:
                        max_steps = self.max_steps_by_method.get(method, self.max_steps)
                        if max_steps is not None:
                            epochs = max(1, math.ceil(max_steps * self.batch_size / train_size))
                        fields = dict(
                            preset=preset, experiment=self.name, task=self.task, method=method,
                            train_size=train_size, regime=self.regime, model_size=model_size, n_test=self.n_test,
                            n_valid=self.n_valid, eval_every=self.eval_every, epochs=epochs,
                            batch_size=self.batch_size, lr=self.lr_by_method.get(method, self.lr),
                            schedule=self.schedule, warmup=self.warmup, weight_decay=self.weight_decay, seed=seed,
                            max_steps=max_steps, eval_every_steps=self.eval_every_steps,
                        )  # fmt: skip
                        fields.update(overrides)
                        out.append(RunSpec(**fields))
        return out


@dataclass(frozen=True)
class Preset:
    """A named set of experiments.

    Attributes:
        name: preset name (``--preset``).
        description: one line for ``--help``.
        experiments: the tables.
        device: the default device.
        default_base: returns the pretrained base of the adapter tables when no ``--base`` is given (None: they are
            skipped without one); called only when such a table runs.
    """

    name: str
    description: str
    experiments: tuple[Experiment, ...]
    device: str = "cpu"
    default_base: Callable[[], str] | None = None

    def experiment(self, name: str) -> Experiment:
        for experiment in self.experiments:
            if experiment.name == name:
                return experiment
        raise ValueError(
            f"preset {self.name!r} has no experiment {name!r}; its experiments: "
            f"{', '.join(e.name for e in self.experiments)}."
        )


DECIMAL_ADD = "fone_decimal_add_6"

# cpu-small "ntl_mul": the NTL paper's decoder-only multiplication task (Sec. 4.4, Table 5: factors of 1..5 digits
# in training; MAPE on unseen interpolation pairs and on extrapolation with a 6-digit factor), digit-wise tokens
# from scratch, CE alone ("digits") vs CE + NTL-WAS ("digits_ntl_was", weight 0.3), same data / model / budget.
# The paper fine-tunes pretrained GPT-2 / Granite (Appendix A: batch 32, lr 1e-4, weight decay 0.01; sizes not
# given); here a small model learns from scratch, so its MAPE is far above Table 5's (0.2-1.1%): the CE-vs-NTL gap
# over seeds is the point.
NTL_MUL_TRAIN = 12800
NTL_MUL_MODEL = 2
NTL_MUL_EPOCHS = 10
NTL_MUL_TEST = 2000
NTL_MUL_NOTE = (
    "From scratch, FoNE Table 6 model 2 (0.58M parameters), digit-wise tokens, 12,800 training problems x 10 epochs "
    "(2,000 steps of 64, lr 1e-3 cosine), 2,000 problems per test split, seeds 0, 1, 2 (each seed draws its own "
    "data, init and batch order). 'test' is the interpolation split (unseen pairs, up to 5 x 5 digits), "
    "'test_extrapolation' has a 6-digit factor. Time: one seed (both methods, 10 epochs, 1,000 + 1,000 test "
    "problems) used 6.4 min of process CPU time (user + sys) with --threads 1, measured with `time` on the 2-core "
    "machine while it was busy with other jobs (load 4-8: wall time 23 min, so CPU time is the estimate); 2,000 "
    "test problems per split add about 2 s. So about 20 min for the 3 seeds on 2 quiet cores. Measured then "
    "(seed 0): MAPE 14.2% (CE) vs 10.9% (CE + NTL-WAS) on interpolation, 51.4% vs 47.5% on extrapolation."
)

# cpu-small "data_size" (the FoNE headline): weight decay 0.1 for every method. With the paper's head and 40 epochs
# (5% warmup) FoNE reached 98.70% at 3,200 without it, 99.00% with 0.1, 99.05% with 0.3, 98.35% with 1.0 (seed 0);
# its errors are carries (e.g. 225.542+774.136 -> 1999.678).
DATA_SIZE_WEIGHT_DECAY = 0.1
# A short budget that fits the table in ~30 min needs a long warmup: FoNE from scratch sits on a loss plateau first,
# and a warmup of ~100 steps gets it off (fone_feature at 3,200, 15 epochs: 5% warmup (37 steps) 3% EM; 13.3%
# (100 steps) 100% and 99.95% on seeds 0 and 1, validation >= 99.8% from epoch 10).
DATA_SIZE_EPOCHS = 14
DATA_SIZE_WARMUP = 0.14

CPU_SMALL = Preset(
    "cpu-small",
    "2-core CPU: FoNE vs digit-wise vs subword on 6-digit decimal addition (headline + Table 1), model and "
    "method sweeps, NTL multiplication (CE vs CE + NTL-WAS, 3 seeds), adapter table with --base (make one with "
    "pretrain-base); each table <= ~30 min on 2 cores",
    (
        Experiment(
            "data_size", "6-digit decimal addition: accuracy vs training-data size (FoNE Fig. 2a; Table 1 timings)",
            DECIMAL_ADD, ("fone", "fone_feature", "digits", "subword"), (3200, 6400), epochs=DATA_SIZE_EPOCHS,
            batch_size=64, lr=1e-3, warmup=DATA_SIZE_WARMUP, weight_decay=DATA_SIZE_WEIGHT_DECAY,
            plots=("train_size",),
            note=f"From scratch, FoNE Table 6 model 4, every method with the same budget ({DATA_SIZE_EPOCHS} epochs "
            f"of 64, lr 1e-3 cosine after a {DATA_SIZE_WARMUP:.0%} warmup, AdamW weight decay 0.1 on the weight "
            "matrices) on the same examples and batch order; run together, the methods train in lockstep and "
            "their epoch times are measured side by side.",
        ),
        Experiment(
            "model_size", "6-digit decimal addition: accuracy vs model size (FoNE Fig. 2b)",
            DECIMAL_ADD, ("fone", "fone_feature", "digits", "subword"), (3200,), model_sizes=(1, 2, 3), epochs=20,
            batch_size=64, lr=1e-3, plots=("model_size",), note="From scratch, FoNE Table 6 models 1-3.",
        ),
        Experiment(
            "methods", "6-digit decimal addition: every method (xVal, NTL kinds, [AGG]) at one size",
            DECIMAL_ADD, ALL_SCRATCH, (3200,), model_sizes=(2,), epochs=8, batch_size=64, lr=1e-3,
            note="From scratch, FoNE Table 6 model 2; a short budget, so the ranking, not the ceiling, is the point.",
        ),
        Experiment(
            "ntl_mul", "NTL multiplication (NTL Sec. 4.4, Table 5): CE vs CE + NTL-WAS, interpolation and "
            "extrapolation MAPE", "ntl_mul", ("digits", "digits_ntl_was"), (NTL_MUL_TRAIN,),
            model_sizes=(NTL_MUL_MODEL,), n_test=NTL_MUL_TEST, epochs=NTL_MUL_EPOCHS, batch_size=64, lr=1e-3,
            seeds=(0, 1, 2), note=NTL_MUL_NOTE,
        ),
        Experiment(
            "adapter", "6-digit decimal addition: LoRA + number adapter vs LoRA alone on a pretrained base",
            DECIMAL_ADD, ADAPTER_METHODS, (3200,), regime="adapter", epochs=15, batch_size=32, lr=1e-3,
            note="Runs only with --base PATH (`python -m eval_harness pretrain-base --out DIR` makes one); the base "
            "is frozen, LoRA r=16 on all projections (+ number modules). On the default pretrain-base base (1.37M) "
            "with --threads 1 on a busy 2-core machine: 15 epochs took 9.5 min (9.1 min CPU) and brought the MAE "
            "from 180-350 (3 epochs, 2 min) down to 3-71; exact match stayed 0 for every method.",
        ),
    ),
)  # fmt: skip

PAPER_DATA_SIZES = (3200, 6400, 12800, 25600, 51200, 102400, 204800, 409600)
PAPER_LR = {"xval": 1e-4}

PAPER = Preset(
    "paper",
    "the FoNE paper's sizes (100 epochs, batch 512, lr 0.005 / xVal 0.0001, Table 4-6) for GPUs: --device cuda",
    (
        Experiment(
            "data_size", "6-digit decimal addition: accuracy vs training-data size (FoNE Fig. 2a, Table 1)",
            DECIMAL_ADD, ("fone", "fone_feature", "digits", "subword", "xval"), PAPER_DATA_SIZES, n_test=200_000,
            epochs=100, batch_size=512, lr=5e-3, lr_by_method=PAPER_LR, plots=("train_size",),
            note="From scratch, FoNE Table 6 model 4 (Table 5: the data-size sweep uses one model); fone_feature "
            "is numadapter's carry-aware head target, not in the paper.",
        ),
        Experiment(
            "model_size", "6-digit decimal addition: accuracy vs model size (FoNE Fig. 2b)",
            DECIMAL_ADD, ("fone", "digits", "subword", "xval"), (200_000,), model_sizes=tuple(TABLE6),
            n_test=200_000, epochs=100, batch_size=512, lr=5e-3, lr_by_method=PAPER_LR, plots=("model_size",),
            note="From scratch, FoNE Table 6 models 1-6, 200,000 training examples (Table 5).",
        ),
        Experiment(
            "tasks_int_add", "6-digit integer addition (FoNE Fig. 3a)", "fone_int_add_6",
            ("fone", "digits", "subword", "xval"), (3200, 12800, 51200, 204800), n_test=200_000, epochs=100,
            batch_size=512, lr=5e-3, lr_by_method=PAPER_LR, plots=("train_size",),
        ),
        Experiment(
            "tasks_sub", "5-digit integer subtraction (FoNE Fig. 3b, Table 1)", "fone_int_sub_5",
            ("fone", "digits", "subword", "xval"), (3200, 12800, 51200, 204800), n_test=200_000, epochs=100,
            batch_size=512, lr=5e-3, lr_by_method=PAPER_LR, plots=("train_size",),
        ),
        Experiment(
            "tasks_mul", "3-digit integer multiplication (FoNE Fig. 3c, Table 1)", "fone_int_mul_3",
            ("fone", "digits", "subword", "xval"), (3200, 12800, 51200, 204800), n_test=100_000, epochs=100,
            batch_size=512, lr=5e-3, lr_by_method=PAPER_LR, plots=("train_size",),
        ),
        Experiment(
            "methods", "6-digit decimal addition: every method (xVal, NTL kinds, [AGG])", DECIMAL_ADD, ALL_SCRATCH,
            (51200,), n_test=200_000, epochs=100, batch_size=512, lr=5e-3, lr_by_method=PAPER_LR,
        ),
        Experiment(
            "adapter", "6-digit decimal addition: LoRA + number adapter vs LoRA alone", DECIMAL_ADD,
            ADAPTER_METHODS, (51200,), regime="adapter", n_test=200_000, epochs=3, batch_size=64, lr=2e-4,
            note="Runs only with --base PATH (e.g. Llama-3.2-1B saved locally); LoRA r=16 on all projections.",
        ),
    ),
    device="cuda",
)  # fmt: skip

TINY = Preset(
    "tiny",
    "a few steps on FoNE Table 6 model 1 (tests, smoke runs)",
    (
        Experiment(
            "data_size", "tiny smoke run", DECIMAL_ADD, ("fone", "digits"), (16, 32), model_sizes=(1,), n_test=8,
            epochs=1, batch_size=8, lr=1e-3, plots=("train_size", "model_size"),
        ),
    ),
)  # fmt: skip


def smollm2_base() -> str:
    """The real checkpoint the install brings (`numadapter.smollm2_path`: converted once, then a local directory)."""
    import numadapter

    return numadapter.smollm2_path()


# "pretrained": an equal wall-time budget of about 10 minutes of training per arm on 2 cores at batch 32. Seconds per
# step on SmolLM2-135M (2 cores): FoNE ~1.7 (one [NUM] per number: 8 tokens per example), digit tokens ~4.5 (16
# tokens); `python -m eval_harness.bench.real` measured digits / FoNE epoch time x2.0 at batch 16 on one thread.
PRETRAINED_STEPS = {"fone": 350, "xval": 350, "lora": 130, "digits_ntl_was": 130}
PRETRAINED_EVAL_EVERY = 25
PRETRAINED_NOTE = (
    "The adapter regime on SmolLM2-135M-Instruct (numadapter.smollm2_path(); --base PATH for another base), frozen, "
    "LoRA r=16 (alpha 32) on the seven projections of every layer (+ the number modules), lr 1e-3 cosine after a 5% "
    "warmup, batch 32, on the quick start's task (3-4 digit addition, 'a + b =' -> ' c'). Budget: about 10 minutes "
    "of training per arm on 2 cores (equal wall time): FoNE and xVal "
    f"{PRETRAINED_STEPS['fone']} steps, LoRA on digit tokens and digits + NTL {PRETRAINED_STEPS['lora']} steps "
    "(about 1.7 and 4.5 s per step); --max-steps N gives every arm N steps. Validation exact match on 200 held-out "
    f"problems every {PRETRAINED_EVAL_EVERY} steps (step_curve; its prediction time is not training time), test on "
    "1,000."
)

PRETRAINED = Preset(
    "pretrained",
    "the real SmolLM2-135M-Instruct (numadapter.smollm2_path(), or --base PATH): quick start addition, LoRA on digits "
    "vs FoNE + LoRA vs digits + NTL vs xVal, ~10 min of training per arm on 2 cores, validation curve",
    (
        Experiment(
            "addition", "3-4 digit addition on a real pretrained base: LoRA on digit tokens vs number adapters",
            "quickstart_add", ("lora", "fone", "digits_ntl_was", "xval"), (8000,), regime="adapter", n_test=1000,
            n_valid=200, eval_every_steps=PRETRAINED_EVAL_EVERY, max_steps_by_method=PRETRAINED_STEPS,
            batch_size=32, lr=1e-3, note=PRETRAINED_NOTE,
        ),
    ),
    default_base=smollm2_base,
)  # fmt: skip

PRESETS: dict[str, Preset] = {p.name: p for p in (CPU_SMALL, PAPER, TINY, PRETRAINED)}


def get_preset(name: str) -> Preset:
    """The preset called `name`; `ValueError` listing the valid ones otherwise."""
    if name not in PRESETS:
        raise ValueError(f"Unknown preset {name!r}. Valid presets: {', '.join(PRESETS)}.")
    return PRESETS[name]


def expand(
    preset: Preset,
    *,
    experiments: Sequence[str] | None = None,
    methods: Sequence[str] | None = None,
    train_sizes: Sequence[int] | None = None,
    model_sizes: Sequence[int] | None = None,
    steps: int | None = None,
    max_steps: int | None = None,
    seeds: Sequence[int] | None = None,
    base: str | None = None,
    lora: LoraSettings | None = None,
    skipped: list[str] | None = None,
    **overrides,
) -> list[RunSpec]:
    """The runs of a preset after command-line overrides.

    Args:
        preset: the preset.
        experiments: only these tables (default: all).
        methods: only these methods (each table keeps the ones it can run in its regime).
        train_sizes, model_sizes: replace the tables' grids.
        steps: a budget in optimizer steps for every table (see `Experiment.steps`; ``epochs`` overrides it).
        max_steps: an exact budget in optimizer steps for every run (`Experiment.max_steps`; replaces per-method
            budgets).
        seeds: replace the tables' seeds (one run per seed); a ``seed`` override is the same as ``seeds=[seed]``.
        base: the pretrained base for adapter tables (default: the preset's `Preset.default_base`; without either
            they are skipped and named in `skipped`).
        lora: LoRA settings for adapter tables.
        skipped: collects a line per skipped table.
        **overrides: `RunSpec` fields for every run (device, seed, epochs, batch_size, lr, threads, n_test, ...).

    Returns:
        The `RunSpec` list.
    """
    if seeds and overrides.get("seed") is not None:
        raise ValueError(
            f"got both seed={overrides['seed']!r} and seeds={list(seeds)!r}: pass one of them (CLI: --seed N for one "
            "seed, --seeds 0,1,2 for several)."
        )
    if overrides.get("seed") is not None:
        seeds = [overrides.pop("seed")]
    overrides.pop("seed", None)
    chosen = [preset.experiment(name) for name in experiments] if experiments else list(preset.experiments)
    if not base and preset.default_base is not None and any(e.regime == "adapter" for e in chosen):
        base = preset.default_base()
    specs: list[RunSpec] = []
    for experiment in chosen:
        if experiment.regime == "adapter" and not base:
            if skipped is not None:
                skipped.append(f"{experiment.name}: needs a pretrained base (--base PATH)")
            continue
        if methods:
            names = tuple(m for m in methods if experiment.regime in get_method(m).regimes)
            if not names:
                if skipped is not None:
                    regime = experiment.regime
                    skipped.append(f"{experiment.name}: none of the chosen methods runs in the {regime} regime")
                continue
            experiment = replace(experiment, methods=names)
        if train_sizes:
            experiment = replace(experiment, train_sizes=tuple(train_sizes))
        if model_sizes:
            experiment = replace(experiment, model_sizes=tuple(model_sizes))
        if steps:
            experiment = replace(experiment, steps=steps, max_steps=None, max_steps_by_method={})
        if max_steps:
            experiment = replace(experiment, max_steps=max_steps, max_steps_by_method={})
        if seeds:
            experiment = replace(experiment, seeds=tuple(seeds))
        extra = dict(overrides)
        if "lr" in extra and extra["lr"] is not None:  # one learning rate for every method
            experiment = replace(experiment, lr=extra.pop("lr"), lr_by_method={})
        if extra.get("batch_size") is not None:  # before `specs` turns step budgets into epochs with it
            experiment = replace(experiment, batch_size=extra.pop("batch_size"))
        extra = {key: value for key, value in extra.items() if value is not None}
        if experiment.regime == "adapter":
            extra["base"] = base
            if lora is not None:
                extra["lora"] = lora
        specs += experiment.specs(preset.name, **extra)
    return specs
