"""The per-position NTL kinds over a fixed set of number values (paper eq. 1, 4, 5, 7-8; sec. 4.5) and reductions."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from numadapter.ntl.vocab import _EXACT_F32, KINDS


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {list(choices)}, got {value!r}.")


def _check_positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
        raise ValueError(f"`{name}` must be a positive finite number, got {value!r}.")


class NumberValueLoss:
    """The per-position loss of one NTL kind over a fixed set of number values (shared by all entry points).

    Args:
        values: the number value of each of the K number tokens (exact Python ints).
        groups: the surface-form group of each number token (see `parse_number_token`).
        kind, squash_factor, reweigh, sigma, huber_delta: see `NTLoss`.
    """

    def __init__(
        self,
        values: tuple[int, ...],
        groups: tuple[int, ...],
        kind: str = "was",
        *,
        squash_factor: float | None = None,
        reweigh: bool = False,
        sigma: float = 0.5,
        huber_delta: float = 1.0,
    ) -> None:
        _check_choice("kind", kind, KINDS)
        _check_positive("sigma", sigma)
        _check_positive("huber_delta", huber_delta)
        if reweigh and kind == "gce":
            raise ValueError("`reweigh=True` does not apply to kind='gce' (GCE already uses the full softmax).")
        self.kind, self.reweigh, self.sigma, self.huber_delta = kind, bool(reweigh), float(sigma), float(huber_delta)
        distinct = sorted(set(values))
        self.squash: tuple[float, float] | None = None  # (d_min, slope) of the squashed cost
        if squash_factor is not None:
            if kind != "was":
                raise ValueError(
                    f"`squash_factor` rescales the Wasserstein cost and needs kind='was', got kind={kind!r} "
                    f"(squash_factor={squash_factor!r}); set squash_factor=None or kind='was'."
                )
            _check_positive("squash_factor", squash_factor)
            if squash_factor <= 1:
                raise ValueError(
                    f"`squash_factor` must be > 1 (the cost ratio of the farthest to the nearest wrong value, as in "
                    f"ntloss), got {squash_factor!r}: use e.g. 9 (plain NTL on digits), or plain cross-entropy "
                    "(ntl_weight=0) for a 0/1 cost."
                )
            d_min = min((b - a for a, b in zip(distinct, distinct[1:])), default=0)
            d_max = distinct[-1] - distinct[0]
            if d_max > d_min > 0:
                self.squash = (float(d_min), (squash_factor - 1) / (d_max - d_min))
            elif d_max > 0:
                raise ValueError(
                    f"`squash_factor`={squash_factor!r} needs at least three distinct number values to set a ratio; "
                    f"this vocabulary has {len(distinct)}. Use squash_factor=None."
                )
        self._values, self._groups, self._distinct = values, groups, distinct
        self._cache: dict[torch.device, dict[str, Tensor]] = {}

    @property
    def needs_logsumexp(self) -> bool:
        """Whether the loss reads the full-vocabulary logsumexp (``gce`` and ``reweigh``)."""
        return self.kind == "gce" or self.reweigh

    def tensors(self, device: torch.device) -> dict[str, Tensor]:
        """Value tables on ``device`` (built once per device)."""
        if device not in self._cache:
            exact = max(abs(v) for v in self._values) <= _EXACT_F32
            vdtype = torch.float32 if exact else torch.float64
            distinct = torch.tensor(self._distinct, dtype=vdtype, device=device)
            rank = {v: i for i, v in enumerate(self._distinct)}
            self._cache[device] = {
                "values": torch.tensor(self._values, dtype=vdtype, device=device),  # (K,)
                "groups": torch.tensor(self._groups, dtype=torch.long, device=device),  # (K,)
                "rank": torch.tensor([rank[v] for v in self._values], device=device),  # (K,) index into distinct
                "distinct": distinct,  # (K',)
                "gaps": (distinct[1:] - distinct[:-1]).float(),  # (K'-1,)
            }
        return self._cache[device]

    def _cost(self, dist: Tensor) -> Tensor:
        """Transport cost of a value distance (float32; squashed when ``squash_factor`` is set)."""
        if self.squash is None:
            return dist.float()
        d_min, slope = self.squash
        return torch.where(dist > 0, 1.0 + (dist - d_min) * slope, 0.0).float()  # nearest wrong value costs 1

    def _regression(self, residual: Tensor) -> Tensor:
        if self.kind == "mse":
            return residual.square()
        if self.kind == "mae":
            return residual.abs()
        return F.huber_loss(residual, torch.zeros_like(residual), reduction="none", delta=self.huber_delta)

    def gaussian_target(self, slot: Tensor) -> Tensor:
        """Eq. 7 label distribution over the number tokens, normalised, within the label's form group.

        Args:
            slot: (M,) index of the label among the number tokens.

        Returns:
            (M, K) float32 rows summing to 1.
        """
        t = self.tensors(slot.device)
        d2 = (t["values"][None, :] - t["values"][slot][:, None]).float().square()  # (M, K)
        logit = (-d2 / (2 * self.sigma**2)).masked_fill(t["groups"][None, :] != t["groups"][slot][:, None], -math.inf)
        return logit.softmax(-1)

    def __call__(self, sub: Tensor, slot: Tensor, lse: Tensor | None = None, target: Tensor | None = None) -> Tensor:
        """Per-position loss.

        Args:
            sub: (M, K) float32 logits of the number tokens.
            slot: (M,) long, index of the label among the number tokens (any valid index on ignored rows).
            lse: (M,) float32 logsumexp over the full vocabulary (``gce`` / ``reweigh`` only).
            target: (M, K) target distribution over the number tokens (``was-cdf`` only; default one-hot).

        Returns:
            (M,) float32 losses.
        """
        t = self.tensors(sub.device)
        values = t["values"]
        y = values[slot]  # (M,)
        if self.kind == "gce":
            return -(self.gaussian_target(slot) * (sub - lse[:, None])).sum(-1)
        log_z = torch.logsumexp(sub, -1)  # (M,)
        prob = torch.exp(sub - log_z[:, None])  # (M, K), softmax over number tokens only
        if self.kind == "was":
            loss = (prob * self._cost((y[:, None] - values[None, :]).abs())).sum(-1)
            center = y
        elif self.kind == "was-cdf":
            mass = sub.new_zeros(sub.shape[0], len(self._distinct)).index_add_(1, t["rank"], prob)  # (M, K')
            if target is None:
                goal = F.one_hot(t["rank"][slot], len(self._distinct)).float()  # (M, K')
            else:
                goal = sub.new_zeros(mass.shape).index_add_(1, t["rank"], target.float())
            cdf_gap = (mass.cumsum(-1) - goal.cumsum(-1))[:, :-1].abs()  # (M, K'-1)
            loss = cdf_gap @ t["gaps"]
            center = (goal * t["distinct"]).sum(-1)  # W1(goal, point mass at a) = E_goal|u - a|: linear in a
        else:
            y_hat = prob.to(values.dtype) @ values  # (M,)
            loss = self._regression((y - y_hat).float())
        if self.reweigh:
            lo, hi = t["distinct"][0], t["distinct"][-1]  # the worst number token is an extreme value
            if self.kind in ("was", "was-cdf"):
                worst = self._cost(torch.maximum(center - lo, hi - center))
            else:
                worst = torch.maximum(self._regression((y - lo).float()), self._regression((y - hi).float()))
            on_numbers = torch.exp(log_z - lse).clamp(max=1.0)  # (M,) probability mass on number tokens
            loss = on_numbers * loss + (1.0 - on_numbers) * worst
        return loss


def _reduce(loss: Tensor, weight: Tensor, reduction: str, shape: torch.Size) -> Tensor:
    """Reduce per-position losses; ``weight`` is 0 off number positions. ``"mean"`` = sum(w * l) / sum(w)."""
    weighted = torch.where(weight != 0, loss * weight, 0.0)
    if reduction == "none":
        return weighted.view(shape)
    total = weighted.sum()
    if reduction == "sum":
        return total
    denom = weight.sum()
    return total / torch.where(denom != 0, denom, 1.0)
