"""`NumberSFTTrainer` (causal LMs, on `trl.SFTTrainer`) and `NumberSeq2SeqTrainer` (T5, on `Seq2SeqTrainer`).

docs/DESIGN.md, "Own the loss path". Both trainers

- tokenize text datasets with the `NumberTokenizer` (`numadapter.data.prepare_dataset`: plain text, prompt-completion,
  messages) and collate them with `numadapter.data.collator.NumberDataCollator`, so the number tensors stay aligned
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
  over the logging interval the way the Trainer averages ``loss`` (`numadapter.training.callbacks.LossMeter`), and so
  to TensorBoard / W&B when enabled;
- save checkpoints through `PeftModel.save_pretrained` (``Trainer._save`` does so for a ``PeftModel``: the LoRA
  weights, the [NUM] rows and the number modules in ``adapter_model.safetensors``) plus the `NumberTokenizer`
  (tokenizer files + ``number_tokenizer_config.json``); resuming loads them back with ``PeftModel.load_adapter``. The
  rest of a checkpoint is safetensors + JSON too (docs/DESIGN.md, "Safe to load";
  `numadapter.training.safe_checkpoint`): training arguments, optimizer, scheduler, scaler and RNG state, read back
  on resume without unpickling (DeepSpeed's and FSDP's own checkpoint files are the exception).
"""

from __future__ import annotations

import os
from typing import Any

import torch
from trl import SFTConfig, SFTTrainer

from numadapter.config import NumberAdapterConfig
from numadapter.data.checks import first_example
from numadapter.data.collator import NumberDataCollator
from numadapter.data.prepare import prepare_dataset
from numadapter.integrations.qlora import keep_canonical_layout, restore_number_precision
from numadapter.tokenization.tokenizer import NumberTokenizer
from numadapter.training.base import _NumberLossMixin
from numadapter.training.binding import _bind, _completion_only, _map_datasets
from numadapter.training.head_choice import check_head_coverage, choose_head
from numadapter.training.packing import PackedCollator, pack_examples
from numadapter.training.safe_checkpoint import SafeCheckpointMixin
from numadapter.training.xval_fit import fit_xval


class NumberSFTTrainer(_NumberLossMixin, SafeCheckpointMixin, SFTTrainer):
    """`trl.SFTTrainer` for a numadapter causal LM (Llama, Granite): number columns kept, the model's own loss.

    Args:
        model: a numadapter ``PeftModel`` (`numadapter.get_peft_model`), or a base model with `peft_config`.
        args: an `SFTConfig`. Used: ``max_length`` / ``truncation_mode`` (a number the cut would split is dropped
            whole), ``completion_only_loss``, ``assistant_only_loss`` (``messages`` data: the loss on the
            assistant turns alone, found by rendering the conversation up to and through each one, so any chat
            template serves), ``dataset_text_field``, ``dataset_num_proc``, ``pad_to_multiple_of``,
            and every Trainer option. ``packing=True`` (``packing_strategy="bfd"``; ``eval_packing``) packs whole
            examples into rows of ``max_length`` tokens (`pack_examples`) and collates each batch padding-free with
            ``position_ids`` (`PackedCollator`): the number tensors travel with their examples and the losses equal
            the unpacked ones. Refused: ``padding_free`` without packing, ``packing`` with ``answer_format="head"``
            or another strategy, ``loss_type`` other than ``"nll"``,
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
            EOS after it is not trained); other examples of the batch stay sequences (`numadapter.data.answer_format`).
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
        assistant_only = _assistant_only(args, train_dataset)
        completion_only = assistant_only or _completion_only(args.completion_only_loss, train_dataset)
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
            assistant_only_loss=assistant_only,
            num_proc=args.dataset_num_proc,
        )
        choose_head(  # fone_head_in_use from the training data (answers mode), before anything is tokenized
            model.peft_config[model.active_adapter], ntok, train_dataset,
            lambda data, tok: prepare_dataset(data, tok, **{**self._prepare_kwargs, "assistant_only_loss": True}),
            rebuild=lambda: model.base_model.rebuild_number_head(model.active_adapter),
            text_field=args.dataset_text_field,
        )  # fmt: skip
        fit_xval(model, ntok, train_dataset, lambda data, tok: prepare_dataset(data, tok, **self._prepare_kwargs))
        train_dataset, eval_dataset = self._prepare_datasets(ntok, train_dataset, eval_dataset)
        check_head_coverage(train_dataset, ntok.config)
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
        args.assistant_only_loss = False  # TRL would look for chat messages in the prepared rows
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
        args.packing, args.assistant_only_loss = packing, assistant_only
        # TRL's fused LM head replaced the base model's forward; the number loss needs the real one.
        if own_forward is None:
            base.__dict__.pop("forward", None)
        else:
            base.forward = own_forward
        # TRL also casts every trainable parameter of a quantised model to bf16; number parts stay float32.
        restore_number_precision(self.model)
        # bitsandbytes' CPU repack (on an evaluation's forward) would drop the gradients through the 4-bit layers.
        keep_canonical_layout(self.model)
        self.processing_class = ntok  # checkpoints save number_tokenizer_config.json with the tokenizer
        self._init_numbers()

    @staticmethod
    def _check_args(args: SFTConfig) -> None:
        if args.padding_free and not args.packing:
            raise ValueError(
                "NumberSFTTrainer does not support padding_free=True without packing (the number tensors are padded "
                "per example): set padding_free=False, or packing=True."
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


def _assistant_only(args: SFTConfig, dataset: Any) -> bool:
    """``args.assistant_only_loss``, checked against the data: it masks the turns of ``messages`` conversations."""
    if not args.assistant_only_loss:
        return False
    columns = set(first_example(dataset, "train_dataset"))
    if ("completion_mask" if "input_ids" in columns else "messages") not in columns:
        raise ValueError(
            f"assistant_only_loss=True trains the assistant turns of `messages` conversations, but the training data "
            f"has the columns {sorted(columns)}: give a `messages` column (or data prepared from one with "
            "prepare_dataset(..., assistant_only_loss=True); prompt/completion data trains its completion alone "
            "with completion_only_loss), or set assistant_only_loss=False."
        )
    return True
