"""The per-adapter container of number modules: the input-side module and the number head.

| encoding                  | ``embedding``                            | ``head``                                  |
|---------------------------|------------------------------------------|-------------------------------------------|
| ``fone``                  | `FoNEEmbedding` (features at [NUM] rows) | `FoNEDigitHead` (digit logits, FoNE 3.7)  |
| ``xval``                  | `XValEmbedding` (value at [NUM] rows)    | `RegressionHead` (MSE, xVal section 2)    |
| ``digits``, aggregate     | `AggregateEmbedding` (eq. 1 at [AGG])    | none: the LM head predicts digit tokens   |
| ``digits``                | none                                     | none                                      |

`NumberAdapterModel` keeps one `NumberModules` per adapter name in ``number_modules`` (an ``nn.ModuleDict``), so
their parameters are saved with the adapter (keys ``base_model.number_modules.<module>...``), marked trainable with
it and counted by ``print_trainable_parameters``. Everything here computes in float32 and is kept in float32.
"""

from __future__ import annotations

import torch
from torch import nn

from numadapter.config import NumberAdapterConfig
from numadapter.tuner.integrity import STAMP, stamp_tensor


class NumberModules(nn.Module):
    """Input-side number module and number head of one adapter.

    Args:
        config: the adapter config (``encoding`` decides which modules exist).
        hidden_size: the model width H.
        model_config: the base model's transformers config (resolves ``xval_form="auto"``).

    Attributes:
        embedding: `FoNEEmbedding` / `XValEmbedding` / `AggregateEmbedding`, or None (plain digits).
        head: `FoNEDigitHead` / `RegressionHead`, or None (digits).
        marker_token_id: the token id whose rows carry number tensors ([NUM] or [AGG]), or None.
        settings_stamp: ``[L]`` uint8 buffer, the JSON of the config fields the modules depend on (saved with the
            adapter; loading compares it with the config, see `numadapter.tuner.integrity`).
    """

    def __init__(self, config: NumberAdapterConfig, hidden_size: int, model_config: object) -> None:
        super().__init__()
        # imported here, not at module level: registering with PEFT (on `import numadapter` and in every
        # NumberAdapterConfig) then does not import the encodings and heads
        from numadapter.encodings.aggregate import AggregateEmbedding
        from numadapter.encodings.fone import FoNEEmbedding
        from numadapter.encodings.xval import XValEmbedding, resolve_xval_form
        from numadapter.heads.digit import FoNEDigitHead
        from numadapter.heads.regression import RegressionHead

        self.encoding = config.encoding
        self.aggregate = config.encoding == "digits" and config.aggregate
        self.embedding: nn.Module | None = None
        self.head: nn.Module | None = None
        if config.encoding == "fone":
            self.embedding = FoNEEmbedding(hidden_size, config)
            self.head = FoNEDigitHead(hidden_size, config)
        elif config.encoding == "xval":
            form = resolve_xval_form(config.xval_form, model_config)
            self.embedding = XValEmbedding(hidden_size, config, form=form)
            self.head = RegressionHead(hidden_size, config)
        elif config.aggregate:
            self.embedding = AggregateEmbedding(config)
        self.marker_token_id = marker_token_id(config)
        # the settings these modules were built for, saved with them and checked on load (`integrity`)
        self.register_buffer(STAMP, stamp_tensor(config), persistent=True)

    @property
    def needs_digit_embeddings(self) -> bool:
        """Whether the input module reads the digit-token embeddings (the [AGG] aggregate)."""
        return self.aggregate

    @torch.no_grad()
    def init_from_row(self, number_row: torch.Tensor) -> None:
        """Scales the input module to the initial [NUM] embedding row (FoNE projection RMS, xVal direction RMS).

        Args:
            number_row: ``[H]`` the initial [NUM] row of the input embedding (skipped on the meta device).
        """
        if number_row.device.type == "meta":
            return
        rms = number_row.detach().float().pow(2).mean().sqrt().item()
        if not rms > 0:  # an all-zero row: keep the modules' own default scale
            return
        if self.encoding == "fone":
            self.embedding.reset_scale(rms)
        elif self.encoding == "xval" and self.embedding.direction is not None:
            self.embedding.init_direction(rms)


def marker_token_id(config: NumberAdapterConfig) -> int | None:
    """The id carrying number tensors: [NUM] for fone/xval, [AGG] for digits + aggregate, None for plain digits."""
    if config.encoding in ("fone", "xval"):
        return config.num_token_id
    if config.aggregate:
        return config.agg_token_id
    return None


def end_token_ids(config: NumberAdapterConfig) -> list[int]:
    """Existing token ids whose rows train with the number rows: the EOS id with ``train_eos_row`` (else none).

    Unlike the number tokens, their base rows are kept (PEFT trainable tokens start from them).
    """
    eos = config.eos_token_id
    if not config.train_eos_row or eos is None or eos in number_token_ids(config):
        return []
    return [eos]


def number_token_ids(config: NumberAdapterConfig) -> list[int]:
    """The token ids whose embedding rows numadapter trains (PEFT trainable tokens): [NUM] or [AGG]."""
    marker = marker_token_id(config)
    return [] if marker is None else [marker]
