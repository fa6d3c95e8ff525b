"""The loss: LM cross-entropy + weighted number-head loss (+ NTL) (+ the digit-aggregation auxiliary loss).

``loss = CE + number_loss_weight * L_head + ntl_weight * L_NTL`` for ``fone`` / ``xval``, and
``loss = lambda * CE + (1 - lambda) * L_AUX + ntl_weight * L_NTL`` for ``digits`` (digit-aggregation paper eq. 3,
``lambda = aggregate_loss_lambda``). With ``ntl_kind="gce"`` and ``gce_form="replace"`` (the default; NTL paper sec.
4.1.3) CE leaves out the LM positions whose label is a digit token, where ``ntl_weight * GCE`` replaces it.

Normalisation (gradient accumulation; docs/DESIGN.md, "Own the loss path"): CE is the *sum* over scored tokens divided
by ``N = num_items_in_batch`` when the trainer passes it (the scored-token count of the whole accumulated batch), else
by the scored-token count of this batch, as transformers does. The head loss is normalised by the *same* N: it is the
sum over the numbers being predicted (FoNE: mean digit CE of each number, + sign CE; xVal: squared error of the
normalised value) divided by N, so each [NUM] label contributes ``CE + w * head`` like one token, and accumulated
micro-batches give exactly the loss of one large batch. The reported ``number_loss`` is that per-token value (divide by
the fraction of scored tokens that are numbers to read a per-number loss). NTL is normalised the same way: the sum over
the scored number positions divided by N; it is computed on the LM head's digit tokens (``digits``, ``xval``; fused
with CE by `numadapter.ntl.cross_entropy_and_ntl`) or, for ``fone``, on the digit head's 10-way distributions
(`numadapter.ntl.digit_ntl`, mean over the places of each number).

``aggregate_loss`` (L_AUX, paper eq. 2) is a mean over *numbers* (the runs of digit labels,
`count_aggregate_numbers`), as the paper defines it: the sum over the numbers of this call divided by ``M``, the
number count of the whole accumulated batch when the trainer passes it (``num_items_in_batch`` as
``ItemCounts(tokens=N, numbers=M)``, counted over every accumulation step and process like N), else the count of
this call. So it is accumulation-exact too, and under DDP (the Trainer multiplies the loss by the process count when
N and M are global, and DDP averages the gradients) every component is counted once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from transformers.modeling_outputs import CausalLMOutputWithPast, Seq2SeqLMOutput

from numadapter.config import NumberAdapterConfig
from numadapter.methods.aggregate.loss import aggregate_term  # noqa: F401  (re-exported: imported from here before)
from numadapter.methods.base import LossInputs
from numadapter.methods.registry import get_method
from numadapter.schema import IGNORE_INDEX
from numadapter.tuner.inputs import NumberPlan


@dataclass
class NumberCausalLMOutput(CausalLMOutputWithPast):
    """`CausalLMOutputWithPast` plus the loss components and the number head outputs.

    Attributes:
        lm_loss: the token cross-entropy (see the module docstring for the normalisation).
        number_loss: the number-head loss (FoNE digits / xVal MSE), per scored token; None for digits.
        ntl_loss: the Number Token Loss when ``ntl_weight > 0``, else None.
        aggregate_loss: the digit-aggregation L_AUX when ``aggregate_loss_lambda < 1``, else None.
        number_logits: FoNE ``[B, T, P, 10]`` digit logits at every position (hidden t scores the number at t+1).
        number_sign_logits: FoNE ``[B, T, 2]`` sign logits with ``sign_policy="feature"``, else None.
        number_values: xVal ``[B, T]`` predicted values (denormalised, float64) at every position.

    With labels, the per-position head outputs are computed without gradient (the loss runs the head again on the
    target rows only, so its backward costs N rows, not B * T).
    """

    lm_loss: torch.Tensor | None = None
    number_loss: torch.Tensor | None = None
    ntl_loss: torch.Tensor | None = None
    aggregate_loss: torch.Tensor | None = None
    number_logits: torch.Tensor | None = None
    number_sign_logits: torch.Tensor | None = None
    number_values: torch.Tensor | None = None


@dataclass
class NumberSeq2SeqLMOutput(Seq2SeqLMOutput):
    """`Seq2SeqLMOutput` plus the fields of `NumberCausalLMOutput` (decoder hidden t scores ``labels[t]``)."""

    lm_loss: torch.Tensor | None = None
    number_loss: torch.Tensor | None = None
    ntl_loss: torch.Tensor | None = None
    aggregate_loss: torch.Tensor | None = None
    number_logits: torch.Tensor | None = None
    number_sign_logits: torch.Tensor | None = None
    number_values: torch.Tensor | None = None


class ItemCounts(NamedTuple):
    """The normalisers of one accumulated batch, passed as ``num_items_in_batch`` by the numadapter trainers.

    Attributes:
        tokens: N, the scored labels of the whole accumulated batch (transformers' ``num_items_in_batch``).
        numbers: M, the numbers the aggregate loss scores in it (`count_aggregate_numbers`), or None.
    """

    tokens: torch.Tensor | int
    numbers: torch.Tensor | int | None = None


def split_counts(num_items_in_batch) -> tuple[torch.Tensor | int | None, torch.Tensor | int | None]:
    """``(N, M)`` from a ``num_items_in_batch`` that is a count, an `ItemCounts`, or None (M is None unless given)."""
    if isinstance(num_items_in_batch, ItemCounts):
        return num_items_in_batch.tokens, num_items_in_batch.numbers
    return num_items_in_batch, None


def count_aggregate_numbers(lm_labels: torch.Tensor, digit_token_ids: list[int]) -> torch.Tensor:
    """M: the numbers L_AUX scores in aligned labels ``[B, T]``: maximal runs of digit tokens within a row.

    The same runs as `numadapter.methods.aggregate.embedding.aggregate_aux_loss` (any other label, -100 included, ends
    a run). Causal LMs: pass the labels aligned with the logits (`numadapter.tuner.alignment.causal_lm_labels`).

    Returns:
        A 0-dim int64 tensor on the labels' device.
    """
    ids = torch.as_tensor(digit_token_ids, dtype=torch.long, device=lm_labels.device)
    is_digit = torch.isin(lm_labels, ids)  # (B, T)
    before = F.pad(is_digit[:, :-1], (1, 0), value=False)  # (B, T): the previous label of the row is a digit
    return (is_digit & ~before).sum()


def normaliser(labels: torch.Tensor, num_items_in_batch: int | torch.Tensor | None) -> torch.Tensor:
    """N: ``num_items_in_batch`` when given, else the count of scored labels; at least 1 (an accumulated batch with
    every label masked has a zero sum, so its loss is 0, not 0 / 0), float32."""
    if num_items_in_batch is None:
        return (labels != IGNORE_INDEX).sum().clamp(min=1).to(torch.float32)
    return torch.as_tensor(num_items_in_batch, device=labels.device).to(torch.float32).clamp(min=1)


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor, denom: torch.Tensor) -> torch.Tensor:
    """Token CE of aligned logits ``[B, T, V]`` / labels ``[B, T]``: the float32 sum divided by `denom`."""
    summed = F.cross_entropy(
        logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE_INDEX, reduction="sum"
    )
    return summed / denom


class _DigitVocab:
    """The ten digit tokens as a minimal "tokenizer" for `numadapter.ntl.NTLoss` (it only reads ``get_vocab``)."""

    def __init__(self, digit_token_ids: list[int]) -> None:
        self._vocab = {str(digit): token_id for digit, token_id in enumerate(digit_token_ids)}

    def get_vocab(self) -> dict[str, int]:
        return dict(self._vocab)


def head_outputs(
    config: NumberAdapterConfig, head: torch.nn.Module | None, hidden: torch.Tensor | None, context: Any = None
) -> Any:
    """Runs the number head on hidden states ``[..., H]`` (the method's `NumberMethod.head_outputs`), or None.

    `context`: the numbers before each position (``[..., K, ...]``, `numadapter.methods.context`) for a head
    with `NumberMethod.context_size` > 0, else None."""
    if head is None or hidden is None:
        return None
    method = get_method(config)
    return method.head_outputs(head, hidden) if context is None else method.head_outputs(head, hidden, context)


def lm_terms(
    config: NumberAdapterConfig, logits: torch.Tensor, labels: torch.Tensor, denom: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """CE, and NTL on the LM head's digit tokens when ``ntl_weight > 0`` (not for FoNE), both sums / `denom`.

    With NTL, `numadapter.ntl.cross_entropy_and_ntl` computes both from one pass over the vocabulary. With
    ``ntl_kind="gce"`` and ``gce_form="replace"`` (NTL paper, sec. 4.1.3) the CE leaves out the positions whose label
    is a digit token, where GCE takes its place; `denom` still counts them (each is one scored token).
    """
    labels = labels.to(logits.device)
    if get_method(config).lm_ntl(config):
        from numadapter.ntl import NTLoss, cross_entropy_and_ntl

        if config.ntl_level == "number":
            from numadapter.ntl import number_level_ntl

            summed = number_level_ntl(
                logits, labels, config.digit_token_ids, reduction="sum", ignore_index=IGNORE_INDEX
            )
            return cross_entropy(logits, labels, denom), summed / denom
        ntl = NTLoss(_DigitVocab(config.digit_token_ids), kind=config.ntl_kind, reduction="sum").to(logits.device)
        if config.ntl_kind == "gce" and config.gce_form == "replace":
            digit_ids = torch.as_tensor(config.digit_token_ids, device=labels.device)
            other = labels.masked_fill(torch.isin(labels, digit_ids), IGNORE_INDEX)  # CE off the digit labels
            return cross_entropy(logits, other, denom), ntl(logits, labels) / denom
        ce_sum, ntl_sum = cross_entropy_and_ntl(logits, labels, ntl, ce_reduction="sum")
        return ce_sum / denom, ntl_sum / denom
    return cross_entropy(logits, labels, denom), None


def combine(
    config: NumberAdapterConfig,
    head: torch.nn.Module | None,
    logits: torch.Tensor,
    outputs: dict | None,
    plan: NumberPlan,
    num_items_in_batch,
    digit_embeddings: torch.Tensor | None,
) -> dict[str, torch.Tensor | None]:
    """All loss terms and their weighted sum (keys: loss, lm_loss, number_loss, ntl_loss, aggregate_loss).

    `outputs` are the number head's outputs at the target rows (``plan.target_index``), or None without a head.
    `num_items_in_batch`: N (a count) or `ItemCounts` (N and the aggregate loss's M), or None (this call's counts).
    """
    tokens, numbers = split_counts(num_items_in_batch)
    denom = normaliser(plan.lm_labels, tokens).to(logits.device)
    lm_loss, ntl = lm_terms(config, logits, plan.lm_labels, denom)
    inputs = LossInputs(config, head, logits, plan, outputs, denom, numbers, digit_embeddings)
    return {"lm_loss": lm_loss, **get_method(config).loss_terms(inputs, lm_loss, ntl)}
