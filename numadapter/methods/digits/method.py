"""`DigitsMethod`: ``encoding="digits"``: numbers stay ordinary digit tokens written by the LM head.

With ``aggregate=True`` an [AGG] token before each number carries the weighted aggregate of its digit embeddings
(`numadapter.methods.aggregate`); with ``aggregate_loss_lambda < 1`` the loss mixes in the auxiliary loss L_AUX:
``lambda * CE + (1 - lambda) * L_AUX`` (digit-aggregation paper eq. 3). NTL applies to the LM head's digit tokens.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from numadapter.methods.base import LossInputs, NumberMethod, NumberSettings


class DigitsMethod(NumberMethod):
    """The digit-token number method (see the module docstring)."""

    def replaces_numbers(self, config: NumberSettings) -> bool:
        return False

    def marker_field(self, config: NumberSettings) -> str | None:
        return "agg_token" if config.aggregate else None

    def fields(self, config: NumberSettings) -> tuple[str, ...]:
        return ("digits",)

    def check_bound(self, config: NumberSettings, fix: str) -> None:
        if config.aggregate and config.agg_token_id is None:
            raise ValueError(f"aggregate=True needs `agg_token_id` (the {config.agg_token} id): {fix}.")

    def build_modules(
        self, config: NumberSettings, hidden_size: int, model_config: Any
    ) -> tuple[nn.Module | None, None]:
        if not config.aggregate:
            return None, None
        from numadapter.methods.aggregate.embedding import AggregateEmbedding

        return AggregateEmbedding(config), None

    def needs_digit_embeddings(self, config: NumberSettings) -> bool:
        return bool(config.aggregate)

    def loss_needs_digit_embeddings(self, config: NumberSettings) -> bool:
        return config.aggregate_loss_lambda < 1.0

    def number_count_ids(self, config: NumberSettings) -> list[int] | None:
        return list(config.digit_token_ids) if config.aggregate_loss_lambda < 1.0 else None

    def loss_terms(
        self, inputs: LossInputs, lm_loss: torch.Tensor, ntl: torch.Tensor | None
    ) -> dict[str, torch.Tensor | None]:
        from numadapter.methods.aggregate.loss import aggregate_term

        lam = inputs.config.aggregate_loss_lambda
        loss, aux = lm_loss, None
        if lam < 1.0:
            if inputs.digit_embeddings is None:
                raise RuntimeError("the aggregate loss needs the digit embeddings; they were not captured.")
            labels = inputs.plan.lm_labels.to(inputs.logits.device)
            aux = aggregate_term(inputs.config, inputs.logits, labels, inputs.digit_embeddings, inputs.numbers)
            loss = lam * lm_loss + (1.0 - lam) * aux
        if ntl is not None:
            loss = loss + inputs.config.ntl_weight * ntl
        return {"loss": loss, "number_loss": None, "ntl_loss": ntl, "aggregate_loss": aux}

    def suppressed_ids(self, config: NumberSettings) -> list[int]:
        return [config.agg_token_id] if config.aggregate else []  # [AGG] is the aggregate of digits that follow it
