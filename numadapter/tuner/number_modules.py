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
from numadapter.methods.registry import get_method
from numadapter.tuner.integrity import STAMP, stamp_tensor


class NumberModules(nn.Module):
    """Input-side number module and number head of one adapter.

    Args:
        config: the adapter config (its encoding's `NumberMethod.build_modules` decides which modules exist).
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
        method = get_method(config)
        self.encoding = config.encoding
        self.method = method
        self._needs_digit_embeddings = method.needs_digit_embeddings(config)
        self.embedding, self.head = method.build_modules(config, hidden_size, model_config)
        self.marker_token_id = marker_token_id(config)
        # the settings these modules were built for, saved with them and checked on load (`integrity`)
        self.register_buffer(STAMP, stamp_tensor(config), persistent=True)

    def restamp(self, config: NumberAdapterConfig) -> None:
        """Stamps `config`'s settings anew, after a trainer decided some of them for the built modules (xVal's
        normalisation fitted on the training data, `numadapter.training.xval_fit`)."""
        old = getattr(self, STAMP)
        self.register_buffer(STAMP, stamp_tensor(config).to(old.device), persistent=True)

    @property
    def needs_digit_embeddings(self) -> bool:
        """Whether the input module reads the digit-token embeddings (the [AGG] aggregate)."""
        return self._needs_digit_embeddings

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
        self.method.init_from_row(self.embedding, self.head, rms)


def marker_token_id(config: NumberAdapterConfig) -> int | None:
    """The id carrying number tensors: [NUM] for fone/xval, [AGG] for digits + aggregate, None for plain digits."""
    return get_method(config).marker_token_id(config)


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
