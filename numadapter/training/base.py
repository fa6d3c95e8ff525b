"""What both number trainers share (`_NumberLossMixin`): the loss from the model's own forward, component logging,
the kept number columns, the eval step, and generation during ``evaluate`` / ``predict``.

See `numadapter.training.sft` for the loss path the mixin implements (docs/DESIGN.md, "Own the loss path").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from peft import PeftModel
from transformers import EvalPrediction, TrainerCallback
from transformers.trainer_utils import EvalLoopOutput, PredictionOutput

from numadapter.config import NumberAdapterConfig
from numadapter.data.collator import CAUSAL_COLUMNS
from numadapter.data.prepare import prepare_dataset
from numadapter.methods.fone.answer_mode import head_left_out
from numadapter.methods.registry import get_method
from numadapter.training.binding import _map_datasets
from numadapter.training.callbacks import COMPONENTS, LossMeter, eval_prefix
from numadapter.training.packing import PACK_COLUMN
from numadapter.tuner.alignment import causal_lm_labels
from numadapter.tuner.loss import ItemCounts, count_aggregate_numbers

__all__ = ["NumberEvalPrediction", "NumberPredictionOutput"]


class NumberEvalPrediction(EvalPrediction):
    """What a generating `compute_metrics` receives: transformers' `EvalPrediction` plus the decoded answers.

    Attributes:
        predictions: the generated token ids ``[N, L]`` (numpy, right-padded with -100; numbers are [NUM] ids).
        label_ids: None (the references are given as text).
        prompts: the eval set's ``prompt`` strings.
        texts: the generated completions, numbers rendered by the number head (``numadapter.generate``'s
            ``completions``).
        numbers: per example, the generated numbers (`ExactNumber` for FoNE, float for xVal).
        references: the eval set's ``completion`` strings.
    """

    def __init__(self, predictions, prompts, texts, numbers, references) -> None:
        super().__init__(predictions=predictions, label_ids=None)
        self.prompts, self.texts, self.numbers, self.references = prompts, texts, numbers, references


class NumberPredictionOutput(PredictionOutput):
    """`Trainer.predict`'s output when the trainer generates: ``texts``, ``numbers`` as in `NumberEvalPrediction`."""

    texts: list[str]
    numbers: list[list[Any]]


GENERATION_OPTIONS = ("max_new_tokens", "max_length", "num_beams", "do_sample", "temperature", "top_k", "top_p")


def _eval_texts(dataset: Any, why: str) -> tuple[list[str], list[str]]:
    """The ``prompt`` and ``completion`` strings of a raw eval dataset (what generation needs)."""
    columns = list(getattr(dataset, "column_names", None) or [])
    if not {"prompt", "completion"} <= set(columns):
        raise ValueError(
            f"{why} generates an answer for every example's `prompt` and compares it with its `completion`, but the "
            f"eval data has the columns {columns}: pass the eval data as prompt/completion strings (not prepared "
            "with prepare_dataset), or use a compute_metrics without `generates`."
        )
    return [str(p) for p in dataset["prompt"]], [str(c) for c in dataset["completion"]]


class _MeterStart(TrainerCallback):
    """Starts the component interval where the Trainer starts its loss interval (global_step, also on resume)."""

    def __init__(self, meter: LossMeter) -> None:
        self.meter = meter

    def on_train_begin(self, args, state, control, **kwargs):
        self.meter.last_step = state.global_step
        self.meter.train, self.meter.train_calls = {}, 0


TOKEN_ROWS_MARK = "trainable_tokens_delta"  # the trained [NUM] / [AGG] / EOS rows
NUMBER_PARAMETER_MARKS = ("number_modules.", TOKEN_ROWS_MARK)


def is_number_parameter(name: str) -> bool:
    """Whether a parameter name belongs to the number modules or the trained token rows (not LoRA, not the base)."""
    return any(mark in name for mark in NUMBER_PARAMETER_MARKS)


def number_lr_ratios(model: Any) -> tuple[float, float]:
    """The active adapter's learning-rate ratios ``(number modules, token rows)``: ``number_lr_ratio`` and
    ``token_rows_lr_ratio`` (when None: ``number_lr_ratio``, or 1.0 for a FoNE adapter whose head the trainer left
    out); ``(1.0, 1.0)`` for a model that is not a numadapter PeftModel."""
    unwrapped = getattr(model, "module", model)  # DDP / DeepSpeed wrappers
    if not isinstance(unwrapped, PeftModel):
        return 1.0, 1.0
    config = unwrapped.peft_config.get(unwrapped.active_adapter)
    modules = float(getattr(config, "number_lr_ratio", 1.0))
    rows = getattr(config, "token_rows_lr_ratio", None)
    if rows is None:  # the head left out: the EOS row at LoRA's rate, as LoRA on digits trains it
        rows = 1.0 if head_left_out(config) else modules
    return modules, float(rows)


class _NumberLossMixin:
    """What both trainers share: loss from the model's forward, component logging, kept columns, eval step."""

    _number_columns: tuple[str, ...] = CAUSAL_COLUMNS
    _causal = True  # labels[t + 1] is scored at position t (the model shifts the labels)

    def _init_numbers(self) -> None:
        self.model_accepts_loss_kwargs = True  # NumberAdapterModel.forward takes num_items_in_batch
        self._loss_meter = LossMeter(self._sum_over_processes)
        self.add_callback(_MeterStart(self._loss_meter))
        self._item_counts: ItemCounts | None = None

    def create_optimizer(self, *args: Any, **kwargs: Any):
        """transformers' optimizer, with the number parameters in their own groups: the number modules
        (``number_modules``) at ``number_lr_ratio`` x the rate, the trained token rows (``trainable_tokens_delta``:
        [NUM], [AGG], EOS) at ``token_rows_lr_ratio`` x (``number_lr_ratio`` when None). The groups keep their
        weight decay; the scheduler, created after this, scales every group by the same factor. An optimizer the
        user passed in is left as it is.
        """
        had_optimizer = self.optimizer is not None
        optimizer = super().create_optimizer(*args, **kwargs)
        modules_ratio, rows_ratio = number_lr_ratios(self.model)
        if had_optimizer or modules_ratio == rows_ratio == 1.0:
            return optimizer
        ratio_of = {}  # id(parameter) -> its ratio (LoRA and the rest: 1.0)
        for name, p in self.model.named_parameters():
            if is_number_parameter(name):
                ratio_of[id(p)] = rows_ratio if TOKEN_ROWS_MARK in name else modules_ratio
        groups = list(optimizer.param_groups)
        optimizer.param_groups.clear()
        for group in groups:
            for ratio in sorted({1.0, modules_ratio, rows_ratio}):
                params = [p for p in group["params"] if ratio_of.get(id(p), 1.0) == ratio]
                if params:
                    optimizer.add_param_group({**group, "params": params, "lr": group["lr"] * ratio})
        return optimizer

    def _prepare_datasets(self, ntok: Any, train_dataset: Any, eval_dataset: Any) -> tuple[Any, Any]:
        """The train and eval data prepared with `ntok` and ``self._prepare_kwargs`` (set by the trainer first); keeps
        the raw eval data, whose prompt/completion texts a generating compute_metrics needs."""
        self._number_tokenizer = ntok
        self._raw_eval_dataset = eval_dataset
        self._pending_texts = None
        self._last_prediction = None
        self._raw_of_prepared: dict[int, Any] = {}
        self._pack = None
        train = prepare_dataset(train_dataset, ntok, **self._prepare_kwargs)
        evals = _map_datasets(eval_dataset, lambda d: prepare_dataset(d, ntok, **self._prepare_kwargs))
        return train, evals

    def _aggregate_digit_ids(self) -> list[int] | None:
        """The digit token ids when the active adapter trains the aggregate loss (its M is counted), else None."""
        model = self.model
        config = model.peft_config.get(model.active_adapter) if isinstance(model, PeftModel) else None
        if isinstance(config, NumberAdapterConfig):
            return get_method(config).number_count_ids(config)
        return None

    def _get_num_items_in_batch(self, batch_samples: list, device: torch.device):
        """The Trainer's N (scored labels of the accumulated batch); also counts the aggregate loss's numbers M.

        M is the count of digit runs in the aligned labels of every micro-batch (`count_aggregate_numbers`),
        reduced across processes and devices exactly as transformers reduces N. It is kept with N and passed to the
        model as ``ItemCounts(N, M)`` by `compute_loss`.
        """
        tokens = super()._get_num_items_in_batch(batch_samples, device)
        self._item_counts = None
        digit_ids = self._aggregate_digit_ids()
        if tokens is None or digit_ids is None:
            return tokens
        numbers = sum(
            count_aggregate_numbers(causal_lm_labels(b["labels"]) if self._causal else b["labels"], digit_ids)
            for b in batch_samples
        )
        args = self.args
        if args.average_tokens_across_devices:  # as Trainer._get_num_items_in_batch does for N
            if args.world_size > 1:
                numbers = self.accelerator.gather(numbers.to(device)).sum()
        elif args.n_gpu > 1:
            numbers = numbers // args.n_gpu
        numbers = numbers.to(device)
        if args.n_gpu > 1 and numbers.dim() == 0:
            numbers = numbers.unsqueeze(0).expand(args.n_gpu, -1)
        numbers = numbers / (self.get_tp_size() * self.get_cp_size() * self.get_sp_size())
        self._item_counts = ItemCounts(tokens, numbers)
        return tokens

    def _sum_over_processes(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.accelerator.num_processes == 1:
            return tensor
        return self.accelerator.gather(tensor.to(self.accelerator.device)).sum()

    def _set_signature_columns_if_needed(self) -> None:
        if self._signature_columns is None:
            self._signature_columns = [*self._number_columns, "position_ids", PACK_COLUMN]

    def compute_loss(self, model, inputs, return_outputs: bool = False, num_items_in_batch=None):
        """The model's own loss (all components), normalised by `num_items_in_batch`; components go to the logs."""
        if "labels" not in inputs:
            raise ValueError(
                f"The batch has no `labels` (keys: {sorted(inputs)}): use numadapter's NumberDataCollator, which "
                "builds them."
            )
        inputs = {**inputs, "use_cache": False}
        if "shift_labels" in inputs:  # answer_format="head": labels aligned with the logits (the model's choice)
            inputs.pop("labels")
        if num_items_in_batch is not None:
            counts = self._item_counts  # N with the aggregate loss's M, when counted for this accumulated batch
            same = counts is not None and counts.tokens is num_items_in_batch
            inputs["num_items_in_batch"] = counts if same else num_items_in_batch
        outputs = model(**inputs)
        loss = outputs.loss
        if loss is None:
            raise RuntimeError(f"{type(model).__name__} returned no loss; is it a numadapter PeftModel?")
        factor = 1.0
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            factor = float(self.accelerator.num_processes // self.get_tp_size())  # as Trainer.compute_loss
            loss = loss * factor
        values = {name: getattr(outputs, name, None) for name in COMPONENTS}
        if self.model.training:
            if num_items_in_batch is None:  # Trainer divides such a loss by the accumulation steps; so do we
                factor /= self.current_gradient_accumulation_steps
            self._loss_meter.add_train(values, factor)
        else:
            rows = inputs["input_ids"].shape[0]
            if "attention_mask" not in inputs and "position_ids" in inputs:  # packed: count the examples
                rows = int(inputs["position_ids"].eq(0).sum())
            self._loss_meter.add_eval(values, rows)
        self._batch_metrics(outputs, inputs)
        return (loss, outputs) if return_outputs else loss

    def _batch_metrics(self, outputs, inputs) -> None:
        """Hook for trainer-specific metrics (NumberSFTTrainer: TRL's token accuracy and token count)."""

    def prediction_step(self, model, inputs, prediction_loss_only: bool, ignore_keys: list[str] | None = None):
        """Evaluation: the loss of `compute_loss`, and (unless loss-only) the LM logits and labels."""
        inputs = self._prepare_inputs(inputs)
        with torch.no_grad(), self.compute_loss_context_manager():
            loss, outputs = self.compute_loss(model, inputs, return_outputs=True)
        loss = loss.detach().mean()
        if prediction_loss_only:
            return loss, None, None
        return loss, outputs.logits.detach(), inputs.get("shift_labels", inputs["labels"])

    # Generation during evaluate / predict (a `compute_metrics` with ``generates = True``, e.g.
    # `numadapter.AnswerMetrics`, or ``predict_with_generate=True`` on NumberSeq2SeqTrainer).

    def _generates(self) -> bool:
        with_generate = getattr(self.args, "predict_with_generate", False)
        return bool(with_generate or getattr(self.compute_metrics, "generates", False))

    def _why_generate(self) -> str:
        if getattr(self.compute_metrics, "generates", False):
            return f"compute_metrics ({type(self.compute_metrics).__name__}, generates=True)"
        return "predict_with_generate=True"

    def _raw_eval(self, dataset: Any) -> Any:
        """The raw (text) eval dataset behind `dataset`: itself, or the one given at construction (by name)."""
        if dataset is None:
            return self._raw_eval_dataset
        if isinstance(dataset, str):
            raw = self._raw_eval_dataset
            return raw[dataset] if isinstance(raw, dict) and dataset in raw else None
        return self._raw_of_prepared.get(id(dataset), dataset)

    def _stash_eval_texts(self, dataset: Any) -> None:
        self._pending_texts = None
        raw = self._raw_eval(dataset)
        if self._generates() and raw is not None and not isinstance(raw, dict):
            self._pending_texts = _eval_texts(raw, self._why_generate())

    def _generation_kwargs(self) -> dict[str, Any]:
        """numadapter.generate's settings: the Seq2SeqTrainer's gen_kwargs, else the metric's, else 64 new tokens."""
        given = {k: v for k, v in dict(getattr(self, "_gen_kwargs", None) or {}).items() if v is not None}
        unknown = sorted(set(given) - set(GENERATION_OPTIONS))
        if unknown:
            raise ValueError(
                f"Generation during evaluation takes {list(GENERATION_OPTIONS)}, got {unknown}: remove them "
                "(numadapter's decode loop cannot run them)."
            )
        kwargs = {k: v for k, v in given.items() if k not in ("max_length", "max_new_tokens")}
        max_new = given.get("max_new_tokens")
        if max_new is None and given.get("max_length") is not None:
            max_new = given["max_length"] - (1 if not self._causal else 0)  # T5 counts its decoder start token
        if max_new is None:
            max_new = getattr(self.compute_metrics, "max_new_tokens", None) or 64
        kwargs["max_new_tokens"] = max_new
        return kwargs

    def evaluation_loop(self, dataloader, description, prediction_loss_only=None, ignore_keys=None,
                        metric_key_prefix: str = "eval") -> EvalLoopOutput:  # fmt: skip
        """Transformers' loop; when generating, the losses only, then `numadapter.generate` on the eval prompts.

        The generated answers go to `compute_metrics` as a `NumberEvalPrediction` (texts, numbers, references) and
        its results join the metrics under `metric_key_prefix`. Every process generates the whole eval set.
        """
        if not self._generates():
            return super().evaluation_loop(dataloader, description, prediction_loss_only, ignore_keys,
                                           metric_key_prefix)  # fmt: skip
        texts = getattr(self, "_pending_texts", None)
        if texts is None:
            raise ValueError(
                f"{self._why_generate()} needs the eval data as prompt/completion text: pass eval_dataset (a "
                "Dataset with `prompt` and `completion` columns) to the trainer, evaluate() or predict()."
            )
        metric = self.compute_metrics
        self.compute_metrics = None
        try:
            output = super().evaluation_loop(dataloader, description, True, ignore_keys, metric_key_prefix)
        finally:
            self.compute_metrics = metric
        from numadapter.generation import generate

        prompts, references = texts
        self.model.eval()
        batch_size = getattr(metric, "batch_size", None) or self.args.eval_batch_size
        result = generate(self.model, self._number_tokenizer, prompts, return_dict=True, return_full_text=False,
                          batch_size=batch_size, **self._generation_kwargs())  # fmt: skip
        width = max((len(ids) for ids in result.token_ids), default=0)
        ids = np.full((len(prompts), width), -100, dtype=np.int64)
        for row, generated in enumerate(result.token_ids):
            ids[row, : len(generated)] = generated
        prediction = NumberEvalPrediction(ids, prompts, list(result.completions), list(result.numbers), references)
        self._last_prediction = prediction
        metrics = dict(output.metrics)
        if metric is not None:
            for key, value in metric(prediction).items():
                metrics[key if key.startswith(f"{metric_key_prefix}_") else f"{metric_key_prefix}_{key}"] = value
        return EvalLoopOutput(predictions=ids, label_ids=None, metrics=metrics, num_samples=output.num_samples)

    def _prepare_eval(self, dataset: Any) -> Any:
        prepared = prepare_dataset(dataset, self._number_tokenizer, **self._prepare_kwargs)
        if self._pack is not None and PACK_COLUMN not in prepared.column_names:
            prepared = self._pack(prepared)
        return prepared

    def _evaluate_prepared(self, eval_dataset, run):
        self._stash_eval_texts(eval_dataset)
        prepared = _map_datasets(eval_dataset, self._prepare_eval)
        if isinstance(eval_dataset, dict):  # Trainer.evaluate calls evaluate again with each prepared dataset
            self._raw_of_prepared = {id(prepared[name]): raw for name, raw in eval_dataset.items()}
        try:
            return run(prepared)
        finally:
            self._raw_of_prepared = {}

    def predict(self, test_dataset, ignore_keys=None, metric_key_prefix: str = "test", **gen_kwargs):
        """`Trainer.predict` on raw or prepared data; when generating, a `NumberPredictionOutput` (texts, numbers)."""
        self._stash_eval_texts(test_dataset)
        prepared = self._prepare_eval(test_dataset)
        self._last_prediction = None
        if self._causal:  # Trainer.predict takes no gen_kwargs: they reach _generation_kwargs here
            self._gen_kwargs, gen_kwargs = gen_kwargs, {}
        output = super().predict(prepared, ignore_keys=ignore_keys, metric_key_prefix=metric_key_prefix, **gen_kwargs)
        last = self._last_prediction
        if last is None:
            return output
        result = NumberPredictionOutput(*output)
        result.texts, result.numbers = last.texts, last.numbers
        return result

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs:
            logs.update(self._loss_meter.pop_train(self.state.global_step, self.accelerator.num_processes))
        else:
            prefix = eval_prefix(logs)
            if prefix is not None:
                logs.update({f"{prefix}_{k}": v for k, v in self._loss_meter.pop_eval().items()})
        super().log(logs, start_time)
