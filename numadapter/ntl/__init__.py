"""Number Token Loss (NTL): regression-like losses on the LM head's number-token probabilities.

Paper: Zausinger et al., "Regress, Don't Guess - A Regression-like Loss on Number Tokens for Language Models"
(ICML 2025), docs/papers.md, "Number Token Loss". Notation: at a position whose label is a number token
with value ``y``, ``v_j`` is the value of number token ``j`` and ``p~ = softmax(number-token logits)``: the softmax
is taken over the number tokens only (Algorithm A1/A2, ``n_probs = Softmax(n_logits)``).

Kinds (``kind=``):
    - ``"was"`` (default, eq. 4): ``sum_j p~_j * c(|y - v_j|)``, the Wasserstein-1 distance to the one-hot label.
    - ``"was-cdf"`` (eq. 5): ``sum_k |CDF_p(u_k) - CDF_t(u_k)| * (u_{k+1} - u_k)`` over the sorted distinct values
      ``u``. For unit-spaced digits this is eq. 5 term by term; the gap factor makes it the exact W1 on the line
      for any spacing. The target ``t`` may be any distribution (``target_probs=``), e.g. label smoothing.
    - ``"mse"``, ``"mae"``, ``"huber"`` (the L_p family, eq. 1): ``f(y - yhat)`` with ``yhat = sum_j p~_j v_j``.
    - ``"gce"`` (Gaussian cross entropy, eq. 7-8): ``-sum_j t_j log p_j`` with ``t_j`` proportional to
      ``exp(-(v_j - y)^2 / (2 sigma^2))``, normalised to sum to 1 (eq. 7's constant, printed as
      ``1/(sqrt(2 pi) sigma^2)``, cancels in the normalisation a discrete label needs). ``p_j`` is the model's
      probability over the *full* vocabulary (eq. 8's ``y^_i``), so GCE can stand in for CE at number positions.
      The Gaussian only spreads over number tokens of the label's own form (bare, "\u2581"- or "\u0120"-prefixed):
      a label "5" never sends target mass to "\u25815", which is another surface form, not a nearby number.

Scale: distances are the raw token values, exactly as in eq. 1 and eq. 4 (no normalisation; the ``1/V`` of
Algorithm A2, line 15, is a constant factor that only rescales lambda and is not applied). With multi-digit tokens
(``digit_level=False``) values reach 999 and more, so NTL-WAS can be hundreds of times CE and NTL-MSE ~10^6.
Section 4.5's remedy is ``squash_factor`` ``S > 1`` (``kind="was"`` only): the cost of a wrong value at distance
``d`` becomes ``c(d) = 1 + (d - d_min) * (S - 1) / (d_max - d_min)`` (``c(0) = 0``), where ``d_min`` / ``d_max`` are
the smallest non-zero / the largest distance between number values. The nearest wrong token costs 1 and the farthest
exactly ``S``, so the squashed loss is in units of "nearest wrong values", whatever the spacing of the values
(values 0, 10, 20, 100: the nearest wrong value costs 1, not 10). This is the authors' ``ntloss`` package's
definition (``NTLoss(squash_factor=...)``, compared in the tests, including uneven spacing), which also requires
``S > 1``; ``S`` moves between plain NTL (``S = 9`` on digits) and a cost close to CE's 0/1 cost as ``S -> 1``.

``reweigh=True`` (off by default, as in the paper's experiments): ``m`` is the probability the model puts on the
number tokens (full softmax) and the loss becomes ``m * loss + (1 - m) * loss_worst``: mass outside the number
tokens is charged as if it sat on the worst number token (the farther extreme value). Pure scaling by ``m`` would
reward moving mass *off* the numbers; this form is never smaller than the unweighted loss.

Number tokens (`parse_number_token`): a token counts when, after at most one "\u2581" (SentencePiece) or "\u0120"
(byte-level BPE) prefix, it is a non-empty run of ASCII digits; its value is that integer ("007" -> 7, like the
paper's ``int(token)``). Everything else is excluded: "\u00bd", "1st", "inf", "nan", "0x1", "1e5", "-3" (the sign is
its own token in text) and "1.5" (a piece's place value is unknown). With ``digit_level=True`` (the default; the
paper's recommended setup and what ``encoding="digits"`` produces) only single digits count.

The limitation named in the paper's conclusion (every digit counts the same) can be addressed on FoNE's 10-way
digit head by ``place_weighted=True`` in `digit_ntl`: place ``j`` of ``P`` (``j = 0`` most significant) gets
``w_j = base^(P-1-j) / sum_i base^i``; weights sum to 1 per number, so ``"mean"`` averages over numbers. (No
config field reaches it; the trainers' losses use the unweighted form.)

Speed: `NTLoss.forward` gathers the K number columns (``logits[..., ids]``) and never materialises a probability
over the vocabulary; its backward still writes one dense zero-filled ``[B, T, V]`` gradient (autograd's rule for
indexing). `cross_entropy_and_ntl` computes CE and NTL in one autograd node from one logsumexp and writes a single
gradient, adding NTL's ``[N, K]`` part in place: use it in trainers.

Modules: `numadapter.ntl.vocab` (token -> value maps), `numadapter.ntl.value_loss` (the kinds), `numadapter.ntl.module`
(`NTLoss`), `numadapter.ntl.fused` (`cross_entropy_and_ntl`), `numadapter.ntl.digit` (`digit_ntl`),
`numadapter.ntl.number_level` (`number_level_ntl`: whole-number NTL, as ntloss's ``NumberLevelLoss``).
"""

from numadapter.ntl.digit import digit_ntl
from numadapter.ntl.fused import cross_entropy_and_ntl
from numadapter.ntl.module import NTLoss
from numadapter.ntl.number_level import number_level_ntl
from numadapter.ntl.value_loss import NumberValueLoss
from numadapter.ntl.vocab import KINDS, PREFIX_GROUPS, REDUCTIONS, NumberVocab, number_vocab, parse_number_token

__all__ = [
    "KINDS",
    "PREFIX_GROUPS",
    "REDUCTIONS",
    "NTLoss",
    "NumberValueLoss",
    "NumberVocab",
    "cross_entropy_and_ntl",
    "digit_ntl",
    "number_level_ntl",
    "number_vocab",
    "parse_number_token",
]
