"""Loss components in the Trainer logs, and Number Token Loss for a plain `trl.SFTTrainer` (no [NUM], no adapter).

`LossMeter` averages loss components over a logging interval exactly as `transformers.Trainer` averages ``loss``:
during training each micro-batch adds its component (already divided by ``num_items_in_batch``, the scored-token
count of the whole accumulated batch, so the micro-batches of one optimizer step sum to that step's value), and the
logged value is the sum over the interval divided by the optimizer steps in it; evaluation logs the mean over
examples. Both numadapter trainers use it; `NumberLossCallback` uses it for the NTL-only path.

NTL only (Number Token Loss paper, Zausinger et al. 2025, docs/papers.md, "Number Token Loss", eq. 4 /
Algorithm A1: ``loss = CE + lambda * L_NTL``)::

    loss_func = numadapter.ntl_loss_func(tokenizer, weight=0.3, kind="was")
    trainer = trl.SFTTrainer(model=model, args=SFTConfig(..., loss_type="nll"), train_dataset=ds,
                             processing_class=tokenizer, compute_loss_func=loss_func)
    numadapter.NumberLossCallback.attach(trainer, loss_func)   # logs ce_loss and ntl_loss
    trainer.train()

TRL 1.16 settings this needs: NTL reads the logits, and TRL's default loss path computes the loss on a fused LM head
that never builds them (``add_fused_lm_head``; the fused output has ``log_probs`` and no ``logits``). Only
``compute_loss_func=`` makes `SFTTrainer.compute_loss` run the model's own forward (with logits) and hand the output
to the function (TRL warns that ``compute_loss_func`` is deprecated and that it costs one extra no-grad forward for
its token-accuracy metric). It must be combined with ``loss_type="nll"`` (TRL refuses ``"dft"`` with a
``compute_loss_func``) and without DeepSpeed sequence parallelism (also refused by TRL). The loss function raises a
`ValueError` when it receives an output without logits, and `NumberLossCallback` raises when training steps pass
without the function being called (it was not passed as ``compute_loss_func``) or ``loss_type`` is not ``"nll"``.
For a plain ``transformers.Seq2SeqTrainer`` (T5) use ``shift_labels=False``; the Trainer then calls the model without
labels, so the collator must supply ``decoder_input_ids`` (``DataCollatorForSeq2Seq(tokenizer, model=model)`` does).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F
from transformers import TrainerCallback

from numadapter.ntl import NTLoss, cross_entropy_and_ntl
from numadapter.schema import IGNORE_INDEX

COMPONENTS = ("lm_loss", "number_loss", "ntl_loss", "aggregate_loss")


def eval_prefix(logs: Mapping[str, Any]) -> str | None:
    """The metric prefix of evaluation logs (``"eval"`` for ``eval_loss`` + ``eval_runtime``), or None."""
    for key in logs:
        if key.endswith("_runtime") and f"{key[: -len('_runtime')]}_loss" in logs:
            return key[: -len("_runtime")]
    return None


class LossMeter:
    """Sums loss components between two logs, like ``Trainer`` sums ``loss`` (see the module docstring).

    Args:
        reduce: maps a 1-element tensor to its sum over processes (identity in a single process); the trainers pass
            an all-gather, so every rank logs the same values.
    """

    def __init__(self, reduce: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        self.reduce = reduce or (lambda tensor: tensor)
        self.train: dict[str, torch.Tensor] = {}
        self.train_calls = 0
        self.eval: dict[str, torch.Tensor] = {}
        self.eval_weight = 0.0
        self.last_step = 0

    def add_train(self, values: Mapping[str, torch.Tensor | None], factor: float = 1.0) -> None:
        """One micro-batch: adds ``value * factor`` (factor: the same scaling the Trainer applies to its loss)."""
        self.train_calls += 1
        for name, value in values.items():
            if value is not None:
                value = value.detach().float() * factor
                self.train[name] = self.train[name] + value if name in self.train else value

    def add_eval(self, values: Mapping[str, torch.Tensor | None], weight: float) -> None:
        """One evaluation batch of `weight` examples (per-batch means)."""
        self.eval_weight += weight
        for name, value in values.items():
            if value is not None:
                value = value.detach().float() * weight
                self.eval[name] = self.eval[name] + value if name in self.eval else value

    def pop_train(self, global_step: int, processes: int = 1) -> dict[str, float]:
        """The interval averages (sum / optimizer steps, mean over processes); resets the interval."""
        steps = global_step - self.last_step
        self.last_step = global_step
        values, self.train, self.train_calls = self.train, {}, 0
        if steps <= 0:
            return {}
        return {name: self.reduce(value.reshape(1)).item() / processes / steps for name, value in values.items()}

    def pop_eval(self) -> dict[str, float]:
        """The example-weighted means of the evaluation run; resets."""
        values, weight = self.eval, self.eval_weight
        self.eval, self.eval_weight = {}, 0.0
        if not values:
            return {}
        total = self.reduce(torch.tensor([weight], dtype=torch.float32, device=next(iter(values.values())).device))
        return {name: (self.reduce(value.reshape(1)) / total).item() for name, value in values.items()}


class NTLLossFunction:
    """``CE + weight * NTL`` from a model output's logits: a ``compute_loss_func`` for (TRL's) Trainer.

    Both terms are sums over the scored positions divided by ``num_items_in_batch`` (the scored-token count of the
    accumulated batch; this batch's count when None), so gradient accumulation gives the loss of one large batch and
    ``ntl_loss`` is per scored token (as in the numadapter trainers). Build it with `ntl_loss_func`.

    Attributes:
        ntl: the `numadapter.ntl.NTLoss` (``reduction="sum"``).
        weight: lambda.
        shift_labels: causal LMs score ``logits[t]`` against ``labels[t + 1]``; False for T5.
        meter: the `LossMeter` that `NumberLossCallback` logs from (``ce_loss``, ``ntl_loss``).
    """

    def __init__(self, ntl: NTLoss, weight: float, shift_labels: bool = True) -> None:
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
            raise ValueError(f"`weight` (NTL's lambda) must be a non-negative number, got {weight!r}.")
        self.ntl, self.weight, self.shift_labels = ntl, float(weight), shift_labels
        self.meter = LossMeter()
        self.average_across_devices_factor = 1.0  # set by NumberLossCallback from the TrainingArguments

    def __call__(self, outputs: Any, labels: torch.Tensor | None, num_items_in_batch: Any = None) -> torch.Tensor:
        """Computes the loss.

        Args:
            outputs: the model output (a ``ModelOutput`` or dict with ``logits`` [B, T, V]).
            labels: [B, T] token ids, -100 where not trained (unshifted for causal LMs).
            num_items_in_batch: the CE normaliser the Trainer passes.

        Returns:
            The scalar loss.
        """
        logits = outputs.get("logits") if isinstance(outputs, Mapping) else getattr(outputs, "logits", None)
        if logits is None:
            raise ValueError(
                f"ntl_loss_func got a {type(outputs).__name__} without `logits`: NTL needs the LM logits. With "
                "trl.SFTTrainer pass it as `compute_loss_func=` (TRL then runs the model's own forward instead of its "
                "fused LM head) and keep loss_type='nll'; do not enable Liger's fused linear cross-entropy."
            )
        if labels is None:
            raise ValueError(
                "ntl_loss_func got labels=None: the batches need a `labels` column (TRL's collators add it)."
            )
        labels = labels.to(logits.device)
        if self.shift_labels:
            labels = F.pad(labels[:, 1:], (0, 1), value=IGNORE_INDEX)  # (B, T): labels[t + 1] for logits[t]
        if num_items_in_batch is None:
            denom = (labels != IGNORE_INDEX).sum().clamp(min=1).float()
        else:
            denom = torch.as_tensor(num_items_in_batch, device=logits.device).float()
        ce, ntl = cross_entropy_and_ntl(logits, labels, self.ntl, ce_reduction="sum")
        ce, ntl = ce / denom, ntl / denom
        values = {"ce_loss": ce, "ntl_loss": ntl}
        if torch.is_grad_enabled():
            self.meter.add_train(values, self.average_across_devices_factor if num_items_in_batch is not None else 1)
        else:
            self.meter.add_eval(values, labels.shape[0])
        return ce + self.weight * ntl


def ntl_loss_func(
    tokenizer: Any,
    weight: float = 0.3,
    kind: str = "was",
    *,
    shift_labels: bool = True,
    digit_level: bool = True,
    **ntl_kwargs: Any,
) -> NTLLossFunction:
    """A ``compute_loss_func`` adding the Number Token Loss to the LM cross-entropy (no [NUM], no adapter needed).

    Args:
        tokenizer: the model's Hugging Face tokenizer (its digit tokens are the number tokens).
        weight: lambda in ``CE + lambda * NTL`` (the paper uses 0.3 for NTL-WAS).
        kind: the NTL variant (``"was"``, ``"was-cdf"``, ``"mse"``, ``"mae"``, ``"huber"``, ``"gce"``).
        shift_labels: True for causal LMs, False for T5.
        digit_level: only single-digit tokens count as number tokens (the paper's recommendation). A tokenizer
            that writes numbers with multi-digit tokens (Llama 3 groups up to three digits) then gets NTL 0 on
            nearly every number: a `UserWarning` says so; pass False to score those tokens by their value.
        **ntl_kwargs: further `numadapter.ntl.NTLoss` options (``squash_factor``, ``sigma``, ...).

    Returns:
        An `NTLLossFunction`; pass it as ``compute_loss_func`` and log it with `NumberLossCallback` (module
        docstring: the TRL settings it needs).
    """
    ntl = NTLoss(tokenizer, kind=kind, digit_level=digit_level, reduction="sum", **ntl_kwargs)
    if digit_level:
        _warn_multi_digit_tokens(tokenizer, ntl)
    return NTLLossFunction(ntl, weight, shift_labels=shift_labels)


NUMBER_PROBE = "In 2024 we sold 1234 units at 56.78 each, 90 more than 345."


def _warn_multi_digit_tokens(tokenizer: Any, ntl: NTLoss) -> None:
    """Warns when `tokenizer` writes numbers with multi-digit tokens (Llama 3: "123"), which ``digit_level=True``
    leaves out of NTL, so the loss is 0 on nearly every number."""
    encode = tokenizer if callable(tokenizer) else getattr(tokenizer, "tokenizer", None)
    source = tokenizer if hasattr(tokenizer, "convert_ids_to_tokens") else getattr(tokenizer, "tokenizer", None)
    if encode is None or source is None:
        return
    ids = encode(NUMBER_PROBE, add_special_tokens=False)["input_ids"]
    counted = set(ntl.number_token_ids)
    tokens = source.convert_ids_to_tokens(ids)
    missed = [t for i, t in zip(ids, tokens) if i not in counted and any(map(str.isdigit, t))]
    if missed:
        warnings.warn(
            f"ntl_loss_func: {type(source).__name__} writes numbers with multi-digit tokens ({NUMBER_PROBE!r} -> "
            f"{missed}), and digit_level=True counts single digits only, so NTL is 0 on such numbers (nearly all of "
            "them). Pass digit_level=False to score multi-digit tokens by their value (consider squash_factor, "
            "see numadapter.ntl), or use a tokenizer that splits numbers into digits.",
            UserWarning,
            stacklevel=3,
        )


class NumberLossCallback(TrainerCallback):
    """Logs the components of an `NTLLossFunction` (``ce_loss``, ``ntl_loss``) with the Trainer's logs.

    Values are averaged over the logging interval like ``loss`` and written into the logs dict and
    ``state.log_history``. Callbacks run in order and transformers puts the reporting callbacks (TensorBoard, W&B)
    before user callbacks, so use `attach` (which puts this one first) to have them record the components too.

    Args:
        loss_func: the `NTLLossFunction` passed as ``compute_loss_func``.
    """

    def __init__(self, loss_func: NTLLossFunction) -> None:
        if not isinstance(loss_func, NTLLossFunction):
            raise TypeError(
                f"NumberLossCallback needs the loss of ntl_loss_func(...), got {type(loss_func).__name__}."
            )
        self.loss_func = loss_func

    @classmethod
    def attach(cls, trainer: Any, loss_func: NTLLossFunction) -> NumberLossCallback:
        """Creates the callback and runs it before every other callback of `trainer`; returns it."""
        callback = cls(loss_func)
        trainer.callback_handler.callbacks.insert(0, callback)
        return callback

    def on_train_begin(self, args, state, control, **kwargs):
        loss_type = getattr(args, "loss_type", "nll")
        if loss_type not in ("nll", "chunked_nll"):
            raise ValueError(
                f"NumberLossCallback: loss_type={loss_type!r} replaces the loss (TRL refuses a compute_loss_func with "
                "it), so NTL would not be trained: set loss_type='nll'."
            )
        processes = getattr(args, "world_size", 1) if getattr(args, "average_tokens_across_devices", False) else 1
        self.loss_func.average_across_devices_factor = float(processes)
        self.loss_func.meter.last_step = state.global_step

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is None:
            return
        meter = self.loss_func.meter
        values: dict[str, float] = {}
        if "loss" in logs:
            if meter.train_calls == 0 and state.global_step > meter.last_step:
                raise RuntimeError(
                    "NumberLossCallback: training steps ran without calling the NTL loss function, so NTL is not "
                    "being trained: pass the same object as `compute_loss_func=` to the trainer (with trl.SFTTrainer, "
                    "keep loss_type='nll')."
                )
            values = meter.pop_train(state.global_step)
        else:
            prefix = eval_prefix(logs)
            if prefix is not None:
                values = {f"{prefix}_{k}": v for k, v in meter.pop_eval().items()}
        logs.update(values)
        if values and state.log_history:
            state.log_history[-1].update(values)
