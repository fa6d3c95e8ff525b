"""The pointer form of the FoNE context head (``fone_context_pointer=True``): each number chosen by its own state.

The context head (`numadapter.methods.fone.head`) writes ``u * prod_k z_k^(c_k)`` over the numbers before the
answer. With the last K numbers and coefficients read from the answer's hidden state alone, it forms sums of the
latest few numbers; in a ledger ("Account 40213, 2019-03-07. Opening balance 5210. 1) deposit 120 2) withdrawal 85.
Closing balance:") the opening balance lies 8 to 15 numbers back, among an id, a date and list numbers, so no K it
can afford (it scores all ``3^K`` combinations) reaches it. A pretrained base's hidden state at a number, however,
carries that number's role (+1 opening balance / deposit, -1 withdrawal, 0 id / date / list number) in a form a
linear map reads (`eval_harness.suite.pointer_probe` fits such a probe on a frozen base).

So here slot k's coefficient logits come from the number's own key, read from the hidden state ``h_k`` at its
position (the [NUM], or the last digit token of a number left in digits), and from the answer's state ``h``
(`PointerScores`): the number's own role logits ``W_r h_k``, plus a match of a query ``W_q h`` with its key
``W_g h_k``, plus a bias per slot (three classes: -1, 0, +1).

Everything but ``W_g`` starts at zero, so a fresh head leaves every number out (a tie goes to 0). K may be up to
`POINTER_NUMBERS`; the ``3^K`` combinations are not scored one by one: the coefficients stay latent, and the
loss is ``-log`` of the total probability of the combinations that give the answer exactly (`exact_log_likelihood`,
summed by halves of the slots: meet in the middle), plus the digit loss of the number the likeliest of them forms
(`likeliest_combination`, the fewest terms among equals; `FoNEDigitHead.loss`). An answer that no
combination forms trains the read-out with every coefficient 0, as in the plain context head.

Shapes: N target rows, K slots (slot 0 the latest number), D = `KEY_SIZE`, P places.
"""

from __future__ import annotations

import math

import torch
from torch import nn

# the width of a number's key
KEY_SIZE = 32
# the score a term costs: far below any difference of log-probabilities that matters, so it only breaks ties
_TERM_COST = 1e-4


class PointerScores(nn.Module):
    """The coefficient logits of every slot from its number's key and the answer's hidden state.

    A key (`keys`) is ``[r, g]``: ``r = W_r h'``, the number's own logits of the three coefficients (a linear read of
    its role, as the probe reads it), and ``g``, a unit-RMS match key ``W_g h``; ``h'`` is the hidden state scaled to
    unit root-mean-square. A slot's logits are ``r + (W_q h'_answer / sqrt(H)) . g / sqrt(D) + s_k``.

    Args:
        hidden_size: H.
        count: K, the slots.
    """

    def __init__(self, hidden_size: int, count: int) -> None:
        super().__init__()
        self.count = count
        self.hidden_size = hidden_size
        self.role = nn.Linear(hidden_size, 3)
        self.key = nn.Linear(hidden_size, KEY_SIZE)  # random, like an attention key: W_q learns through it
        self.query = nn.Linear(hidden_size, 3 * KEY_SIZE)
        self.slot = nn.Parameter(torch.zeros(count, 3))
        with torch.no_grad():
            for layer in (self.role, self.query):
                layer.weight.zero_()
                layer.bias.zero_()

    def keys(self, hidden: torch.Tensor) -> torch.Tensor:
        """``[..., H]`` hidden states -> float32 ``[..., 3 + D]`` keys (the one at a number's position is its key).

        Read from the hidden state scaled to unit root-mean-square, so that a step of the number modules' learning
        rate moves the logits by the same amount whatever the size of the base's hidden states (a base with large
        final hidden states, read raw, moves the logits by tens in one step and the loss diverges). The role read is
        not divided by ``sqrt(H)`` (the query is): damped that way, it learns too slowly in a short fine-tuning to
        tell a withdrawal from a deposit."""
        unit = _unit_rms(hidden.float())
        role = nn.functional.linear(unit, self.role.weight.float(), self.role.bias.float())
        match = _unit_rms(nn.functional.linear(hidden.float(), self.key.weight.float(), self.key.bias.float()))
        return torch.cat((role, match), -1)

    def forward(self, hidden: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Logits of the coefficients ``(-1, 0, +1)``.

        Args:
            hidden: float32 ``[N, H]`` the answer positions' hidden states.
            keys: float ``[N, K, 3 + D]`` the keys of their context numbers (`ContextNumbers.keys`).

        Returns:
            float32 ``[N, K, 3]``.
        """
        unit = _unit_rms(hidden.float())
        query = nn.functional.linear(unit, self.query.weight.float(), self.query.bias.float()) / self.hidden_size**0.5
        query = query.unflatten(-1, (3, KEY_SIZE))  # (N, 3, D)
        keys = keys.float()
        match = torch.einsum("...cd,...kd->...kc", query, keys[..., 3:]) / KEY_SIZE**0.5  # (N, K, 3)
        return keys[..., :3] + match + self.slot.float()


def _unit_rms(x: torch.Tensor) -> torch.Tensor:
    """``x`` divided by its root-mean-square over the last dim (``[..., F]`` -> ``[..., F]``)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def _half_sums(
    values: torch.Tensor, scores: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every coefficient choice of some slots: ``values [N, S]`` and ``scores [N, S, 3]`` -> choices ``[C, S]`` of
    -1 / 0 / +1 (C = 3^S), their sums ``[N, C]``, scores ``[N, C]`` (summed over the slots) and terms ``[C]``."""
    slots = values.shape[-1]
    if slots == 0:
        zero = values.new_zeros(values.shape[0], 1)
        return values.new_zeros(1, 0), zero, scores.new_zeros(values.shape[0], 1), values.new_zeros(1)
    choices = torch.cartesian_prod(*[torch.tensor([0, 1, -1], device=values.device)] * slots).reshape(-1, slots)
    sums = (values[:, None, :] * choices).sum(-1)  # (N, C)
    index = (choices + 1).T.unsqueeze(0).expand(values.shape[0], -1, -1)  # (N, S, C): the class of each slot
    score = scores.gather(-1, index).sum(-2)  # (N, C)
    return choices, sums, score, (choices != 0).sum(-1)


def _halves(
    values: torch.Tensor, valid: torch.Tensor, scores: torch.Tensor
) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """`_half_sums` of the first ``ceil(K/2)`` slots and of the rest, an empty slot's value 0 and its coefficient 0
    for sure (score 0, -inf for -1 / +1): ``values [N, K]``, ``valid [N, K]``, ``scores [N, K, 3]``."""
    values = torch.where(valid, values.long(), 0)
    empty = torch.tensor([-math.inf, 0.0, -math.inf], device=values.device)
    scores = torch.where(valid[..., None], scores, empty)
    half = (values.shape[-1] + 1) // 2
    return _half_sums(values[:, :half], scores[:, :half]), _half_sums(values[:, half:], scores[:, half:])


@torch.no_grad()
def likeliest_combination(
    values: torch.Tensor, valid: torch.Tensor, target: torch.Tensor, log_probs: torch.Tensor | None = None
) -> torch.Tensor:
    """Per row, the coefficients (at least one term) whose signed sum is exactly `target`, the likeliest under
    `log_probs` and, among equally likely ones (all of them without `log_probs`), the one with the fewest terms.

    Meet in the middle: every choice over the first half of the slots, and over the second half sorted by sum (the
    likeliest first among equal sums), so each first-half choice finds the best second half that completes it by
    binary search (``2 x 3^(K/2)`` choices a row, not ``3^K``). The head's digits are trained on the combination it
    picks, hence the likeliest first: the fewest-terms one is often not the answer's own (a withdrawal and a list
    number together can stand for a deposit), while the likeliest one, once the coefficients have learnt, is.

    Args:
        values: int64 ``[N, K]`` fixed-point values of the context numbers (signed; anything in empty slots).
        valid: bool ``[N, K]``.
        target: int64 ``[N]`` the answers on the same scale.
        log_probs: float ``[N, K, 3]`` log-probabilities of the coefficients ``(-1, 0, +1)``, or None.

    Returns:
        int64 ``[N, K]`` of -1 / 0 / +1, all 0 on rows that no combination forms.
    """
    scores = torch.zeros(*values.shape, 3, device=values.device) if log_probs is None else log_probs.float()
    scores = scores - _TERM_COST * torch.tensor([1.0, 0.0, 1.0], device=values.device)  # fewest terms among equals
    (first, first_sums, first_scores, first_terms), (second, second_sums, second_scores, second_terms) = _halves(
        values, valid, scores
    )
    order = second_scores.argsort(dim=-1, descending=True, stable=True)  # the likeliest first ...
    order = order.gather(-1, second_sums.gather(-1, order).argsort(dim=-1, stable=True))  # ... within each sum
    sorted_sums = second_sums.gather(-1, order)  # (N, C2), ascending
    need = target.long()[:, None] - first_sums  # (N, C1): the second-half sum each first-half choice needs
    where = torch.searchsorted(sorted_sums, need).clamp(max=sorted_sums.shape[-1] - 1)  # (N, C1)
    pick = order.gather(-1, where)  # (N, C1): the likeliest second half with that sum
    total = first_scores + second_scores.gather(-1, pick)  # (N, C1)
    terms = first_terms + second_terms[pick]  # (N, C1)
    usable = (sorted_sums.gather(-1, where) == need) & (terms > 0) & torch.isfinite(total)
    total = torch.where(usable, total, -math.inf)
    best = total.argmax(-1)  # (N,)
    formed = usable.gather(-1, best[:, None]).squeeze(-1)  # (N,)
    coefficients = torch.cat((first[best], second[pick.gather(-1, best[:, None]).squeeze(-1)]), -1)  # (N, K)
    return torch.where(formed[:, None], coefficients, 0)


def fewest_terms(values: torch.Tensor, valid: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """`likeliest_combination` without probabilities: the exact combination with the fewest terms (at least one),
    int64 ``[N, K]`` of -1 / 0 / +1 (all 0 where none forms `target`): what the tokenizer asks of an answer."""
    return likeliest_combination(values, valid, target)


def exact_log_likelihood(
    values: torch.Tensor, valid: torch.Tensor, target: torch.Tensor, log_probs: torch.Tensor
) -> torch.Tensor:
    """``log sum_c P(c)`` over every combination ``c`` (at least one term) whose signed sum is exactly `target`, with
    ``P(c) = prod_k P_k(c_k)``; -inf where none is. Differentiable in `log_probs`.

    The same halves as `likeliest_combination`: the second half's choices sorted by sum, so the choices that
    complete a first-half choice form one run, whose probability is a difference of running sums (float64, each
    half scaled by its row's largest probability). The all-zero combination is left out (where the target is 0
    it forms it with no term: the read-out's case).

    Args:
        values: int64 ``[N, K]``; valid: bool ``[N, K]``; target: int64 ``[N]``;
        log_probs: float ``[N, K, 3]`` log-probabilities of the coefficients ``(-1, 0, +1)``.

    Returns:
        float32 ``[N]``.
    """
    (_, first_sums, first_scores, first_terms), (_, second_sums, second_scores, _) = _halves(
        values, valid, log_probs.float()
    )
    first_top = first_scores.detach().amax(-1, keepdim=True)  # (N, 1)
    second_top = second_scores.detach().amax(-1, keepdim=True)
    order = second_sums.argsort(dim=-1, stable=True)
    sorted_sums = second_sums.gather(-1, order)  # (N, C2)
    weights = (second_scores.gather(-1, order) - second_top).double().exp()  # (N, C2), at most 1
    running = torch.cat((weights.new_zeros(weights.shape[0], 1), weights.cumsum(-1)), -1)  # (N, C2 + 1)
    need = target.long()[:, None] - first_sums  # (N, C1)
    low = torch.searchsorted(sorted_sums, need)
    high = torch.searchsorted(sorted_sums, need, right=True)
    completing = (running.gather(-1, high) - running.gather(-1, low)).clamp(min=0.0)  # (N, C1)
    # the all-zero combination: the first half's empty choice (index 0) completed by the second half's (index 0)
    nothing = (first_terms == 0)[None] & (need == 0)  # (N, C1): only the empty first-half choice
    empty_second = (second_scores[:, :1] - second_top).double().exp()  # (N, 1): the second half's empty choice
    completing = torch.where(nothing, (completing - empty_second).clamp(min=0.0), completing)
    total = ((first_scores - first_top).double().exp() * completing).sum(-1)  # (N,)
    formed = total > 0
    log_total = torch.where(formed, total, 1.0).log()  # no log(0): its gradient would be NaN through the mask
    shift = first_top.squeeze(-1).double() + second_top.squeeze(-1).double()
    return torch.where(formed, log_total + shift, -math.inf).float()
