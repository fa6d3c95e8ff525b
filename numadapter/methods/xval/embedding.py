"""xVal input encoding: the [NUM] embedding carries the (normalised) value of its number.

Implements the encoding of Golkar et al., "xVal: A Continuous Number Encoding for Large Language Models"
(docs/papers.md, "xVal"), section 2:

- **multiplicative** (the paper): ``h_emb = h_num * h_text``, i.e. the [NUM] row becomes ``x_norm * e[NUM]``.
- **affine** (numadapter; docs/DESIGN.md, "Pre-RMSNorm models erase multiplicative scale"): the [NUM] row becomes
  ``e[NUM] + x_norm * u`` with a learned direction ``u``. The paper relies on an added absolute position vector before
  the first layer-norm ("Implicit normalization via layer-norm"); pre-RMSNorm models with rotary or relative positions
  (Llama, Granite, Mistral, Qwen2, T5) add none, so ``x * e`` normalises to ``sign(x) * e / rms(e)`` and the magnitude
  of x is erased. The affine form keeps the value as a direction change that survives normalisation.

Values are normalised before use: ``x_norm = (x - xval_center) / xval_scale`` must lie in ``[-xval_clip,
xval_clip]`` (the paper normalises its data into [-5, 5] as a preprocessing step). A value outside is out of range
and raises `NumberOutOfRangeError`; nothing is ever clamped. The tokenizer asks `xval_in_range` first and keeps such
numbers as text when ``out_of_range="text"``.

All arithmetic on values is float64 (the range check) and float32 (features); the result is cast to the embedding
dtype at the end.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import torch
from torch import Tensor, nn

from numadapter.methods.base import NumberSettings
from numadapter.numbers import NumberOutOfRangeError

__all__ = ["XValEmbedding", "denormalize", "fit_normalization", "normalize", "resolve_xval_form", "xval_in_range"]

XVAL_FORMS = ("affine", "multiplicative")
NORMALIZATION_METHODS = ("absmax", "standard")

# Model types whose blocks are pre-RMSNorm (or T5's RMS "layer norm") and that add no position vector to the token
# embedding (rotary or relative positions): the multiplicative form is erased by their first norm.
AFFINE_MODEL_TYPES = frozenset(
    {
        "llama",
        "granite",
        "granitemoe",
        "granitemoeshared",
        "mistral",
        "mixtral",
        "qwen2",
        "qwen2_moe",
        "qwen3",
        "qwen3_moe",
        "gemma",
        "gemma2",
        "gemma3_text",
        "phi3",
        "olmo2",
        "t5",
        "mt5",
        "umt5",
    }
)
# Model types that add an absolute position embedding to the token embedding (the paper's setting).
ABSOLUTE_POSITION_MODEL_TYPES = frozenset(
    {"gpt2", "gpt_neo", "gpt_bigcode", "opt", "bert", "roberta", "xlm-roberta", "distilbert", "bart", "mbart"}
)

# The default RMS of the affine direction u before `XValEmbedding.init_direction` matches it to the embedding
# (0.02 is the usual Hugging Face `initializer_range`).
DEFAULT_DIRECTION_RMS = 0.02


def _as_float64(values: Tensor | Sequence[float] | float) -> Tensor:
    if isinstance(values, Tensor):
        return values.detach().to(torch.float64)
    return torch.as_tensor(values, dtype=torch.float64)


def _stored_as_float32(values: Tensor) -> Tensor:
    """The values exactly as the tokenizer stores them in `num_values` (float32), widened back to float64."""
    return values.to(torch.float32).to(torch.float64)


def _range_error(
    value: float, z: float, center: float, scale: float, clip: float, count: int
) -> NumberOutOfRangeError:
    more = f" ({count - 1} more value(s) are out of range too)" if count > 1 else ""
    return NumberOutOfRangeError(
        f"xVal value {value!r} normalises to {z!r} = ({value!r} - xval_center={center!r}) / xval_scale={scale!r}, "
        f"outside [-xval_clip, xval_clip] = [-{clip!r}, {clip!r}]{more}. Fit `xval_center`/`xval_scale` on your data "
        f"with numadapter.methods.xval.embedding.fit_normalization, raise `xval_clip`, or set out_of_range='text' so "
        f"the tokenizer keeps such numbers as text."
    )


def fit_normalization(
    values: Tensor | Sequence[float],
    method: Literal["absmax", "standard"] = "absmax",
    clip: float = 5.0,
    headroom: float = 1.0,
    limit: float | None = None,
) -> tuple[float, float]:
    """Fits ``(center, scale)`` for xVal from the values of a data set.

    Methods:
        - ``"absmax"``: ``center = 0``, ``scale = max|x| / clip``. Every fitted value lands in ``[-clip, clip]``,
          zero stays zero and signs are kept: the paper's preprocessing ("normalize numbers ... such that they
          fall within the range [-5, 5]").
        - ``"standard"``: ``center = mean(x)``, ``scale = std(x)`` (population std), so the values have unit
          variance (as the paper's temperature data). If some fitted value would still land beyond ``clip``
          standard deviations, the scale is widened to ``max|x - mean| / clip`` so every fitted value is in range.

    With `headroom` > 1 the range reaches that factor beyond the largest value (``max|x| * headroom`` at the clip),
    so that values a sample of the data missed, a little beyond its largest, are numbers too; `limit` (the largest
    magnitude the digit places hold, ``10^int_digits``) caps that reach, never below the largest value itself.

    The values are first rounded to float32, as the tokenizer stores them, and the returned scale is the smallest
    float64 at or above the formula for which every fitted value passes the range check of `normalize` exactly
    (so without headroom the largest value maps to ``clip`` and is accepted). Constant data (zero spread) gets
    ``scale = 1.0``.

    Args:
        values: `(N,)` the numbers of a data set (any shape is flattened); finite, at least one.
        method: ``"absmax"`` or ``"standard"``.
        clip: the normalised range limit (config ``xval_clip``), positive.
        headroom: the factor the range reaches beyond the values (``>= 1``; 1: the largest value at the clip).
        limit: None, or the magnitude past which no value can come (the range reaches no further, unless the
            values themselves do).

    Returns:
        ``(center, scale)`` as Python floats: set them as ``xval_center`` and ``xval_scale`` in the config.

    Raises:
        ValueError: unknown method, empty data, non-finite values or a non-positive clip.
    """
    if method not in NORMALIZATION_METHODS:
        raise ValueError(f"`method` must be one of {list(NORMALIZATION_METHODS)}, got {method!r}.")
    if not (isinstance(clip, (int, float)) and math.isfinite(clip) and clip > 0):
        raise ValueError(f"`clip` (config `xval_clip`) must be a positive finite number, got {clip!r}.")
    if not (isinstance(headroom, (int, float)) and math.isfinite(headroom) and headroom >= 1):
        raise ValueError(f"`headroom` must be a finite number >= 1 (1: no headroom), got {headroom!r}.")
    x = _as_float64(values).reshape(-1)  # (N,)
    if x.numel() == 0:
        raise ValueError("fit_normalization needs at least one value, got an empty collection.")
    if not torch.isfinite(x).all():
        bad = x[~torch.isfinite(x)][0].item()
        raise ValueError(f"fit_normalization needs finite values, got {bad!r}: drop it from the data first.")
    x = _stored_as_float32(x)
    if not torch.isfinite(x).all():
        bad = x[~torch.isfinite(x)][0].item()
        raise ValueError(f"a value overflows float32 ({bad!r}), which is how num_values stores it: drop it first.")
    reach = math.inf if limit is None else float(limit)
    if method == "absmax":
        center = 0.0
        largest = x.abs().max().item()
        spread = max(largest, min(largest * headroom, reach)) / clip
    else:
        center = x.mean().item()
        deviation = (x - center).abs().max().item()
        reach += abs(center)  # no value lies further than limit from zero
        spread = max(x.std(correction=0).item(), max(deviation, min(deviation * headroom, reach)) / clip)
    scale = spread if spread > 0 else 1.0
    # Rounding in (x - center) / scale can land a hair above clip; step the scale up by ulps until it does not.
    while ((x - center) / scale).abs().max().item() > clip:
        scale = math.nextafter(scale, math.inf)
    return float(center), float(scale)


def normalize(
    values: Tensor | Sequence[float] | float,
    center: float,
    scale: float,
    clip: float,
    mask: Tensor | None = None,
) -> Tensor:
    """Maps values to xVal's normalised range: ``(x - center) / scale``, checked against ``[-clip, clip]``.

    The check runs in float64 on the given values (for `num_values`, the float32 numbers the tokenizer stored), the
    same computation as `xval_in_range`, so a number the tokenizer accepted is never refused here.

    Args:
        values: `(...)` raw values (a tensor, a sequence or a float).
        center: config ``xval_center``.
        scale: config ``xval_scale`` (positive).
        clip: config ``xval_clip`` (positive).
        mask: optional `(...)` bool/int tensor; only entries where it is non-zero are checked (rows without a
            number hold a placeholder 0.0 that may well be out of range).

    Returns:
        `(...)` the normalised values: float64 if `values` is float64, else float32.

    Raises:
        NumberOutOfRangeError: a (checked) value is NaN/inf or normalises outside ``[-clip, clip]``; the message
            names the value, the limit and the settings to change.
    """
    if not scale > 0:
        raise ValueError(f"`xval_scale` must be positive, got {scale!r}.")
    out_dtype = torch.float64 if isinstance(values, Tensor) and values.dtype == torch.float64 else torch.float32
    x = _as_float64(values)
    z = (x - center) / scale
    bad = ~(torch.isfinite(z) & (z.abs() <= clip))
    if mask is not None:
        bad = bad & (mask != 0)
    if bad.any():
        idx = bad.nonzero()[0].tolist()
        raise _range_error(x[tuple(idx)].item(), z[tuple(idx)].item(), center, scale, clip, int(bad.sum().item()))
    return z.to(out_dtype)


def denormalize(values: Tensor | Sequence[float] | float, center: float, scale: float) -> Tensor:
    """Inverse of `normalize`: ``x = z * scale + center``, in float64.

    Args:
        values: `(...)` normalised values.
        center: config ``xval_center``.
        scale: config ``xval_scale``.

    Returns:
        `(...)` float64 tensor of values.
    """
    return _as_float64(values) * scale + center


def xval_in_range(value: Any, config: NumberSettings) -> bool:
    """Whether a number can be xVal-encoded under `config` (the tokenizer's test before emitting [NUM]).

    The decision is made on exactly what the model will see: the value rounded to float64, then to float32 (as
    stored in `num_values`), normalised in float64 with ``xval_center`` / ``xval_scale`` and compared with
    ``xval_clip``; `normalize` repeats the same computation, so an accepted number never fails later.

    Args:
        value: the value as it will be stored in `num_values` (``|x|`` when ``sign_policy="text"``): a float, int,
            `decimal.Decimal` or `numadapter.numbers.ExactNumber` (anything with ``to_decimal()``).
        config: a `NumberAdapterConfig` (reads ``xval_center``, ``xval_scale``, ``xval_clip``).

    Returns:
        True if the value is finite in float32 and normalises into ``[-xval_clip, xval_clip]``.
    """
    if hasattr(value, "to_decimal"):
        value = value.to_decimal()
    try:
        as_float = float(value)  # a Decimal beyond float64 gives +-inf
    except OverflowError:  # an int beyond float64
        return False
    stored = _stored_as_float32(torch.tensor(as_float, dtype=torch.float64))
    z = (stored - config.xval_center) / config.xval_scale
    return bool(torch.isfinite(z).item() and abs(z.item()) <= config.xval_clip)


def _config_value(model_config: Any, name: str) -> Any:
    if isinstance(model_config, dict):
        return model_config.get(name)
    return getattr(model_config, name, None)


def resolve_xval_form(config_form: str, model_config: Any) -> str:
    """Resolves ``xval_form="auto"`` to the form suited to an architecture.

    Why: docs/DESIGN.md, "Pre-RMSNorm models erase multiplicative scale".

    ``"affine"`` for models whose embedding output goes straight into an RMS norm with no additive position vector
    (where ``x * e`` normalises to ``sign(x) * e`` and the value is lost), ``"multiplicative"`` (the paper's form)
    otherwise. Detection from the Hugging Face config, in order:

    1. ``model_type`` in `AFFINE_MODEL_TYPES` (llama, granite, mistral, mixtral, qwen2/3, gemma, phi3, t5, mt5,
       umt5, ...): affine.
    2. ``model_type`` in `ABSOLUTE_POSITION_MODEL_TYPES` (gpt2, opt, bert, bart, ...) or
       ``position_embedding_type == "absolute"``: multiplicative (the paper's setting).
    3. Otherwise affine if the config has ``rms_norm_eps`` (pre-RMSNorm decoder) or
       ``relative_attention_num_buckets`` (T5-style relative positions); multiplicative if neither.

    Multimodal configs are resolved on their text config (``get_text_config()``). An explicit ``"affine"`` or
    ``"multiplicative"`` is returned unchanged.

    Args:
        config_form: config ``xval_form``: ``"auto"``, ``"affine"`` or ``"multiplicative"``.
        model_config: the base model's `transformers.PretrainedConfig` (or a dict of its fields).

    Returns:
        ``"affine"`` or ``"multiplicative"``.
    """
    if config_form in XVAL_FORMS:
        return config_form
    if config_form != "auto":
        raise ValueError(f"`xval_form` must be one of ['auto', 'affine', 'multiplicative'], got {config_form!r}.")
    if hasattr(model_config, "get_text_config"):
        model_config = model_config.get_text_config()
    model_type = _config_value(model_config, "model_type")
    if model_type in AFFINE_MODEL_TYPES:
        return "affine"
    if model_type in ABSOLUTE_POSITION_MODEL_TYPES or _config_value(model_config, "position_embedding_type") == (
        "absolute"
    ):
        return "multiplicative"
    if _config_value(model_config, "rms_norm_eps") is not None:
        return "affine"
    if _config_value(model_config, "relative_attention_num_buckets") is not None:
        return "affine"
    return "multiplicative"


class XValEmbedding(nn.Module):
    """The xVal input side: at [NUM] rows the embedding carries the normalised value.

    Forms (see the module docstring): ``"multiplicative"`` ``e[NUM] * x_norm`` (paper, section 2) and
    ``"affine"`` ``e[NUM] + x_norm * u``. Only the affine form has a parameter, the direction ``u`` `(H,)`:
    initialised as a Gaussian draw rescaled to RMS `DEFAULT_DIRECTION_RMS`; the adapter should call
    `init_direction` with the model's embedding matrix (or the [NUM] row) so ``u`` starts with the same RMS as the
    embeddings. Then, for ``u`` orthogonal to ``e[NUM]`` (near enough for a random draw in high dimension), the
    first RMSNorm sees ``e + x u`` with a component along ``u`` of ``sqrt(H) x / sqrt(1 + x^2)``: the same
    saturating curve the paper gets from layer-norm with an added position vector (section 2), which is why the
    values are normalised into a small range.

    Args:
        hidden_size: the embedding width H.
        config: a `NumberAdapterConfig` (reads ``xval_form``, ``xval_center``, ``xval_scale``, ``xval_clip``).
        form: overrides ``config.xval_form``. ``"auto"`` is refused: resolve it with `resolve_xval_form`, which
            needs the model config.
    """

    def __init__(self, hidden_size: int, config: NumberSettings, form: str | None = None) -> None:
        super().__init__()
        form = config.xval_form if form is None else form
        if form == "auto":
            raise ValueError(
                "XValEmbedding needs a concrete form, got xval_form='auto': resolve it first with "
                "numadapter.methods.xval.embedding.resolve_xval_form(config.xval_form, model.config)."
            )
        if form not in XVAL_FORMS:
            raise ValueError(f"`xval_form` must be one of {list(XVAL_FORMS)} (or 'auto'), got {form!r}.")
        if not (isinstance(hidden_size, int) and hidden_size > 0):
            raise ValueError(f"`hidden_size` must be a positive integer, got {hidden_size!r}.")
        self.hidden_size = hidden_size
        self.form = form
        self.center = float(config.xval_center)
        self.scale = float(config.xval_scale)
        self.clip = float(config.xval_clip)
        if form == "affine":
            self.direction = nn.Parameter(torch.empty(hidden_size, dtype=torch.float32))
            self.init_direction(DEFAULT_DIRECTION_RMS)
        else:
            self.register_parameter("direction", None)

    @torch.no_grad()
    def init_direction(self, reference: Tensor | float, generator: torch.Generator | None = None) -> None:
        """Redraws the affine direction ``u`` as a Gaussian vector with the RMS of `reference`.

        Args:
            reference: a target RMS (float) or a tensor whose RMS is matched (the embedding matrix `(V, H)` or the
                [NUM] row `(H,)`; read under a ZeRO-3 gather).
            generator: optional RNG for reproducibility.
        """
        if self.direction is None:
            raise ValueError(f"init_direction only applies to xval_form='affine', this module is {self.form!r}.")
        rms = reference.detach().float().pow(2).mean().sqrt().item() if isinstance(reference, Tensor) else reference
        if not (math.isfinite(rms) and rms > 0):
            raise ValueError(f"the reference RMS for the xVal direction must be positive and finite, got {rms!r}.")
        draw = torch.randn(self.hidden_size, generator=generator, dtype=torch.float32)
        draw = draw / draw.pow(2).mean().sqrt() * rms
        self.direction.copy_(draw.to(self.direction.device, self.direction.dtype))

    def forward(
        self,
        embeds: Tensor,
        num_mask: Tensor,
        num_digits: Tensor | None = None,
        num_sign: Tensor | None = None,
        num_values: Tensor | None = None,
    ) -> Tensor:
        """Writes the values into the [NUM] rows.

        Args:
            embeds: `(B, T, H)` token embeddings.
            num_mask: `(B, T)` 1 at [NUM] rows.
            num_digits: unused (xVal reads the value).
            num_sign: unused: `num_values` already carries the sign when ``sign_policy="feature"`` (and ``|x|``
                with ``sign_policy="text"``, where the minus sign is a text token).
            num_values: `(B, T)` the values (float32), 0.0 on other rows.

        Returns:
            `(B, T, H)` in ``embeds.dtype``; rows with ``num_mask == 0`` are bit-identical to `embeds`.

        Raises:
            NumberOutOfRangeError: a value at a [NUM] row normalises outside ``[-xval_clip, xval_clip]``.
        """
        if num_values is None:
            raise ValueError("XValEmbedding.forward needs `num_values` (B, T): the values of the [NUM] tokens.")
        if num_values.shape != embeds.shape[:2] or num_mask.shape != embeds.shape[:2]:
            raise ValueError(
                f"num_values {tuple(num_values.shape)} and num_mask {tuple(num_mask.shape)} must both be (B, T) = "
                f"{tuple(embeds.shape[:2])} to match embeds {tuple(embeds.shape)}."
            )
        if embeds.shape[-1] != self.hidden_size:
            raise ValueError(
                f"embeds have width {embeds.shape[-1]} but this XValEmbedding was built for {self.hidden_size}."
            )
        mask = num_mask != 0  # (B, T)
        z = normalize(num_values, self.center, self.scale, self.clip, mask=mask).to(torch.float32)
        z = torch.where(mask, z, torch.zeros_like(z)).unsqueeze(-1)  # (B, T, 1)
        e = embeds.to(torch.float32)  # (B, T, H)
        if self.form == "multiplicative":
            features = e * z
        else:
            features = e + z * self.direction.to(device=e.device, dtype=torch.float32)  # (B, T, H)
        return torch.where(mask.unsqueeze(-1), features.to(embeds.dtype), embeds)

    def extra_repr(self) -> str:
        settings = f"center={self.center}, scale={self.scale}, clip={self.clip}"
        return f"hidden_size={self.hidden_size}, form={self.form!r}, {settings}"
