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
from typing import NamedTuple

import torch
import torch.nn.functional as F
from transformers.modeling_outputs import CausalLMOutputWithPast, Seq2SeqLMOutput

from numadapter.config import NumberAdapterConfig
from numadapter.tuner.inputs import NumberPlan
from numadapter.wire import IGNORE_INDEX


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

    The same runs as `numadapter.encodings.aggregate.aggregate_aux_loss` (any other label, -100 included, ends a
    run). Causal LMs: pass the labels aligned with the logits (`numadapter.tuner.alignment.causal_lm_labels`).

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


def head_outputs(head: torch.nn.Module | None, hidden: torch.Tensor | None) -> dict[str, torch.Tensor | None]:
    """Runs the number head at every position: FoNE digit / sign logits, or xVal normalised predictions."""
    if head is None or hidden is None:
        return {}
    out = head(hidden)
    if hasattr(out, "digit_logits"):  # FoNEDigitHead: digit_logits (..., P, 10), sign_logits (..., 2) | None
        return {"digit": out}
    return {"pred": out}  # RegressionHead: (...) normalised predictions


def head_loss(head: torch.nn.Module, outputs: dict, plan: NumberPlan, denom: torch.Tensor) -> torch.Tensor:
    """The number-head loss: `outputs` are the head's outputs at the N target rows; summed, divided by N_tokens."""
    if plan.targets is None or plan.target_index is None:  # no number labels: a zero that keeps the head in the graph
        return sum(value.sum() * 0.0 for value in _tensors(outputs))
    b, t = plan.target_index
    targets = plan.targets
    if "digit" in outputs:
        out = outputs["digit"]  # digit_logits (N, P, 10), sign_logits (N, 2) | None
        sign = None if out.sign_logits is None else targets.sign[b, t]
        summed = head.loss(out, targets.digits[b, t], sign, reduction="sum")
    else:
        summed = head.loss(outputs["pred"], targets.values[b, t], reduction="sum")  # (N,) normalised predictions
    return summed / denom


def lm_terms(
    config: NumberAdapterConfig, logits: torch.Tensor, labels: torch.Tensor, denom: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """CE, and NTL on the LM head's digit tokens when ``ntl_weight > 0`` (not for FoNE), both sums / `denom`.

    With NTL, `numadapter.ntl.cross_entropy_and_ntl` computes both from one pass over the vocabulary. With
    ``ntl_kind="gce"`` and ``gce_form="replace"`` (NTL paper, sec. 4.1.3) the CE leaves out the positions whose label
    is a digit token, where GCE takes its place; `denom` still counts them (each is one scored token).
    """
    labels = labels.to(logits.device)
    if config.ntl_weight > 0 and config.encoding != "fone":
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


def fone_ntl(
    config: NumberAdapterConfig, head: torch.nn.Module, outputs: dict, plan: NumberPlan, denom: torch.Tensor
) -> torch.Tensor:
    """NTL on the FoNE head's 10-way digit distributions at the target numbers: per-number mean over places, / N.

    The distributions are the ones the head's own loss scores (`FoNEDigitHead.target_logits`).
    """
    from numadapter.ntl import digit_ntl

    b, t = plan.target_index
    target = plan.targets.digits[b, t]  # (N, P)
    logits = head.target_logits(outputs["digit"], target)  # (N, P, 10)
    per_place = digit_ntl(logits, target, config.ntl_kind, reduction="none")  # (N, P)
    return per_place.mean(-1).sum() / denom


def aggregate_term(
    config: NumberAdapterConfig,
    logits: torch.Tensor,
    labels: torch.Tensor,
    digit_embeddings: torch.Tensor,
    numbers: torch.Tensor | int | None = None,
) -> torch.Tensor:
    """L_AUX of the digit-aggregation paper (eq. 2) on the aligned LM logits: summed over the numbers, / M.

    Args:
        config: the adapter config (``digit_token_ids``).
        logits: ``[B, T, V]`` aligned with `labels` ``[B, T]``.
        digit_embeddings: ``[10, H]`` the digit token embeddings (the metric of eq. 2).
        numbers: M, the number count of the accumulated batch; None: the count of this call (a per-call mean).
    """
    from numadapter.encodings.aggregate import aggregate_aux_loss

    ids = config.digit_token_ids
    table = digit_embeddings.new_zeros(max(ids) + 1, digit_embeddings.shape[-1])  # rows only for the digit ids
    table[ids] = digit_embeddings
    mean, count = aggregate_aux_loss(logits, labels, ids, table)
    if numbers is None:
        return mean
    summed = mean * count  # the mean over this call's `count` numbers, back to their sum
    return summed / torch.as_tensor(numbers, device=summed.device).to(torch.float32).clamp(min=1)


def _tensors(outputs: dict) -> list[torch.Tensor]:
    found = []
    for value in outputs.values():
        if hasattr(value, "digit_logits"):
            found += [t for t in (value.digit_logits, value.sign_logits) if t is not None]
        elif isinstance(value, torch.Tensor):
            found.append(value)
    return found


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
    terms: dict[str, torch.Tensor | None] = {"lm_loss": lm_loss, "number_loss": None, "ntl_loss": ntl}
    terms["aggregate_loss"] = None
    if config.encoding == "digits":
        lam = config.aggregate_loss_lambda
        loss = lm_loss
        if lam < 1.0:
            if digit_embeddings is None:
                raise RuntimeError("the aggregate loss needs the digit embeddings; they were not captured.")
            aux = aggregate_term(config, logits, plan.lm_labels.to(logits.device), digit_embeddings, numbers)
            terms["aggregate_loss"] = aux
            loss = lam * lm_loss + (1.0 - lam) * aux
    else:
        number = torch.zeros((), device=lm_loss.device)
        if head is not None and outputs is not None:
            number = head_loss(head, outputs, plan, denom)
            if config.ntl_weight > 0 and config.encoding == "fone" and plan.targets is not None:
                ntl = terms["ntl_loss"] = fone_ntl(config, head, outputs, plan, denom)
        terms["number_loss"] = number
        loss = lm_loss + config.number_loss_weight * number
    if ntl is not None:
        loss = loss + config.ntl_weight * ntl
    terms["loss"] = loss
    return terms
