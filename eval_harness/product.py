"""Training and prediction through numadapter's public path (``RunSpec.train_path="product"``, CLI ``--train-path
product``), for numadapter methods and ``lora``, in both regimes.

The harness's own loop (`eval_harness.runner`) feeds tensors from its own encoder (`eval_harness.arms.encode`).
This path is what a user runs instead: the examples become a `datasets.Dataset` of ``{"prompt", "completion"}``
(completion = ``sep + target``), `numadapter.NumberSFTTrainer` prepares them with the run's `numadapter.
NumberTokenizer` and batches them with `numadapter.NumberDataCollator`, and `numadapter.generate` answers the test
prompts. The model, its init and the data are the run's (`eval_harness.arms.models.build`): from scratch every
parameter trains; on a pretrained base (``regime="adapter"``) the base stays frozen and the trainer updates LoRA and
the number modules only. ``lora`` (LoRA alone) is numadapter's plain LoRA here (`eval_harness.arms.Method.
product_adapter`: ``encoding="digits"``, no [AGG], no NTL, EOS rows frozen; on a base whose tokenizer has one token
per digit, as the harness's pretrained bases, its data are the harness loop's token for token). Everything used is
numadapter's public API (``numadapter.__all__``). The budget is mapped onto a `trl.SFTConfig` as far as it goes:

- same: AdamW (torch), peak lr, betas / eps (torch's defaults), weight decay, epochs, batch size, gradient clip,
  seed, a cosine (or constant) schedule after ``int(warmup * steps)`` warmup steps;
- different: transformers' warmup ramps ``step / warmup`` (the harness ``(step + 1) / warmup``); transformers
  decays every parameter but biases and norms (the harness: matrices only; the result counts the vectors that
  transformers decays on top, ``decayed_vectors``); the batch order comes from the Trainer's seeded sampler, not
  the harness's generator; the schedule "wsd" is not offered (refused);
- format: ``answer_format="head"`` where the harness trains the method in its head format (FoNE / xVal with one-[NUM]
  answers: the prompt alone, the head at its last position trained on the answer), else ``"sequence"``.

Prediction: `numadapter.generate`, greedy. A head-format run decodes one token (the answer's [NUM], read by the
number head; the EOS after it was never trained), a sequence-format run the harness's budget. The completion's first
number is the answer, as in the harness's generate path.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from eval_harness.arms.predict import Predictions
from eval_harness.tasks.base import Example

TRAIN_PATHS = ("harness", "product")
PRODUCT_SCHEDULES = {"cosine": "cosine", "constant": "constant_with_warmup"}
TRAINER = "numadapter.NumberSFTTrainer"


def product_dataset(examples: Sequence[Example]) -> Any:
    """The examples as a `datasets.Dataset` of ``{"prompt", "completion"}`` strings (completion: sep + target)."""
    import datasets

    return datasets.Dataset.from_list([{"prompt": e.prompt, "completion": e.sep + e.target} for e in examples])


def sft_config(spec: Any, steps_per_epoch: int, output_dir: str | os.PathLike) -> Any:
    """The `trl.SFTConfig` of a run's budget (see the module docstring for what differs from the harness loop)."""
    from trl import SFTConfig

    if spec.schedule not in PRODUCT_SCHEDULES:
        raise ValueError(
            f"the product path maps the schedule onto transformers' schedulers ({list(PRODUCT_SCHEDULES)}); "
            f"{spec.schedule!r} has none: use --schedule cosine or constant, or --train-path harness."
        )
    total = steps_per_epoch * spec.epochs
    if spec.max_steps is not None:
        total = min(total, spec.max_steps)
    return SFTConfig(
        output_dir=str(output_dir), num_train_epochs=spec.epochs, max_steps=spec.max_steps or -1,
        per_device_train_batch_size=spec.batch_size,
        learning_rate=spec.lr, weight_decay=spec.weight_decay, optim="adamw_torch",
        lr_scheduler_type=PRODUCT_SCHEDULES[spec.schedule], warmup_steps=int(spec.warmup * total),
        max_grad_norm=spec.grad_clip if spec.grad_clip > 0 else 0.0, seed=spec.seed, data_seed=spec.seed,
        use_cpu=spec.device == "cpu", bf16=False, fp16=False, report_to=[], save_strategy="no",
        logging_strategy="epoch", disable_tqdm=True, dataloader_num_workers=0, dataloader_drop_last=False,
    )  # fmt: skip


def train_product(run: Any, examples: Sequence[Example], workdir: str | os.PathLike) -> dict[str, Any]:
    """Trains ``run.built.model`` on `examples` with `numadapter.NumberSFTTrainer`; fills ``run.epoch_s``,
    ``run.losses``, ``run.load``, ``run.curve``, ``run.step`` / ``run.seen`` and (``eval_every_steps``) the
    validation points of ``run.step_curve``, whose prediction time is left out of the epoch times; returns what the
    result records under ``product_training``."""
    from transformers import TrainerCallback

    import numadapter

    spec, built = run.spec, run.built
    answer_format = "head" if run.format == "head" else "sequence"
    args = sft_config(spec, run.steps_per_epoch, os.path.join(workdir, f"sft-{spec.run_id}"))

    class Clock(TrainerCallback):
        """Epoch times (forward, backward, optimizer and collation; not validation) and the mean training loss of each
        epoch; the validation points of ``eval_every_steps``."""

        def on_epoch_begin(self, args, state, control, **kwargs):
            self.start, self.paused = time.perf_counter(), 0.0

        def on_step_end(self, args, state, control, **kwargs):
            run.step = int(state.global_step)
            if run.step_point_due():
                elapsed = sum(run.epoch_s) + time.perf_counter() - self.start - self.paused
                self.paused += run.step_point(elapsed)

        def on_epoch_end(self, args, state, control, **kwargs):
            run.epoch_s.append(time.perf_counter() - self.start - self.paused)
            run.load.append(os.getloadavg()[0])

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                run.losses.append(float(logs["loss"]))

    trainer = numadapter.NumberSFTTrainer(
        model=built.model, args=args, train_dataset=product_dataset(examples), processing_class=built.number_tokenizer,
        answer_format=answer_format, callbacks=[Clock()],
    )  # fmt: skip
    decayed = set(trainer.get_decay_parameter_names(trainer.model))
    vectors = [n for n, p in trainer.model.named_parameters() if p.requires_grad and p.dim() < 2 and n in decayed]
    output = trainer.train()
    run.seen = min(run.step * spec.batch_size, len(examples) * spec.epochs)
    run.curve = [
        {"epoch": i + 1, "loss": loss, "epoch_s": s} for i, (loss, s) in enumerate(zip(run.losses, run.epoch_s))
    ]
    return {
        "trainer": TRAINER,
        "collator": type(trainer.data_collator).__module__ + "." + type(trainer.data_collator).__name__,
        "answer_format": answer_format,
        "global_steps": int(trainer.state.global_step),
        "train_loss": float(output.training_loss),
        "lr_scheduler_type": str(getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type)),
        "warmup_steps": int(args.warmup_steps),
        "decayed_vectors": vectors,
    }


def predict_product(run: Any, examples: Sequence[Example], max_new_tokens: int) -> Predictions:
    """Answers of `examples` by `numadapter.generate` (greedy; one token after a head-format training)."""
    import numadapter

    spec, built = run.spec, run.built
    budget = 1 if run.format == "head" else max_new_tokens
    was_training = built.model.training
    built.model.eval()
    try:
        out = numadapter.generate(
            built.model, built.number_tokenizer, [e.prompt for e in examples], max_new_tokens=budget,
            return_dict=True, batch_size=spec.eval_batch_size,
        )  # fmt: skip
    finally:
        built.model.train(was_training)
    path = f"numadapter.generate, greedy, {budget} new token(s), first number of the completion"
    return Predictions(list(out.completions), list(out.completions), path)


__all__ = ["PRODUCT_SCHEDULES", "TRAIN_PATHS", "predict_product", "product_dataset", "sft_config", "train_product"]
