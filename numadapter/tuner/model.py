"""`NumberAdapterModel`: PEFT's LoRA tuner plus the number machinery (docs/DESIGN.md, "Tuner").

On top of `peft.LoraModel` it

1. binds the adapter to the base model (`_bind`): checks the architecture and task type, re-applies the
   embedding resize recorded in the config (``original_vocab_size`` -> ``resized_vocab_size``; a base of another
   shape is refused with both shapes named), and detects ties by storage; shapes and ties come from DeepSpeed's
   ``ds_shape`` / ``ds_id`` when the base was loaded ZeRO-3 partitioned (`numadapter.integrations.deepspeed_zero`);
2. makes the [NUM] / [AGG] embedding rows PEFT trainable tokens (`token_rows`), tied where the weights are tied;
3. keeps one `NumberModules` (input module + head) per adapter in ``number_modules``, saved with the adapter;
4. in `forward`, pops the number tensors, validates them against the ids (`inputs`), arms the side buffer and the
   hooks (`forward_hooks`), runs the model without labels, then runs the head and the loss (`loss`).

The class is registered with PEFT under ``PeftType.NUMADAPTER`` (`registration`), so ``peft.get_peft_model``,
``PeftModel.from_pretrained`` and ``AutoPeftModelFor*`` build it; the PeftModel they return is a genuine
`peft.PeftModelForCausalLM` / `peft.PeftModelForSeq2SeqLM` whose forward reaches `NumberAdapterModel.forward`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import nullcontext

import torch
from peft import LoraModel
from peft.utils.other import TrainableTokensWrapper
from torch import nn

from numadapter.config import NumberAdapterConfig
from numadapter.integrations.deepspeed_zero import matrix_shape
from numadapter.methods.context import ContextNumbers, context_at
from numadapter.methods.fone.answer_mode import answers_mode, head_left_out
from numadapter.methods.registry import get_method
from numadapter.tuner.cache_numbers import CacheNumbers, call_rows
from numadapter.tuner.forward_hooks import number_hooks, whole_hidden
from numadapter.tuner.inputs import encoder_ids_for_outputs, plan_causal, plan_seq2seq, pop_number_kwargs
from numadapter.tuner.integrity import check_vocab_growth
from numadapter.tuner.loss import NumberCausalLMOutput, NumberSeq2SeqLMOutput, combine, head_outputs
from numadapter.tuner.number_modules import NumberModules, end_token_ids, number_token_ids
from numadapter.tuner.patches import (
    base_weight,
    check_partitioned_head,
    check_resized_head,
    detect_architecture,
    resize_embeddings,
    tied_group,
)
from numadapter.tuner.runtime import NumberRuntime
from numadapter.tuner.side_buffer import NumberInputs, SideBuffer
from numadapter.tuner.token_rows import initial_rows, wrap_number_rows, zero_rows

NUMBER_MODULES = "number_modules"


def _ddp() -> bool:
    """Whether this is a plain multi-process run (DDP), where every trainable parameter must get a gradient."""
    from peft.utils.integrations import check_deepspeed_zero3_enabled

    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    return distributed and not check_deepspeed_zero3_enabled()


def _shape_error(config: NumberAdapterConfig, rows: int, hidden: int) -> ValueError:
    trained = f"[{config.original_vocab_size}, {config.base_hidden_size}]"
    resized = f"[{config.resized_vocab_size}, {config.base_hidden_size}]"
    return ValueError(
        f"This numadapter adapter was trained on a base model whose input embedding is {trained} (resized to "
        f"{resized} by numadapter), but the model it is applied to has an input embedding of [{rows}, {hidden}]: "
        f"load it onto the base model it was trained from (base_model_name_or_path="
        f"{config.base_model_name_or_path!r})."
    )


class NumberAdapterModel(LoraModel):
    """LoRA tuner with number embeddings, number heads and the number loss (see the module docstring)."""

    prefix: str = "lora_"

    # -- per-adapter setup ------------------------------------------------------------------------------------------
    def _ensure_state(self) -> None:
        if NUMBER_MODULES not in self._modules:
            self.number_modules = nn.ModuleDict()
            self._buffer = SideBuffer()
            self._cache_numbers = CacheNumbers()
            self._binding: dict | None = None
            self._numbers_enabled = True

    def inject_adapter(
        self,
        model: nn.Module,
        adapter_name: str,
        autocast_adapter_dtype: bool = True,
        low_cpu_mem_usage: bool = False,
        state_dict: dict[str, torch.Tensor] | None = None,
    ) -> None:
        self._ensure_state()
        config = self.peft_config[adapter_name]
        if not isinstance(config, NumberAdapterConfig):
            raise TypeError(f"NumberAdapterModel needs a NumberAdapterConfig, got {type(config).__name__}.")
        self._bind(model, config)
        user_tokens = config.trainable_token_indices
        if isinstance(user_tokens, dict):
            raise ValueError(
                f"NumberAdapterConfig takes `trainable_token_indices` as a list of input-embedding token ids, got a "
                f"dict {user_tokens!r}: numadapter places the trainable rows itself (tied where the weights are)."
            )
        config.trainable_token_indices = None  # numadapter wraps the rows itself (see token_rows)
        try:
            super().inject_adapter(
                model,
                adapter_name,
                autocast_adapter_dtype=autocast_adapter_dtype,
                low_cpu_mem_usage=low_cpu_mem_usage,
                state_dict=state_dict,
            )
        finally:
            config.trainable_token_indices = user_tokens
        extra = list(user_tokens or []) + [i for i in end_token_ids(config) if i not in (user_tokens or [])]
        number_row = self._add_rows(model, adapter_name, config, extra)
        self._add_modules(model, adapter_name, config, number_row)

    def _bind(self, model: nn.Module, config: NumberAdapterConfig) -> None:
        arch = detect_architecture(model)
        bound = self._bound_config(config)
        if config.task_type != arch.task_type:
            where = "set it" if bound is not None else "set it, or use numadapter.get_peft_model, which sets it"
            raise ValueError(
                f"{arch.model_class} needs NumberAdapterConfig(task_type={arch.task_type!r}), got "
                f"task_type={config.task_type!r}: {where}."
            )
        if arch.is_encoder_decoder and answers_mode(config):
            raise ValueError(
                f"{arch.model_class} is an encoder-decoder, and fone_numbers={config.fone_numbers!r} (numbers kept in "
                "digits, [NUM] only for the answers the head forms) is for causal LMs for now: set "
                "fone_numbers='all' (every number a [NUM]) for T5."
            )
        if arch.is_encoder_decoder and getattr(config, "fone_context_pointer", None):
            raise ValueError(
                f"{arch.model_class} is an encoder-decoder, and fone_context_pointer=True (each number chosen by the "
                "hidden state at its own position) is for causal LMs for now: leave fone_context_pointer at None "
                "(the last fone_context_numbers numbers, up to 6) for T5."
            )
        fix = "use numadapter.get_peft_model(model, config, tokenizer=tokenizer), which adds the tokens and sets it"
        if bound is not None:  # add_adapter / load_adapter on a model that already has a number adapter
            fix = _second_adapter_fix(bound)
        method = get_method(config)
        method.check_bound(config, fix)
        if config.digit_token_ids is None and (
            config.aggregate or config.aggregate_loss_lambda < 1.0 or method.lm_ntl(config)
        ):
            raise ValueError(
                f"aggregate / NTL on the LM head / aggregate_loss_lambda < 1 need `digit_token_ids`: {fix}."
            )
        rows, hidden = matrix_shape(base_weight(model.get_input_embeddings()), "the input embedding weight")
        check_partitioned_head(model)
        if config.base_hidden_size is not None and config.base_hidden_size != hidden:
            raise _shape_error(config, rows, hidden)
        binding = self._binding
        ids = number_token_ids(config) + end_token_ids(config) + list(config.digit_token_ids or [])
        if binding is None:
            if any(isinstance(m, TrainableTokensWrapper) for m in model.modules()):
                raise ValueError("the base model already has PEFT trainable tokens; pass an unwrapped base model.")
            original = rows if config.original_vocab_size is None else config.original_vocab_size
            resized = config.resized_vocab_size
            if resized is None:
                resized = max([original] + [i + 1 for i in ids])
                check_vocab_growth(original, resized, ids, config)
            if rows == original:
                resize_embeddings(model, resized)
            elif rows == resized:  # resized before numadapter (AutoPeftModelFor*): the ties must have survived
                check_resized_head(model, original, rows)
            else:
                config.original_vocab_size, config.resized_vocab_size = original, resized
                config.base_hidden_size = config.base_hidden_size or hidden
                raise _shape_error(config, rows, hidden)
            config.original_vocab_size, config.resized_vocab_size, config.base_hidden_size = original, resized, hidden
            tied, untied_output = tied_group(model)
            self._binding = {"arch": arch, "tied": tied, "untied_output": untied_output, "rows": resized}
        else:
            if config.resized_vocab_size not in (None, binding["rows"]):
                raise _shape_error(config, binding["rows"], hidden)
            config.resized_vocab_size = binding["rows"]
            config.original_vocab_size = config.original_vocab_size or binding["rows"]
            config.base_hidden_size = hidden
        bad = [i for i in ids if not 0 <= i < config.resized_vocab_size]
        if bad:
            raise ValueError(
                f"token ids {bad} are outside the resized vocabulary of {config.resized_vocab_size} rows: set "
                "`resized_vocab_size` >= the tokenizer length (numadapter.get_peft_model does)."
            )

    def _bound_config(self, config: NumberAdapterConfig) -> NumberAdapterConfig | None:
        """Another number adapter's config already bound to this model (for `add_adapter`), or None."""
        if self.__dict__.get("_binding") is None:
            return None
        others = [c for c in self.peft_config.values() if c is not config and isinstance(c, NumberAdapterConfig)]
        return others[0] if others else None

    def _add_rows(
        self, model: nn.Module, adapter_name: str, config: NumberAdapterConfig, user_ids: list[int]
    ) -> torch.Tensor | None:
        """Trainable [NUM] / [AGG] rows; returns the initial input [NUM] row (or None)."""
        number_ids = number_token_ids(config)
        ids = number_ids + [i for i in user_ids if i not in number_ids]
        if not ids:
            return None
        tied, untied_output = self._binding["tied"], self._binding["untied_output"]
        weights = [base_weight(model.get_submodule(tied[0]))]
        if untied_output is not None:
            weights.append(base_weight(model.get_submodule(untied_output)))
        inits = [
            initial_rows(w, number_ids, config.num_token_id, config.digit_token_ids, config.original_vocab_size)
            for w in weights
        ]
        for weight in weights:
            zero_rows(weight, number_ids)
        sources = wrap_number_rows(
            model,
            adapter_name,
            ids,
            tied,
            untied_output,
            inference_mode=config.inference_mode,
            activate=adapter_name in self.active_adapters,
        )
        with torch.no_grad():
            for source, init in zip(sources, inits):
                delta = source.token_adapter.trainable_tokens_delta[adapter_name]
                if delta.device.type != "meta" and init.device.type != "meta":
                    delta[: len(number_ids)] = init.to(delta.dtype)
        if config.num_token_id in number_ids:
            return inits[0][number_ids.index(config.num_token_id)]
        return None

    def _add_modules(
        self, model: nn.Module, adapter_name: str, config: NumberAdapterConfig, number_row: torch.Tensor | None
    ) -> None:
        weight = base_weight(model.get_input_embeddings())
        modules = NumberModules(config, config.base_hidden_size, model.config)
        if any(p.is_meta for p in modules.parameters()):  # created under init_empty_weights: loading assigns them
            number_row = None
        else:
            modules.to(weight.device, torch.float32)
        if number_row is not None:
            modules.init_from_row(number_row)
        trainable = adapter_name in self.active_adapters and not config.inference_mode
        modules.requires_grad_(trainable)
        self.number_modules[adapter_name] = modules

    def rebuild_number_head(self, adapter_name: str) -> None:
        """Builds adapter `adapter_name`'s number head anew from its config (fresh weights, on the old head's device,
        float32, as trainable as it was): `NumberSFTTrainer` calls it before training when it turns on
        ``fone_context_pointer``, whose head has other parameters than the one the config first described."""
        config, modules = self.peft_config[adapter_name], self.number_modules[adapter_name]
        old = modules.head
        _, head = modules.method.build_modules(config, config.base_hidden_size, self.model.config)
        reference = next(old.parameters()) if old is not None else None
        if reference is not None:
            head.to(reference.device, torch.float32)
            head.requires_grad_(reference.requires_grad)
        modules.head = head

    # -- adapter management: keep the number modules in step with the LoRA layers -----------------------------------
    def set_adapter(self, adapter_name: str | list[str], inference_mode: bool = False) -> None:
        super().set_adapter(adapter_name, inference_mode=inference_mode)
        active = [adapter_name] if isinstance(adapter_name, str) else list(adapter_name)
        for name, modules in self.number_modules.items():
            modules.requires_grad_(name in active and not inference_mode)

    def set_requires_grad(self, adapter_names: str | Sequence[str], requires_grad: bool = True) -> None:
        super().set_requires_grad(adapter_names, requires_grad=requires_grad)
        for name in [adapter_names] if isinstance(adapter_names, str) else adapter_names:
            if name in self.number_modules:
                self.number_modules[name].requires_grad_(requires_grad)

    def delete_adapter(self, adapter_name: str) -> None:
        super().delete_adapter(adapter_name)
        if adapter_name in self.number_modules:
            del self.number_modules[adapter_name]

    def merge_and_unload(
        self,
        progressbar: bool = False,
        safe_merge: bool = False,
        adapter_names: list[str] | None = None,
        *,
        drop_numbers: bool = False,
    ) -> nn.Module:
        """PEFT's merge, refused while it would drop number modules (the plain model cannot hold them).

        The merged transformers model has no FoNE / xVal / [AGG] input module and no number head: from the first
        [NUM] on its logits differ from the adapter's, and nothing decodes a generated [NUM]. So this raises unless
        the merged adapters have no number modules (``encoding="digits"`` without ``aggregate``) or
        ``drop_numbers=True`` asks for the plain model (e.g. for text without numbers). `numadapter.export_merged`
        + `numadapter.load_exported` give a merged model that keeps its numbers.

        Raises:
            ValueError: a merged adapter has number modules and `drop_numbers` is False.
        """
        names = list(self.active_adapters) if adapter_names is None else list(adapter_names)
        numbered = [name for name in names if _has_numbers(self.number_modules, name)]
        if numbered and not drop_numbers:
            raise ValueError(
                f"merge_and_unload() would return a plain {type(self.model).__name__} without adapter "
                f"{numbered[0]!r}'s number modules (the [NUM] features and the number head): its logits would differ "
                "from the adapter's from the first number on. To merge and keep the numbers use "
                "numadapter.export_merged(model, number_tokenizer, out_dir), then numadapter.load_exported(out_dir). "
                "For the plain model without numbers pass merge_and_unload(drop_numbers=True)."
            )
        return super().merge_and_unload(progressbar=progressbar, safe_merge=safe_merge, adapter_names=adapter_names)

    def _enable_adapter_layers(self, enabled: bool = True) -> None:
        super()._enable_adapter_layers(enabled)
        self._numbers_enabled = enabled

    @classmethod
    def _remove_adapter_name_from_key(cls, key: str, adapter_name: str) -> str:
        marker = f"{NUMBER_MODULES}.{adapter_name}."
        if marker in key:
            return key.replace(marker, f"{NUMBER_MODULES}.", 1)
        return super()._remove_adapter_name_from_key(key, adapter_name)

    def _number_adapter(self) -> str | None:
        if not self.__dict__.get("_numbers_enabled", True) or NUMBER_MODULES not in self._modules:
            return None
        active = [name for name in self.active_adapters if name in self.number_modules]
        if len(active) > 1:
            raise ValueError(
                f"numadapter runs one number adapter at a time, active: {active}; call set_adapter(name)."
            )
        return active[0] if active else None

    def number_runtime(self) -> NumberRuntime:
        """The active number adapter's parts for step-by-step execution (a decode loop): see `runtime`.

        Raises:
            ValueError: when no adapter has been bound yet or several number adapters are active.
        """
        if self.__dict__.get("_binding") is None or NUMBER_MODULES not in self._modules:
            raise ValueError("this model has no numadapter adapter yet: build it with numadapter.get_peft_model.")
        adapter = self._number_adapter()
        name = adapter if adapter is not None else self.active_adapters[0]
        return NumberRuntime(
            adapter_name=adapter,
            config=self.peft_config[name],
            modules=self.number_modules[adapter] if adapter is not None else None,
            inner=self.model,
            arch=self._binding["arch"],
            buffer=self._buffer,
        )

    def generate(self, *args, **kwargs):
        """``model.generate`` of a numadapter model (``PeftModel.generate`` calls this): numadapter's decode loop,
        fed the number tensors of the `NumberTokenizer` batch and decoding every generated [NUM] with the number head
        (`numadapter.generation.hf`: the options it honours, its output, the errors)."""
        from numadapter.generation.hf import generate_for_tuner

        return generate_for_tuner(self, *args, **kwargs)

    # -- forward ----------------------------------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        """Runs the model with number tensors; returns a `NumberCausalLMOutput` / `NumberSeq2SeqLMOutput`.

        Keyword arguments: the model's own (``input_ids``, ``attention_mask``, ``labels``, ``past_key_values``, ...),
        ``num_items_in_batch`` (CE normaliser, see `numadapter.tuner.loss`), and the number tensors of
        `numadapter.tuner.inputs` (``num_mask``, ``num_digits``, ``num_sign``, ``num_values``; T5 also
        ``labels_num_*`` / ``decoder_num_*``).

        Causal LMs also take ``shift_labels`` (transformers' name) instead of ``labels``: labels already aligned with
        the logits (``shift_labels[t]`` is what position t predicts), with ``labels_num_*`` aligned with them. Then a
        sequence may end at the position that predicts a number, e.g. a prompt whose last position is trained on
        the answer's [NUM] without the answer being fed (`numadapter.tuner.alignment`).
        """
        if args:
            if len(args) > 1 or "input_ids" in kwargs:
                raise TypeError("NumberAdapterModel.forward takes the model inputs as keyword arguments.")
            kwargs["input_ids"] = args[0]
        if kwargs.pop("fused_lm_head", False) or (kwargs.get("labels") is not None and _trl_patched(self.model)):
            raise TypeError(_PLAIN_SFT_TRAINER)
        given = pop_number_kwargs(kwargs)
        adapter = self._number_adapter()
        if adapter is None:  # adapters disabled: the base model (number tensors are not used)
            return self.model(**kwargs)
        config = self.peft_config[adapter]
        modules = self.number_modules[adapter]
        arch = self._binding["arch"]
        labels, shifted = _pop_labels(kwargs, arch.is_encoder_decoder)
        num_items_in_batch = kwargs.pop("num_items_in_batch", None)
        return_dict = kwargs.pop("return_dict", None)
        if labels is not None and kwargs.get("logits_to_keep") not in (None, 0):
            raise ValueError(
                f"training needs logits at every position, got logits_to_keep={kwargs['logits_to_keep']}."
            )
        marker = modules.marker_token_id
        with_head = modules.head is not None
        count = modules.method.context_size(config) if with_head else 0
        earlier = None  # the numbers behind past_key_values (cache_numbers), which a context head reads
        if count:
            earlier = self._cache_numbers.before(kwargs.get("past_key_values"), call_rows(kwargs, labels), count)
        if arch.is_encoder_decoder:
            encoder_ids = kwargs.get("input_ids")
            if kwargs.get("encoder_outputs") is not None:  # the context head needs the encoder's numbers
                needed = bool(count) and earlier is None
                encoder_ids = encoder_ids_for_outputs(kwargs["encoder_outputs"], encoder_ids, given, marker, needed)
            plan = plan_seq2seq(
                config,
                marker,
                encoder_ids,
                kwargs.get("decoder_input_ids"),
                labels,
                given,
                with_head,
                self.model._shift_right,
            )
            if plan.decoder_input_ids is not None:
                kwargs["decoder_input_ids"] = plan.decoder_input_ids
            current = None
        else:
            plan = plan_causal(config, marker, kwargs.get("input_ids"), labels, given, with_head, shifted)
            current = "input"
        want_rows = bool(
            (modules.needs_digit_embeddings and plan.sides)
            or (labels is not None and modules.method.loss_needs_digit_embeddings(config))
        )
        pointer = with_head and getattr(modules.head, "pointer", None) is not None
        with (
            self._buffer.arm(plan.sides, current) as buffer,
            number_hooks(self.model, arch, buffer, modules, with_head, config.digit_token_ids, want_rows),
            whole_hidden(self.model, pointer) as whole,
        ):
            out = self.model(**kwargs, return_dict=True)
            hidden, digit_rows = buffer.hidden, buffer.digit_embeddings
        if head_left_out(config) and marker is not None and out.logits is not None:
            # fone_head_in_use=False: no [NUM] in training (the tokenizer writes none) nor generation (every path
            # reads these logits); in place: the LM head's backward does not need its output
            out.logits.index_fill_(-1, torch.tensor([marker], device=out.logits.device), float("-inf"))
        training = labels is not None and modules.head is not None
        keys = modules.head.number_keys(whole[-1]) if pointer and whole else None  # (B, T, D)
        context = _context(count, config, plan, hidden, earlier, kwargs.get("position_ids"), keys)
        if context is not None and getattr(out, "past_key_values", None) is not None:
            self._cache_numbers.record(out.past_key_values, context.select((slice(None), -1)))
        with torch.no_grad() if training else nullcontext():  # reported outputs; the loss reads target rows only
            outputs = head_outputs(config, modules.head, hidden, context)
        fields = modules.method.report(modules.head, outputs) if outputs is not None else {}
        if labels is not None:
            target_outputs = None
            if training:
                index = plan.target_index or (hidden.new_zeros(0, dtype=torch.long),) * 2
                at_targets = None if context is None else context.select(index)
                at_hidden = hidden[index] if config.head_loss_trains_lm else hidden[index].detach()  # (N, H)
                target_outputs = head_outputs(config, modules.head, at_hidden, at_targets)  # (N, ...)
            fields.update(
                combine(config, modules.head, out.logits, target_outputs, plan, num_items_in_batch, digit_rows)
            )
            if torch.is_grad_enabled() and not plan.sides and modules.embedding is not None and _ddp():
                # no numbers in this batch: keep the input module in the graph with a zero gradient, so DDP does not
                # report unused parameters (not under ZeRO-3, where parameters are partitioned outside forward)
                fields["loss"] = fields["loss"] + sum(p.sum() * 0.0 for p in modules.embedding.parameters())
        cls = NumberSeq2SeqLMOutput if arch.is_encoder_decoder else NumberCausalLMOutput
        result = cls(**dict(out.items()), **fields)
        return result.to_tuple() if return_dict is False else result


def _context(
    count: int,
    config: NumberAdapterConfig,
    plan,
    hidden: torch.Tensor | None,
    earlier: NumberInputs | None = None,
    position_ids: torch.Tensor | None = None,
    keys: torch.Tensor | None = None,
) -> ContextNumbers | None:
    """The numbers before each position the head reads (`numadapter.methods.context`), or None when the head reads
    the hidden state only (`count` = K = 0).

    The sides in order: `earlier` (the numbers behind ``past_key_values``, `cache_numbers`; they include T5's encoder
    numbers) or else T5's encoder side, then the side of the hidden states (a causal LM's input, T5's decoder). Each
    example of a packed row counts on its own (`position_ids`) in a call without earlier sides. `keys`: the pointer
    head's key at every position of the current side ``[B, T, D]`` (`FoNEDigitHead.number_keys`), or None."""
    if hidden is None or count == 0:
        return None
    sides = plan.sides
    before, current = (sides.get("encoder"), sides.get("decoder")) if "input" not in sides else (None, sides["input"])
    if earlier is not None:
        before = earlier
    positions = position_ids if before is None else None
    return context_at(before, current, *hidden.shape[:2], config.num_places, count, hidden.device, positions, keys)


def _has_numbers(number_modules: nn.ModuleDict, name: str) -> bool:
    """Whether adapter `name` has an input number module or a number head (lost by a plain merge)."""
    modules = number_modules[name] if name in number_modules else None
    return modules is not None and (modules.embedding is not None or modules.head is not None)


_PLAIN_SFT_TRAINER = (
    "this numadapter model is being trained by a plain trl.SFTTrainer: it patched the model's forward with its fused "
    "LM head, feeds no number tensors and never computes the number loss. Train it with numadapter.NumberSFTTrainer("
    "model=model, args=SFTConfig(...), train_dataset=..., processing_class=NumberTokenizer(tokenizer, config)), which "
    "takes the same arguments (numadapter.NumberSeq2SeqTrainer for T5)."
)


def _trl_patched(model: nn.Module) -> bool:
    """Whether TRL's ``add_fused_lm_head`` replaced `model`'s forward (a plain ``trl.SFTTrainer`` was built on it)."""
    forward = model.__dict__.get("forward")
    code = getattr(getattr(forward, "__func__", forward), "__code__", None)
    return code is not None and code.co_name == "_fused_forward" and f"{os.sep}trl{os.sep}" in code.co_filename


def _second_adapter_fix(bound: NumberAdapterConfig) -> str:
    """How to configure a second number adapter on a model: name the token ids the first one already uses."""
    ids = {
        "num_token_id": bound.num_token_id,
        "agg_token_id": bound.agg_token_id,
        "digit_token_ids": bound.digit_token_ids,
    }
    given = ", ".join(f"{name}={value!r}" for name, value in ids.items() if value is not None)
    return (
        f"this model already has a number adapter, so numadapter.get_peft_model was already applied and the tokens "
        f"exist: give the new config the ids of the adapter already on the model, NumberAdapterConfig(..., "
        f"{given}) (copy them from model.peft_config[<first adapter>])"
    )


def _pop_labels(kwargs: dict, encoder_decoder: bool) -> tuple[torch.Tensor | None, bool]:
    """Removes ``labels`` / ``shift_labels`` from `kwargs`; returns ``(labels, shifted)`` (shifted: aligned with the
    logits, causal LMs only)."""
    labels = kwargs.pop("labels", None)
    shift_labels = kwargs.pop("shift_labels", None)
    if shift_labels is None:
        return labels, False
    if encoder_decoder:
        raise ValueError(
            "`shift_labels` is for causal LMs; T5 labels are already aligned with the decoder outputs: pass `labels`."
        )
    if labels is not None:
        raise ValueError(
            "got both `labels` and `shift_labels`; pass one: `labels` aligned with input_ids (the model shifts them), "
            "or `shift_labels` aligned with the logits."
        )
    return shift_labels, True
