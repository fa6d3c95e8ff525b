"""xVal number head: a small MLP from the hidden state to one normalised scalar, trained with MSE.

Implements the number head of Golkar et al., "xVal: A Continuous Number Encoding for Large Language Models"
(docs/papers.md, "xVal"): section 2 ("a new number head with a scalar output, trained via mean squared error
(MSE) loss") and appendix A (the head is an MLP with one hidden layer of width equal to the embedding dimension,
with biases; GPT-2 style, hence GELU). The head predicts the *normalised* value
``z = (x - xval_center) / xval_scale`` and the loss is the MSE in that space, as in the paper; `predict` maps back.

With ``xval_context_numbers = K > 0`` (numadapter) the head also reads the K latest numbers before the position
(`numadapter.methods.context`, the same slots FoNE's context head reads) and adds a combination of them whose
weights it reads from the hidden state: ``z = mlp(h) + sum_k w_k(h) z_k``, with ``z_k`` the normalised k-th latest
number and ``w(h) = b + W h / sqrt(H)``. ``b`` starts at (1, 0, ..., 0) and ``W`` at zero, so the head starts by
writing the latest number plus the read-out (a series' next value is near its last; a conversion is a factor away);
the ``1 / sqrt(H)`` keeps one optimizer step on ``W`` from moving the weights by more than about ``lr * sqrt(H)``,
where a value of 4 (in the normalised space) read with a weight off by 0.01 is already 1% off. A unit conversion
(``km = 1.609344 * miles``), a temperature scale, a rate or a next value of a series is then a constant or a few
weights, learnt in a few steps, instead of a magnitude the backbone must carry in its hidden state to 1%. The trainers
then start it where the training answers put it (`fit_start`, `RegressionHead.start_at`, from
`numadapter.training.xval_fit`): the least-squares offset and weights, so the optimizer's step size does not set the
precision the weights are held to.

xVal is approximate by nature: a float prediction, not exact digits. `to_strings` renders it with at most
``frac_digits`` fraction digits (rounded half-to-even), trailing zeros stripped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from numadapter.methods.base import NumberSettings
from numadapter.methods.context import ContextNumbers
from numadapter.methods.xval.embedding import denormalize, normalize


class RegressionHead(nn.Module):
    """MLP ``H -> W -> 1``: ``Linear(H, W) -> GELU -> Linear(W, 1)``, both with bias (xVal appendix A).

    Computation is float32 whatever the parameter dtype (weights are cast on the fly), so the head works on a bf16
    or fp16 backbone and its parameters may be kept in float32.

    Args:
        hidden_size: the backbone's hidden width H.
        config: a `NumberAdapterConfig` (reads ``xval_head_hidden`` (W; None means H), ``xval_center``,
            ``xval_scale``, ``xval_clip``, ``frac_digits``).
    """

    def __init__(self, hidden_size: int, config: NumberSettings) -> None:
        super().__init__()
        if not (isinstance(hidden_size, int) and hidden_size > 0):
            raise ValueError(f"`hidden_size` must be a positive integer, got {hidden_size!r}.")
        width = config.xval_head_hidden if config.xval_head_hidden is not None else hidden_size
        self.hidden_size = hidden_size
        self.width = int(width)
        self.center = float(config.xval_center)
        self.scale = float(config.xval_scale)
        self.clip = float(config.xval_clip)
        self.frac_digits = int(config.frac_digits)
        self.int_digits = int(config.int_digits)
        self.context_numbers = int(getattr(config, "xval_context_numbers", 0) or 0)
        self.fc1 = nn.Linear(hidden_size, self.width)
        self.fc2 = nn.Linear(self.width, 1)
        self.weights: nn.Linear | None = None
        if self.context_numbers:
            self.weights = nn.Linear(hidden_size, self.context_numbers)  # w(h): one weight per context slot
            nn.init.zeros_(self.weights.weight)
            with torch.no_grad():
                self.weights.bias.zero_()
                self.weights.bias[0] = 1.0  # start from the latest number

    def forward(self, hidden: Tensor, context: ContextNumbers | None = None) -> Tensor:
        """Predicts the normalised value.

        Args:
            hidden: `(N, H)` hidden states at the positions whose next token is a [NUM] (any leading shape
                `(..., H)` works, e.g. `(B, T, H)`).
            context: with ``xval_context_numbers = K > 0``, the K latest numbers before each position
                (`ContextNumbers` with ``digits (..., K, P)``, ``sign`` and ``valid (..., K)``); None reads the
                hidden state only.

        Returns:
            `(N,)` (or `(...)`) float32 normalised predictions ``z``.
        """
        if hidden.shape[-1] != self.hidden_size:
            raise ValueError(
                f"hidden states have width {hidden.shape[-1]}, this RegressionHead was built for {self.hidden_size}."
            )
        h = hidden.to(torch.float32)
        x = F.linear(h, self.fc1.weight.float(), self.fc1.bias.float())  # (N, W)
        x = F.gelu(x)
        z = F.linear(x, self.fc2.weight.float(), self.fc2.bias.float()).squeeze(-1)  # (N,)
        if self.weights is None or context is None:
            return z
        weights = F.linear(h, self.weights.weight.float()) / math.sqrt(self.hidden_size)  # (N, K)
        weights = weights + self.weights.bias.float()
        return z + (weights * self.context_values(context)).sum(-1)  # (N,)

    def context_values(self, context: ContextNumbers) -> Tensor:
        """`(..., K)` float32 the normalised values ``(x_k - xval_center) / xval_scale`` of the context slots (0 in
        empty slots). Computed from the exact place digits in float64 (a 9-digit number is exact there), so no
        clip applies: a number the head reads may lie outside the range a [NUM] carries."""
        places = context.digits.shape[-1]
        exponents = torch.arange(self.int_digits - 1, self.int_digits - 1 - places, -1, dtype=torch.float64)
        place_values = torch.pow(10.0, exponents).to(context.digits.device)  # (P,)
        values = (context.digits.to(torch.float64) * place_values).sum(-1) * context.sign.to(torch.float64)  # (.., K)
        z = (values - self.center) / self.scale
        return torch.where(context.valid, z, torch.zeros_like(z)).to(torch.float32)

    @torch.no_grad()
    def start_at(self, offset: float, weights: Sequence[float]) -> None:
        """Makes the head write ``offset + sum_k weights[k] z_k`` (normalised units) whatever the hidden state: the
        weights' bias set to `weights`, their hidden-state part left as it is (zero when fresh), and the read-out
        MLP a constant `offset` (its output layer's weight zeroed). `fit_start` gives both from training answers.

        Raises:
            ValueError: the head reads no context numbers, or `weights` is not one per slot.
        """
        if self.weights is None or len(weights) != self.context_numbers:
            raise ValueError(
                f"start_at needs one weight per context slot (xval_context_numbers={self.context_numbers}), got "
                f"{len(weights)}."
            )
        self.weights.bias.copy_(torch.as_tensor(list(weights), dtype=self.weights.bias.dtype))
        self.fc2.weight.zero_()
        self.fc2.bias.fill_(float(offset))

    def normalize_targets(self, target_values: Tensor, mask: Tensor | None = None) -> Tensor:
        """`(N,)` raw values -> `(N,)` float32 normalised targets (range-checked where `mask` is set)."""
        return normalize(target_values, self.center, self.scale, self.clip, mask=mask).to(torch.float32)

    def loss(
        self,
        pred: Tensor,
        target_values: Tensor,
        mask: Tensor | None = None,
        reduction: Literal["mean", "sum", "none"] = "mean",
    ) -> Tensor:
        """MSE between normalised predictions and normalised targets (xVal section 2).

        Args:
            pred: `(N,)` output of `forward`.
            target_values: `(N,)` raw target values (``num_values`` of the [NUM] tokens being predicted).
            mask: optional `(N,)`; entries where it is 0 do not count (and are not range-checked).
            reduction: ``"mean"`` over counted entries (0 with the graph kept when none count), ``"sum"`` (for
                a trainer that divides by ``num_items_in_batch``), or ``"none"`` (`(N,)`, 0 where masked).

        Returns:
            A float32 scalar, or `(N,)` for ``reduction="none"``.
        """
        if pred.shape != target_values.shape:
            raise ValueError(
                f"pred {tuple(pred.shape)} and target_values {tuple(target_values.shape)} must have the same shape."
            )
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"`reduction` must be 'mean', 'sum' or 'none', got {reduction!r}.")
        target = self.normalize_targets(target_values, mask)
        err = (pred.to(torch.float32) - target.to(pred.device)).pow(2)  # (N,)
        if mask is not None:
            err = torch.where(mask != 0, err, torch.zeros_like(err))
        if reduction == "none":
            return err
        if reduction == "sum":
            return err.sum()
        count = err.numel() if mask is None else int((mask != 0).sum().item())
        return err.sum() / max(count, 1)

    def predict(self, pred: Tensor) -> Tensor:
        """Normalised predictions -> values: ``z * xval_scale + xval_center``.

        Args:
            pred: `(N,)` output of `forward`.

        Returns:
            `(N,)` float64 values (not clamped; a value beyond ``xval_clip`` is reported as predicted).
        """
        return denormalize(pred.detach(), self.center, self.scale)

    def to_strings(self, values: Tensor | Sequence[float], frac_digits: int | None = None) -> list[str]:
        """Renders predicted values as number text.

        Each float64 value is taken at its shortest round-trip decimal form (``repr``), rounded half-to-even to
        `frac_digits` fraction digits, printed without exponent, trailing fraction zeros and a lone point stripped;
        ``-0`` becomes ``0``. Examples with ``frac_digits=2``: 3.14159 -> "3.14", 2.5 -> "2.5", 1e20 ->
        "100000000000000000000", -0.001 -> "0".

        Args:
            values: `(N,)` values from `predict`.
            frac_digits: at most this many fraction digits (default: config ``frac_digits``).

        Returns:
            N strings.

        Raises:
            ValueError: a value is NaN or infinite (a diverged prediction cannot be rendered as a number).
        """
        digits = self.frac_digits if frac_digits is None else frac_digits
        if not (isinstance(digits, int) and digits >= 0):
            raise ValueError(f"`frac_digits` must be a non-negative integer, got {digits!r}.")
        flat = values.detach().to(torch.float64).reshape(-1).tolist() if isinstance(values, Tensor) else values
        return [format_value(float(v), digits) for v in flat]


def format_value(value: float, frac_digits: int) -> str:
    """One value as text with at most `frac_digits` fraction digits (see `RegressionHead.to_strings`)."""
    if not math.isfinite(value):
        raise ValueError(
            f"cannot render the xVal prediction {value!r} as a number: the number head produced a non-finite value."
        )
    exact = Decimal(repr(value))
    quantum = Decimal(1).scaleb(-frac_digits)
    with localcontext() as ctx:
        # Enough precision for every integer digit plus the kept fraction digits (the default 28 is too few for 1e30).
        ctx.prec = max(28, exact.adjusted() + frac_digits + 2)
        rounded = exact.quantize(quantum, rounding=ROUND_HALF_EVEN)
    text = format(rounded, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    if text in ("-0", ""):
        text = "0"
    return text


def fit_start(contexts: Sequence[Sequence[float]], targets: Sequence[float], count: int) -> tuple[float, list[float]]:
    """The least-squares start of the head's combination: ``(offset, weights)`` minimising
    ``sum_i (targets[i] - offset - sum_k weights[k] contexts[i][k])^2`` (all normalised values), with a ridge of
    1e-6 per answer so that collinear or empty slots get small weights instead of a singular system.

    A conversion by a constant (``km = 1.609344 miles``), an affine scale (Fahrenheit -> Celsius) or a linear
    forecast of a series is then exact (or the best linear one) before the first step, where the optimizer would
    otherwise walk the weights there and keep them only to about its step size.

    Args:
        contexts: one row per answer: the normalised values of the numbers before it, most recent first, at most
            `count` (fewer where fewer came before; the missing slots read 0, as `context_values` gives them).
        targets: the answers' normalised values.
        count: K, ``xval_context_numbers``.

    Returns:
        ``(offset, [w_1 .. w_K])``.

    Raises:
        ValueError: fewer answers than unknowns (K + 1), or rows and targets of different lengths.
    """
    if len(contexts) != len(targets):
        raise ValueError(f"fit_start: {len(contexts)} context rows for {len(targets)} targets.")
    if len(targets) < count + 1:
        raise ValueError(f"fit_start needs at least K + 1 = {count + 1} answers with a number before them, got "
                         f"{len(targets)}.")  # fmt: skip
    rows = [[1.0, *row[:count], *[0.0] * (count - len(row[:count]))] for row in contexts]
    x = torch.tensor(rows, dtype=torch.float64)  # (N, 1 + K)
    y = torch.tensor(list(targets), dtype=torch.float64)  # (N,)
    gram = x.T @ x + 1e-6 * len(targets) * torch.eye(count + 1, dtype=torch.float64)
    solution = torch.linalg.solve(gram, x.T @ y)  # (1 + K,)
    return float(solution[0]), solution[1:].tolist()
