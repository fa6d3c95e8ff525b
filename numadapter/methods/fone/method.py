"""`FoNEMethod`: ``encoding="fone"`` (FoNE paper): one [NUM] per number, Fourier features in, a digit head out.

Input: `FoNEEmbedding` adds the features of the exact digits (and the sign with ``sign_policy="feature"``) to the
[NUM] row. Output: `FoNEDigitHead`, one 2-vector per place scored over the ten digits (cross-entropy, Definition 3.7;
NTL on its 10-way distributions when ``ntl_weight > 0``), read back exactly in generation.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from numadapter.methods.base import GeneratedNumber, HeadReading, LossInputs, NumberMethod, NumberSettings
from numadapter.methods.fone.answer_mode import answers_mode, context_count
from numadapter.methods.fone.modes import get_head_mode


def fone_ntl(inputs: LossInputs) -> torch.Tensor:
    """NTL on the FoNE head's 10-way digit distributions at the target numbers: per-number mean over places, / N.

    The distributions are the ones the head's own loss scores (`FoNEDigitHead.target_logits`). The context head
    (``fone_head_input="context"``) gets none (`FoNEMethod.head_ntl`): its digits come from the numbers before the
    answer, exactly, so NTL has nothing to add there, and a large weight makes it get the top place wrong
    (docs/results.md, "The context head under real prompts").
    """
    from numadapter.ntl import digit_ntl

    b, t = inputs.plan.target_index
    target = inputs.plan.targets.digits[b, t]  # (N, P)
    logits = inputs.head.target_logits(inputs.outputs, target)  # (N, P, 10)
    per_place = digit_ntl(logits, target, inputs.config.ntl_kind, reduction="none")  # (N, P)
    return per_place.mean(-1).sum() / inputs.denom


class FoNEMethod(NumberMethod):
    """The FoNE number method (see the module docstring)."""

    def fields(self, config: NumberSettings) -> tuple[str, ...]:
        return ("digits", "sign") if config.sign_policy == "feature" else ("digits",)

    def build_modules(
        self, config: NumberSettings, hidden_size: int, model_config: Any
    ) -> tuple[nn.Module, nn.Module]:
        from numadapter.methods.fone.embedding import FoNEEmbedding
        from numadapter.methods.fone.head import FoNEDigitHead

        return FoNEEmbedding(hidden_size, config), FoNEDigitHead(hidden_size, config)

    def validate(self, config: Any) -> None:
        """FoNE's settings that only work together: answers mode and products need the context head, which needs
        feature targets; the digit head scores base 10 only and writes no digit tokens for a number-level NTL."""
        reads_context = get_head_mode(config).reads_context
        if config.fone_numbers == "answers" and not reads_context:
            raise ValueError(
                "fone_numbers='answers' writes as [NUM] only the answers the context head can form from the numbers "
                f"before them, but fone_head_input={config.fone_head_input!r} forms none: set "
                "fone_head_input='context' (the default), or fone_numbers='all'."
            )
        if config.fone_context_products and not reads_context:
            raise ValueError(
                "fone_context_products=True lets the context head multiply or divide the numbers before the answer, "
                f"but fone_head_input={config.fone_head_input!r} combines none: set fone_head_input='context' (the "
                "default), or fone_context_products=False."
            )
        if reads_context and config.fone_head_target != "feature":
            raise ValueError(
                "fone_head_input='context' (the default) combines the numbers' exact features, so each place must be "
                f"trained towards the answer's feature, but fone_head_target={config.fone_head_target!r}: for the "
                "paper's digit head set fone_head_input='linear', or keep fone_head_target='feature'."
            )
        if config.ntl_level == "number":
            raise ValueError(
                "`ntl_level`='number' scores whole numbers written as digit tokens by the LM head, but "
                "encoding='fone' predicts numbers with its digit head: set ntl_level='token' (digit-head NTL) or "
                "encoding='digits'."
            )
        if list(config.fone_bases) != [10]:
            raise ValueError(
                f"`fone_bases`={config.fone_bases!r} with encoding='fone': the FoNE digit head scores each digit "
                "against base 10 only (the FoNE reference scores it with every base), so other bases would reach "
                "the input features but not the head. Set fone_bases=[10]."
            )

    def context_size(self, config: Any) -> int:
        return context_count(config) if get_head_mode(config).reads_context else 0

    def coverage_context(self, config: Any) -> int:
        # answers mode writes as [NUM] only the answers the head forms, the rest as digits on purpose
        return 0 if answers_mode(config) else self.context_size(config)

    def training_warnings(self, config: Any) -> list[str]:
        if not (get_head_mode(config).reads_context and config.ntl_weight > 0):
            return []
        return [
            f"ntl_weight={config.ntl_weight!r} is not applied with FoNE's context head (fone_head_input='context', "
            "the default): it writes the digits of the numbers before the answer exactly, so a loss on digit "
            "distance has nothing to add there (docs/results.md). Set ntl_weight=0 to silence this, or "
            "fone_head_input='linear' for NTL on the paper's digit head."
        ]

    def head_outputs(self, head: nn.Module, hidden: torch.Tensor, context: Any = None) -> Any:
        return head(hidden, context) if context is not None else head(hidden)

    def init_from_row(self, embedding: nn.Module | None, head: nn.Module | None, rms: float) -> None:
        embedding.reset_scale(rms)

    def lm_ntl(self, config: NumberSettings) -> bool:
        return False  # the digit head carries the NTL (`head_ntl`); [NUM] is not a digit token

    def report(self, head: nn.Module, outputs: Any) -> dict[str, torch.Tensor | None]:
        return {"number_logits": outputs.digit_logits, "number_sign_logits": outputs.sign_logits}

    def head_loss(self, inputs: LossInputs) -> torch.Tensor:
        b, t = inputs.plan.target_index
        targets, out = inputs.plan.targets, inputs.outputs  # digit_logits (N, P, 10), sign_logits (N, 2) | None
        sign = None if out.sign_logits is None else targets.sign[b, t]
        return inputs.head.loss(out, targets.digits[b, t], sign, reduction="sum") / inputs.denom

    def head_ntl(self, inputs: LossInputs) -> torch.Tensor | None:
        if self.context_size(inputs.config):  # the context head: no NTL (`fone_ntl`; the trainers warn)
            return None
        return fone_ntl(inputs)

    def predict(self, config: NumberSettings, head: nn.Module, outputs: list[Any]) -> HeadReading:
        from numadapter.methods.context import ContextNumbers, combine_exactly
        from numadapter.methods.fone.head import DigitHeadOutput

        def last(field: str) -> torch.Tensor | None:  # the field at the last position of every row: (N, ...)
            parts = [getattr(out, field) for out in outputs]
            return None if parts[0] is None else torch.cat([part[:, -1] for part in parts])

        out = DigitHeadOutput(
            digit_logits=last("digit_logits"), sign_logits=last("sign_logits"), pairs=last("pairs"),
            coefficient_log_probs=last("coefficient_log_probs"), operation_log_probs=last("operation_log_probs"),
        )  # fmt: skip
        digits, sign = head.predict(out)
        exponents = torch.arange(config.int_digits - 1, -config.frac_digits - 1, -1, dtype=torch.float64)
        place_values = torch.pow(10.0, exponents).to(digits.device)  # (P,): 10^(m-1) ... 10^(-n)
        values = (digits.to(torch.float64) * place_values).sum(-1) * sign  # (N,)
        confidence, combination = head.confidence(out)
        combined = None
        if combination is not None and outputs[0].context is not None:  # the context head: its exact value too
            context = ContextNumbers(
                *(
                    None if parts[0] is None else torch.cat([part[:, -1] for part in parts])
                    for parts in zip(*[o.context for o in outputs])
                )
            )
            combined = combine_exactly(context, combination)
            if out.operation_log_probs is not None:  # a product / quotient of two numbers: its exact magnitude
                operation = out.operation_log_probs.argmax(-1)  # (N,)
                pairs = last("pair_combined")  # (N, C, 2 + P)
                index = (operation - 1).clamp(min=0)[:, None, None].expand(-1, 1, pairs.shape[-1])
                chosen = torch.gather(pairs, 1, index).squeeze(1)  # (N, 2 + P)
                combined = torch.where((operation > 0)[:, None], chosen, combined)
        return HeadReading(digits, sign, values, confidence, combination, combined)

    def read_numbers(
        self, config: NumberSettings, head: nn.Module, digits: list[list[int]] | None, signs: list[int],
        values: list[float], combined: list[list[int]] | None = None,
    ) -> list[GeneratedNumber]:  # fmt: skip
        """The exact numbers the digits spell; with the context head, a combination of the numbers before it that
        its digits hold only modulo ``10^int_digits`` (one that needs more places, or a negative magnitude) is
        returned whole instead, not feedable, with the reason (`numadapter.methods.fone.wrapping`)."""
        from numadapter.methods.fone.head import FoNEDigitHead
        from numadapter.methods.fone.wrapping import negative_reason, overflow_reason, unwrapped
        from numadapter.numbers import ExactNumber

        texts = FoNEDigitHead.to_strings(digits, signs, config.int_digits, config.frac_digits)
        combined = combined or [None] * len(texts)
        out = []
        for row_digits, sign, text, combination in zip(digits, signs, texts, combined):
            sign = -1 if sign < 0 else 1
            magnitude = None
            if combination is not None:
                magnitude = unwrapped(row_digits, combination, config.int_digits, config.frac_digits)
            if magnitude is not None and magnitude > 0:  # the digits are a wrapped sum: write it whole, stop there
                whole = ExactNumber.parse(sign * magnitude)
                reason = overflow_reason(whole, text, config.int_digits)
                out.append(GeneratedNumber(value=whole, text=str(whole), feedable=False, reason=reason))
                continue
            if magnitude is not None:  # below zero: its digits are the complement, never written
                whole = ExactNumber.parse(sign * magnitude)
                reason = negative_reason(magnitude, text, config.int_digits)
                out.append(GeneratedNumber(whole, str(whole), feedable=False, reason=reason, below_zero=True))
                continue
            value = ExactNumber.from_place_digits(row_digits, config.int_digits, config.frac_digits, sign)
            out.append(GeneratedNumber(value=value, text=text))
        return out
