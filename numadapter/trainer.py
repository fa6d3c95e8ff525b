"""`NumberSFTTrainer` (causal LMs, on `trl.SFTTrainer`) and `NumberSeq2SeqTrainer` (T5, on `Seq2SeqTrainer`).

docs/DESIGN.md, "Own the loss path". Both trainers

- tokenize text datasets with the `NumberTokenizer` (`numadapter.data.prepare_dataset`: plain text, prompt-completion,
  messages) and collate them with `numadapter.collator.NumberDataCollator`, so the number tensors stay aligned
  through truncation, padding and completion-only masking; TRL's own preparation is skipped (it keeps only
  ``input_ids`` and ``labels``) and ``remove_unused_columns`` keeps the number columns (`_set_signature_columns`);
- compute the loss from the model's own forward: ``CE + number_loss_weight * head loss (+ ntl_weight * NTL)
  (+ the aggregate loss)`` as `numadapter.tuner.loss` defines it. TRL 1.16's `SFTTrainer` patches a fused LM head
  onto the base model's forward at construction; `NumberSFTTrainer` removes that patch again, so the number hooks,
  the head and every logits-based term see the real forward;
- honour ``num_items_in_batch``: the Trainer counts the scored labels of the whole accumulated batch (over all
  processes with ``average_tokens_across_devices``) and the model divides every summed term by it, so accumulated
  micro-batches give the loss and gradients of one large batch. The number-head loss and NTL are normalised by the
  same count: the adapter scores each [NUM] label like one more token (``CE + w * head`` per [NUM]), which is
  accumulation-exact without a second count (see `numadapter.tuner.loss`). The aggregate auxiliary loss (digits +
  ``aggregate_loss_lambda < 1``) is the paper's mean over numbers: its count (the digit runs of the labels) is
  taken over the accumulated batch and the processes the same way (`_get_num_items_in_batch`) and reaches the
  model with the token count as ``ItemCounts(tokens, numbers)``, so it is exact too. Every component is multiplied
  by the process count like the Trainer's loss (DDP then averages the gradients);
- log each component (``lm_loss``, ``number_loss``, ``ntl_loss``, ``aggregate_loss``) next to ``loss``, averaged
  over the logging interval the way the Trainer averages ``loss`` (`numadapter.callbacks.LossMeter`), and so to
  TensorBoard / W&B when enabled;
- save checkpoints through `PeftModel.save_pretrained` (``Trainer._save`` does so for a ``PeftModel``: the LoRA
  weights, the [NUM] rows and the number modules in ``adapter_model.safetensors``) plus the `NumberTokenizer`
  (tokenizer files + ``number_tokenizer_config.json``); resuming loads them back with ``PeftModel.load_adapter``. The
  rest of a checkpoint is safetensors + JSON too (docs/DESIGN.md, "Safe to load"; `numadapter.safe_checkpoint`):
  training arguments, optimizer, scheduler, scaler and RNG state, read back on resume without unpickling (DeepSpeed's
  and FSDP's own checkpoint files are the exception).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch
from peft import PeftModel
from transformers import EvalPrediction, Seq2SeqTrainer, Seq2SeqTrainingArguments, TrainerCallback
from transformers.trainer_utils import EvalLoopOutput, PredictionOutput
from trl import SFTConfig, SFTTrainer

from numadapter.callbacks import COMPONENTS, LossMeter, eval_prefix
from numadapter.collator import CAUSAL_COLUMNS, GROUP_FIELD, SEQ2SEQ_COLUMNS, NumberDataCollator
from numadapter.config import NumberAdapterConfig
from numadapter.data import detect_format, prepare_dataset
from numadapter.data_checks import first_example
from numadapter.methods.registry import get_method
from numadapter.quantization import restore_number_precision
from numadapter.safe_checkpoint import SafeCheckpointMixin
from numadapter.tokenization import NumberTokenizer
from numadapter.tuner.alignment import causal_lm_labels
from numadapter.tuner.loss import ItemCounts, count_aggregate_numbers
from numadapter.wire import check_tokenizer_matches


def _bind(model: Any, processing_class: Any, peft_config: NumberAdapterConfig | None) -> tuple[PeftModel, Any]:
    """The numadapter PeftModel and its NumberTokenizer (wrapping the model with `peft_config` when given)."""
    from numadapter.mapping import get_peft_model

    if isinstance(model, str):
        raise TypeError(
            f"numadapter trainers take a model object, got the string {model!r}: load it with from_pretrained and "
            "wrap it with numadapter.get_peft_model (or pass peft_config=NumberAdapterConfig(...))."
        )
    if processing_class is None:
        raise ValueError(
            "numadapter trainers need `processing_class`: a NumberTokenizer (or the model's tokenizer, which is then "
            "wrapped in a NumberTokenizer with the adapter's config)."
        )
    if peft_config is not None:
        if not isinstance(peft_config, NumberAdapterConfig):
            raise TypeError(f"`peft_config` must be a NumberAdapterConfig, got {type(peft_config).__name__}.")
        if isinstance(model, PeftModel):
            raise ValueError("Pass either a PeftModel or a base model with `peft_config`, not both.")
        model = get_peft_model(model, peft_config, tokenizer=processing_class)
    config = model.peft_config.get(model.active_adapter) if isinstance(model, PeftModel) else None
    if not isinstance(config, NumberAdapterConfig):
        raise TypeError(
            f"numadapter trainers train a numadapter PeftModel, got {type(model).__name__}: wrap the model with "
            "numadapter.get_peft_model(model, NumberAdapterConfig(...), tokenizer=tokenizer), or pass "
            "peft_config=NumberAdapterConfig(...)."
        )
    ntok = processing_class
    if not isinstance(ntok, NumberTokenizer):
        ntok = NumberTokenizer(processing_class, config)
    check_tokenizer_matches(ntok, config, "the number trainer", "processing_class")
    return model, ntok


def _completion_only(args_value: bool | None, dataset: Any) -> bool:
    """TRL's rule: None means True for prompt-completion data, False otherwise."""
    if args_value is not None:
        return bool(args_value)
    return first_example(dataset, "train_dataset").keys() >= {"prompt", "completion"}


def _map_datasets(datasets: Any, fn) -> Any:
    if datasets is None or isinstance(datasets, str):
        return datasets
    if isinstance(datasets, dict):
        return {name: fn(dataset) for name, dataset in datasets.items()}
    return fn(datasets)


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


PACK_COLUMN = "pack"


def pack_examples(dataset: Any, max_length: int | None) -> Any:
    """Prepared examples packed whole into rows of at most `max_length` tokens (best fit decreasing, as TRL's
    ``packing_strategy="bfd"``): one row per pack, its examples kept as a list under ``"pack"`` (each with its own
    number tensors, so no number crosses a boundary). An example longer than `max_length` gets a row alone."""
    import datasets

    lengths = [len(ids) for ids in dataset["input_ids"]]
    limit = max_length or max(lengths, default=1)
    bins: list[list[int]] = []
    room: list[int] = []
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        fits = [b for b in range(len(bins)) if room[b] >= lengths[index]]
        if fits:
            best = min(fits, key=lambda b: room[b])
            bins[best].append(index)
            room[best] -= lengths[index]
        else:
            bins.append([index])
            room.append(limit - lengths[index])
    return datasets.Dataset.from_dict({PACK_COLUMN: [[dataset[i] for i in sorted(b)] for b in bins]})


class PackedCollator:
    """Collates packed rows (`pack_examples`) padding-free: the examples of the whole batch in one row ``[1, T]``.

    The examples are collated by `collator` (truncation, numbers, completion masking as unpacked), then every
    row's real tokens are concatenated: ``position_ids`` restart at 0 for each example and no ``attention_mask`` is
    passed, so transformers' attention keeps the examples apart (its packed-sequence mask); the first label of each
    example is -100 (unpacked, nothing predicts it) and number groups are renumbered so they stay distinct.
    """

    def __init__(self, collator: Any) -> None:
        self.collator = collator

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        examples = [example for feature in features for example in feature[PACK_COLUMN]]
        batch = dict(self.collator(examples))
        if "shift_labels" in batch:
            raise ValueError("packing=True cannot train answer_format='head' rows: use answer_format='sequence'.")
        keep = batch.pop("attention_mask").bool()
        labels = batch["labels"].clone()
        labels[torch.arange(len(labels)), keep.int().argmax(1)] = -100  # each example's first real token
        batch["labels"] = labels
        if GROUP_FIELD in batch:
            groups = batch[GROUP_FIELD].clone()
            offsets = torch.cat([groups.new_zeros(1), groups.amax(1).cumsum(0)[:-1]])
            batch[GROUP_FIELD] = torch.where(groups > 0, groups + offsets[:, None], groups)
        out: dict[str, torch.Tensor] = {}
        for key, value in batch.items():
            if not (isinstance(value, torch.Tensor) and value.shape[:2] == keep.shape):
                raise ValueError(f"packing=True cannot flatten the collator's {key!r}: use packing=False.")
            out[key] = value[keep].unsqueeze(0)
        out["position_ids"] = torch.cat([torch.arange(int(n)) for n in keep.sum(1)]).unsqueeze(0)
        return out


class _MeterStart(TrainerCallback):
    """Starts the component interval where the Trainer starts its loss interval (global_step, also on resume)."""

    def __init__(self, meter: LossMeter) -> None:
        self.meter = meter

    def on_train_begin(self, args, state, control, **kwargs):
        self.meter.last_step = state.global_step
        self.meter.train, self.meter.train_calls = {}, 0


class _NumberLossMixin:
    """What both trainers share: loss from the model's forward, component logging, kept columns, eval step."""

    _number_columns: tuple[str, ...] = CAUSAL_COLUMNS
    _causal = True  # labels[t + 1] is scored at position t (the model shifts the labels)

    def _init_numbers(self) -> None:
        self.model_accepts_loss_kwargs = True  # NumberAdapterModel.forward takes num_items_in_batch
        self._loss_meter = LossMeter(self._sum_over_processes)
        self.add_callback(_MeterStart(self._loss_meter))
        self._item_counts: ItemCounts | None = None

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


class NumberSFTTrainer(_NumberLossMixin, SafeCheckpointMixin, SFTTrainer):
    """`trl.SFTTrainer` for a numadapter causal LM (Llama, Granite): number columns kept, the model's own loss.

    Args:
        model: a numadapter ``PeftModel`` (`numadapter.get_peft_model`), or a base model with `peft_config`.
        args: an `SFTConfig`. Used: ``max_length`` / ``truncation_mode`` (a number the cut would split is dropped
            whole), ``completion_only_loss``, ``dataset_text_field``, ``dataset_num_proc``, ``pad_to_multiple_of``,
            and every Trainer option. ``packing=True`` (``packing_strategy="bfd"``; ``eval_packing``) packs whole
            examples into rows of ``max_length`` tokens (`pack_examples`) and collates each batch padding-free with
            ``position_ids`` (`PackedCollator`): the number tensors travel with their examples and the losses equal
            the unpacked ones. Refused: ``padding_free`` without packing, ``packing`` with ``answer_format="head"``
            or another strategy, ``assistant_only_loss``, ``loss_type`` other than ``"nll"``,
            ``label_smoothing_factor`` (the model computes the loss). Its ``dataset_kwargs`` gets
            ``skip_prepare_dataset=True`` (the data is prepared here).
        data_collator: defaults to `NumberDataCollator.from_tokenizer(processing_class, ...)`.
        train_dataset, eval_dataset: text datasets (``text``, ``prompt``/``completion``, ``messages``) or data
            already prepared with `numadapter.data.prepare_dataset`.
        processing_class: the `NumberTokenizer` (or the model's tokenizer, wrapped with the adapter's config).
        peft_config: a `NumberAdapterConfig` to wrap a base `model` with.
        formatting_func: maps an example to its text (language modeling).
        answer_format: ``"sequence"`` (default): the answer is fed and trained token by token, the EOS after it
            too, so the model learns to stop. ``"head"``: an example whose trained part is one number is cut before
            it and the number head at the prompt's last position is trained on it (the FoNE paper's format; the
            EOS after it is not trained); other examples of the batch stay sequences (`numadapter.answer_format`).
            Ignored when `data_collator` is given.
        compute_metrics: as in TRL (logits and labels), or one with ``generates = True`` such as
            `numadapter.AnswerMetrics` (exact match and MAE of the answer number): ``evaluate`` / ``predict`` then
            compute the loss, generate an answer for every ``prompt`` of the eval set (prompt/completion text) with
            ``numadapter.generate`` (greedy, ``compute_metrics.max_new_tokens``, 64 by default) and call it with a
            `NumberEvalPrediction` (``texts``, ``numbers``, ``prompts``, ``references``); ``predict`` returns a
            `NumberPredictionOutput` with the texts and numbers.
        callbacks, optimizers, optimizer_cls_and_kwargs, preprocess_logits_for_metrics: as in TRL.
    """

    _tag_names = ["trl", "sft", "numadapter"]

    def __init__(
        self,
        model: Any,
        args: SFTConfig | None = None,
        data_collator: Any = None,
        train_dataset: Any = None,
        eval_dataset: Any = None,
        processing_class: Any = None,
        callbacks: list | None = None,
        optimizers: tuple = (None, None),
        optimizer_cls_and_kwargs: tuple | None = None,
        compute_metrics: Any = None,
        preprocess_logits_for_metrics: Any = None,
        peft_config: NumberAdapterConfig | None = None,
        formatting_func: Any = None,
        answer_format: str = "sequence",
    ) -> None:
        if args is None:
            args = SFTConfig("numadapter-sft")
        elif not isinstance(args, SFTConfig):
            raise TypeError(f"NumberSFTTrainer takes an SFTConfig, got {type(args).__name__}.")
        self._check_args(args)
        model, ntok = _bind(model, processing_class, peft_config)
        if train_dataset is None:
            raise ValueError("`train_dataset` is required.")
        self._apply_tokenizer_settings(args, ntok)
        completion_only = _completion_only(args.completion_only_loss, train_dataset)
        if completion_only and formatting_func is not None:
            raise ValueError(
                "A formatting_func turns every example into one text, so there is no completion to train on alone: "
                "set completion_only_loss=False in the SFTConfig, or drop formatting_func and give prompt/completion."
            )
        multiple = args.pad_to_multiple_of if isinstance(args.pad_to_multiple_of, int) else None
        self._prepare_kwargs = dict(
            dataset_text_field=args.dataset_text_field,
            formatting_func=formatting_func,
            max_length=args.max_length,
            truncation_mode=args.truncation_mode,
            completion_only_loss=completion_only,
            num_proc=args.dataset_num_proc,
        )
        self._number_tokenizer = ntok
        self._raw_eval_dataset = eval_dataset  # the prompt/completion texts a generating compute_metrics needs
        self._pending_texts = None
        self._last_prediction = None
        self._raw_of_prepared: dict[int, Any] = {}
        self._pack = None
        train_dataset = prepare_dataset(train_dataset, ntok, **self._prepare_kwargs)
        eval_dataset = _map_datasets(eval_dataset, lambda d: prepare_dataset(d, ntok, **self._prepare_kwargs))
        if data_collator is None:
            data_collator = NumberDataCollator.from_tokenizer(
                ntok,
                completion_only_loss=completion_only,
                max_length=args.max_length,
                truncation_mode=args.truncation_mode,
                pad_to_multiple_of=multiple,
                answer_format=answer_format,
            )
        if args.packing:
            if answer_format != "sequence":
                raise ValueError(
                    f"packing=True trains every example as a sequence, answer_format={answer_format!r} cuts examples "
                    "before their answer: use one of them."
                )
            if args.packing_strategy != "bfd":
                raise ValueError(
                    f"NumberSFTTrainer packs whole examples (packing_strategy='bfd'), got {args.packing_strategy!r}, "
                    "which cuts examples and the numbers in them: set packing_strategy='bfd'."
                )
            train_dataset = pack_examples(train_dataset, args.max_length)
            data_collator = PackedCollator(data_collator)
        if args.eval_packing if args.eval_packing is not None else args.packing:
            self._pack = lambda d: pack_examples(d, args.max_length)
            eval_dataset = _map_datasets(eval_dataset, self._pack)
            if not args.packing:
                data_collator = PackedCollator(data_collator)
        args.dataset_kwargs = {**(args.dataset_kwargs or {}), "skip_prepare_dataset": True}
        base = model.get_base_model()
        own_forward = base.__dict__.get("forward")
        packing, args.packing = args.packing, False  # TRL refuses a custom collator with packing (padding-free)
        super().__init__(
            model=model,
            args=args,
            data_collator=data_collator,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=ntok.tokenizer,
            callbacks=callbacks,
            optimizers=optimizers,
            optimizer_cls_and_kwargs=optimizer_cls_and_kwargs,
            compute_metrics=compute_metrics,
            preprocess_logits_for_metrics=preprocess_logits_for_metrics,
        )
        args.packing = packing
        # TRL's fused LM head replaced the base model's forward; the number loss needs the real one.
        if own_forward is None:
            base.__dict__.pop("forward", None)
        else:
            base.forward = own_forward
        # TRL also casts every trainable parameter of a quantised model to bf16; number parts stay float32.
        restore_number_precision(self.model)
        self.processing_class = ntok  # checkpoints save number_tokenizer_config.json with the tokenizer
        self._init_numbers()

    @staticmethod
    def _check_args(args: SFTConfig) -> None:
        refused = {
            "padding_free": args.padding_free and not args.packing,
            "assistant_only_loss": args.assistant_only_loss,
        }
        for name, value in refused.items():
            if value:
                raise ValueError(
                    f"NumberSFTTrainer does not support {name}=True (the number tensors are padded per example): "
                    f"set {name}=False."
                )
        if args.loss_type not in ("nll", "chunked_nll"):
            raise ValueError(
                f"NumberSFTTrainer computes the loss from the model (CE + number losses), loss_type="
                f"{args.loss_type!r} would replace it: set loss_type='nll'."
            )
        if args.label_smoothing_factor:
            raise ValueError(
                f"label_smoothing_factor={args.label_smoothing_factor} is not applied by the number loss: set it to 0."
            )

    @staticmethod
    def _apply_tokenizer_settings(args: SFTConfig, ntok: NumberTokenizer) -> None:
        """What TRL does to the tokenizer in its __init__, done before the data is prepared here."""
        tokenizer = ntok.tokenizer
        if args.eos_token is not None:
            if args.eos_token not in tokenizer.get_vocab():
                raise ValueError(f"`eos_token` {args.eos_token!r} is not in the tokenizer's vocabulary.")
            tokenizer.eos_token = args.eos_token
        if tokenizer.pad_token is None:
            tokenizer.pad_token = args.pad_token or tokenizer.eos_token
        path = args.chat_template_path
        if path is not None:
            if not (os.path.isfile(path) and path.endswith((".jinja", ".j2"))):
                raise ValueError(
                    f"chat_template_path={path!r} is not a .jinja/.j2 file: cloning another model's template adds "
                    "tokens, which must happen before numadapter.get_peft_model. Set tokenizer.chat_template (and "
                    "add its tokens) before wrapping the model, and leave chat_template_path unset."
                )
            with open(path, encoding="utf-8") as file:
                tokenizer.chat_template = file.read()

    def _batch_metrics(self, outputs, inputs) -> None:
        mode = "train" if self.model.training else "eval"
        with torch.no_grad():
            if "shift_labels" in inputs:  # already aligned with the logits (answer_format="head")
                labels, logits = inputs["shift_labels"].to(outputs.logits.device), outputs.logits
            else:
                labels, logits = inputs["labels"][:, 1:].to(outputs.logits.device), outputs.logits[:, :-1]
            valid = labels != -100
            correct = (logits.argmax(-1) == labels) & valid
            num_valid = self.accelerator.gather_for_metrics(valid.sum()).sum()
            num_correct = self.accelerator.gather_for_metrics(correct.sum()).sum()
        self._metrics[mode]["mean_token_accuracy"].append((num_correct / num_valid).item() if num_valid > 0 else 0.0)
        if mode == "train":
            mask = inputs.get("attention_mask")
            count = mask.sum() if mask is not None else torch.tensor(inputs["input_ids"].numel())
            tokens = self.accelerator.gather_for_metrics(count).sum().item()
            self._total_train_tokens += tokens // self._tp_size
        self._metrics[mode]["num_tokens"] = [self._total_train_tokens]

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval"):
        self._gen_kwargs = {}
        return self._evaluate_prepared(
            eval_dataset,
            lambda prepared: super(NumberSFTTrainer, self).evaluate(
                prepared, ignore_keys=ignore_keys, metric_key_prefix=metric_key_prefix
            ),
        )


class NumberSeq2SeqTrainer(_NumberLossMixin, SafeCheckpointMixin, Seq2SeqTrainer):
    """`transformers.Seq2SeqTrainer` for a numadapter T5 (TRL's SFTTrainer does not support encoder-decoders).

    Args:
        model: a numadapter ``PeftModel`` around a ``T5ForConditionalGeneration``, or the base model + `peft_config`.
        args: `Seq2SeqTrainingArguments` (``label_smoothing_factor`` is refused). ``predict_with_generate=True``
            generates with ``numadapter.generate`` (the number head decodes every number) for each ``prompt`` of the
            eval / test set (prompt/completion text) after the loss: ``predict`` returns a `NumberPredictionOutput`
            (generated ids, ``texts``, ``numbers``), and `compute_metrics` gets a `NumberEvalPrediction`. The
            length comes from ``generation_max_length`` / ``max_new_tokens=`` of ``evaluate`` and ``predict``;
            ``generation_num_beams`` > 1 is refused (no beam search).
        data_collator: defaults to `NumberDataCollator.from_tokenizer(processing_class, seq2seq=True, ...)`.
        train_dataset, eval_dataset: ``prompt`` (source) + ``completion`` (target) strings, ``messages`` (the last
            message is the target), or data prepared with ``prepare_dataset(..., seq2seq=True)``.
        processing_class: the `NumberTokenizer` (or the model's tokenizer).
        peft_config: a `NumberAdapterConfig` to wrap a base `model` with.
        max_length: truncate sources to this many tokens (`truncation_mode`; numbers are dropped whole).
        max_target_length: truncate targets (keep_start).
        truncation_mode: ``"keep_start"`` or ``"keep_end"`` for sources.
        answer_format: ``"sequence"`` (default) or ``"head"``: a target that is one number is trained at the head
            without the EOS after it (see `NumberSFTTrainer`). Ignored when `data_collator` is given.
        compute_metrics: as in transformers, or one with ``generates = True`` (`numadapter.AnswerMetrics`), which
            generates as ``predict_with_generate=True`` does (see `NumberSFTTrainer`).
        callbacks, optimizers, preprocess_logits_for_metrics: as in transformers.
    """

    _number_columns = SEQ2SEQ_COLUMNS
    _causal = False

    def __init__(
        self,
        model: Any,
        args: Seq2SeqTrainingArguments | None = None,
        data_collator: Any = None,
        train_dataset: Any = None,
        eval_dataset: Any = None,
        processing_class: Any = None,
        callbacks: list | None = None,
        optimizers: tuple = (None, None),
        compute_metrics: Any = None,
        preprocess_logits_for_metrics: Any = None,
        peft_config: NumberAdapterConfig | None = None,
        max_length: int | None = None,
        max_target_length: int | None = None,
        truncation_mode: str = "keep_start",
        answer_format: str = "sequence",
    ) -> None:
        if args is None:
            args = Seq2SeqTrainingArguments("numadapter-seq2seq")
        if args.label_smoothing_factor:
            raise ValueError(
                f"label_smoothing_factor={args.label_smoothing_factor} is not applied by the number loss: set it to 0."
            )
        model, ntok = _bind(model, processing_class, peft_config)
        if not model.get_base_model().config.is_encoder_decoder:
            raise TypeError(
                f"NumberSeq2SeqTrainer trains encoder-decoder models (T5), got "
                f"{type(model.get_base_model()).__name__}: use NumberSFTTrainer for causal LMs."
            )
        if train_dataset is None:
            raise ValueError("`train_dataset` is required.")
        detect_format(first_example(train_dataset, "train_dataset"))  # unusable columns fail before anything runs
        self._prepare_kwargs = dict(
            seq2seq=True,
            max_length=max_length,
            truncation_mode=truncation_mode,
            max_target_length=max_target_length,
        )
        self._number_tokenizer = ntok
        self._raw_eval_dataset = eval_dataset  # the prompt/completion texts a generating compute_metrics needs
        self._pending_texts = None
        self._last_prediction = None
        self._raw_of_prepared: dict[int, Any] = {}
        self._pack = None
        train_dataset = prepare_dataset(train_dataset, ntok, **self._prepare_kwargs)
        eval_dataset = _map_datasets(eval_dataset, lambda d: prepare_dataset(d, ntok, **self._prepare_kwargs))
        if data_collator is None:
            data_collator = NumberDataCollator.from_tokenizer(
                ntok,
                seq2seq=True,
                max_length=max_length,
                max_target_length=max_target_length,
                truncation_mode=truncation_mode,
                answer_format=answer_format,
            )
        super().__init__(
            model=model,
            args=args,
            data_collator=data_collator,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=ntok.tokenizer,
            callbacks=callbacks,
            optimizers=optimizers,
            compute_metrics=compute_metrics,
            preprocess_logits_for_metrics=preprocess_logits_for_metrics,
        )
        self.processing_class = ntok
        self._init_numbers()

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval", **gen_kwargs):
        return self._evaluate_prepared(
            eval_dataset,
            lambda prepared: super(NumberSeq2SeqTrainer, self).evaluate(
                eval_dataset=prepared, ignore_keys=ignore_keys, metric_key_prefix=metric_key_prefix, **gen_kwargs
            ),
        )
