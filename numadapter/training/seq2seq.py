"""`NumberSeq2SeqTrainer`: `transformers.Seq2SeqTrainer` for a numadapter T5 (see `numadapter.training.sft` for
what both trainers do)."""

from __future__ import annotations

from typing import Any

from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments

from numadapter.config import NumberAdapterConfig
from numadapter.data.checks import first_example
from numadapter.data.collator import SEQ2SEQ_COLUMNS, NumberDataCollator
from numadapter.data.prepare import detect_format, prepare_dataset
from numadapter.training.base import _NumberLossMixin
from numadapter.training.binding import _bind
from numadapter.training.head_choice import check_head_coverage
from numadapter.training.safe_checkpoint import SafeCheckpointMixin
from numadapter.training.xval_fit import fit_xval


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
        fit_xval(model, ntok, train_dataset, lambda data, tok: prepare_dataset(data, tok, **self._prepare_kwargs))
        train_dataset, eval_dataset = self._prepare_datasets(ntok, train_dataset, eval_dataset)
        check_head_coverage(train_dataset, ntok.config)  # as NumberSFTTrainer: answers the head cannot form
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
