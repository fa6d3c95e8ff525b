"""`cross_entropy_and_ntl`: CE and NTL in one autograd node from one logsumexp (what the trainers use)."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from numadapter.ntl.module import NTLoss
from numadapter.ntl.value_loss import _check_choice


def _rows_per_chunk(logits: Tensor) -> int:
    """Rows per chunk: bounds float32 temporaries (64 MB on CPU, 512 MB elsewhere) with few, large kernels."""
    budget = 2**24 if logits.device.type == "cpu" else 2**27  # elements
    return max(1, budget // max(1, logits.shape[-1]))


def _logsumexp_rows(logits: Tensor) -> Tensor:
    """(N, V) -> (N,) float32 logsumexp, chunked over rows (no [N, V] float32 temporary)."""
    out = torch.empty(logits.shape[0], dtype=torch.float32, device=logits.device)
    step = _rows_per_chunk(logits)
    for i in range(0, logits.shape[0], step):
        torch.logsumexp(logits[i : i + step].float(), -1, out=out[i : i + step])
    return out


def _scaled_softmax(logits: Tensor, lse: Tensor, scale: Tensor) -> Tensor:
    """(N, V) gradient ``softmax(logits) * scale[:, None]`` in the logits' dtype, computed chunk by chunk."""
    grad = torch.empty_like(logits)
    step = _rows_per_chunk(logits)
    for i in range(0, logits.shape[0], step):
        rows = slice(i, i + step)
        if logits.dtype == torch.float32:
            chunk = torch.sub(logits[rows], lse[rows, None], out=grad[rows])
            chunk.exp_().mul_(scale[rows, None])
        else:
            grad[rows] = (logits[rows].float() - lse[rows, None]).exp_().mul_(scale[rows, None])
    return grad


class _CrossEntropyWithNTL(torch.autograd.Function):
    """CE and NTL from one logsumexp; backward writes one dense gradient and adds NTL's (N, K) part in place."""

    @staticmethod
    def forward(ctx, logits, labels, ntl, ce_mean, ignore_index, loss_weights, target):  # type: ignore[override]
        lse = _logsumexp_rows(logits)  # (N,)
        shaped, labels = labels, labels.reshape(-1)  # (B, T) for NTL's number runs, (N,) for CE
        valid = labels != ignore_index
        safe = torch.where(valid, labels, 0)  # (N,) other negative ids fail in gather, as in F.cross_entropy
        picked = logits.gather(1, safe[:, None]).squeeze(1).float()
        denom = valid.sum().clamp(min=1).float() if ce_mean else torch.ones((), device=logits.device)
        ce = torch.where(valid, lse - picked, 0.0).sum() / denom
        ctx.graph = None
        ntl_value = torch.zeros((), device=logits.device)
        if ntl is not None:
            ids, _ = ntl._tables(logits.device)
            with torch.enable_grad():
                sub = logits.index_select(1, ids).float().requires_grad_(True)  # (N, K) leaf
                lse_leaf = lse.clone().requires_grad_(True) if ntl.value_loss.needs_logsumexp else None
                value = ntl._loss_from_columns(sub, lse_leaf, shaped, loss_weights, target)
            ctx.graph = (value, sub, lse_leaf, ids)
            ntl_value = value.detach()
        ctx.save_for_backward(logits, lse, valid, safe, denom)
        return ce, ntl_value

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_ce, grad_ntl):  # type: ignore[override]
        logits, lse, valid, safe, denom = ctx.saved_tensors
        ce_scale = torch.where(valid, grad_ce.float() / denom, 0.0)  # (N,) d loss / d lse from CE
        row_scale, grad_sub = ce_scale, None
        if ctx.graph is not None and ctx.graph[0].requires_grad:
            value, sub, lse_leaf, ids = ctx.graph
            inputs = (sub,) if lse_leaf is None else (sub, lse_leaf)
            grads = torch.autograd.grad(value, inputs, grad_ntl.float(), allow_unused=True)
            grad_sub = grads[0]
            if lse_leaf is not None and grads[1] is not None:
                row_scale = row_scale + grads[1]  # d lse / d logits = softmax: folds into the same pass
        grad = _scaled_softmax(logits, lse, row_scale)  # (N, V)
        rows = torch.arange(logits.shape[0], device=logits.device)
        grad.index_put_((rows, safe), (-ce_scale).to(grad.dtype), accumulate=True)
        if grad_sub is not None:
            grad.index_add_(1, ids, grad_sub.to(grad.dtype))
        ctx.graph = None
        return grad, None, None, None, None, None, None


def cross_entropy_and_ntl(
    logits: Tensor,
    labels: Tensor,
    ntl: NTLoss | None,
    *,
    ce_reduction: str = "mean",
    ignore_index: int | None = None,
    loss_weights: Tensor | None = None,
    target_probs: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Cross-entropy and NTL in one pass: the fast path for trainers (``loss = ce + lambda * ntl``).

    Equal to ``(F.cross_entropy(logits.flatten(0, -2), labels.flatten(), ignore_index=ntl.ignore_index,
    reduction=ce_reduction), ntl(logits, labels, loss_weights))`` in value and gradient (tested), but the
    vocabulary is read for one logsumexp, no log-probability tensor is stored, and backward writes a single
    ``[N, V]`` gradient. CE is computed in float32; ``"mean"`` over zero valid labels gives 0 (torch gives NaN).

    Args:
        logits: (B, T, V) (any leading shape), labels: (B, T), aligned (no shift inside).
        ntl: the NTL to add, or None for CE alone (the second output is then a constant 0).
        ce_reduction: ``"mean"`` over non-ignored labels or ``"sum"`` (divide by ``num_items_in_batch`` yourself).
        ignore_index: label id CE skips; defaults to ``ntl.ignore_index`` (-100 without NTL). Must agree with it.
        loss_weights, target_probs: as `NTLoss.forward`. NTL's reduction must be ``"mean"`` or ``"sum"``.

    Returns:
        ``(ce, ntl)`` float32 scalars, each with its own gradient.
    """
    _check_choice("ce_reduction", ce_reduction, ("mean", "sum"))
    default = -100 if ntl is None else ntl.ignore_index
    if ignore_index is not None and ignore_index != default and ntl is not None:
        raise ValueError(
            f"`ignore_index`={ignore_index} differs from the NTL's ignore_index={default}; build NTLoss with "
            f"ignore_index={ignore_index}."
        )
    ignore_index = default if ignore_index is None else ignore_index
    if ntl is not None:
        if ntl.reduction == "none":
            raise ValueError("cross_entropy_and_ntl needs ntl.reduction 'mean' or 'sum', got 'none'.")
        ntl._check(logits, labels, loss_weights, target_probs)
    elif tuple(labels.shape) != tuple(logits.shape[:-1]):
        raise ValueError(
            f"`labels` {tuple(labels.shape)} must match `logits` {tuple(logits.shape)} minus the last dim."
        )
    flat = logits.reshape(-1, logits.shape[-1])  # (N, V)
    target = None if target_probs is None else target_probs.reshape(-1, target_probs.shape[-1])
    return _CrossEntropyWithNTL.apply(flat, labels, ntl, ce_reduction == "mean", ignore_index, loss_weights, target)
