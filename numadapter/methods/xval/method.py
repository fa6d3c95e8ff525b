"""`XValMethod`: ``encoding="xval"`` (xVal paper): one [NUM] per number carrying its normalised value, and a
regression head (MSE) that writes the value back in generation."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from numadapter.methods.base import GeneratedNumber, HeadReading, LossInputs, NumberMethod, NumberSettings

# Config fields the tokenizer applies (the range test) and the model reads (the normalisation).
XVAL_FIELDS = ("xval_center", "xval_scale", "xval_clip")


class XValMethod(NumberMethod):
    """The xVal number method (see the module docstring)."""

    def fields(self, config: NumberSettings) -> tuple[str, ...]:
        if self.context_size(config):  # the head reads the numbers before it from their exact digits
            return ("values", "digits", "sign")
        return ("values",)

    def context_size(self, config: NumberSettings) -> int:
        return int(getattr(config, "xval_context_numbers", 0) or 0)

    def head_outputs(self, head: nn.Module, hidden: torch.Tensor, context: Any = None) -> Any:
        return head(hidden, context)

    def writes_without_context(self, config: NumberSettings) -> bool:
        return not self.context_size(config)  # with its context, the read-out alone writes no number

    def digit_answer_share(self, config: NumberSettings) -> float:
        return float(getattr(config, "xval_digit_answers", 0.0) or 0.0)

    def fits_normalisation(self, config: NumberSettings) -> bool:
        return getattr(config, "xval_fit", None) is not None and (config.xval_center, config.xval_scale) == (0.0, 1.0)

    def matched_fields(self, config: NumberSettings) -> tuple[str, ...]:
        return XVAL_FIELDS

    def accepts(self, value: float, config: NumberSettings) -> bool:
        return abs((value - config.xval_center) / config.xval_scale) <= config.xval_clip

    def range_error(self, value: float, config: NumberSettings) -> str:
        z = abs((value - config.xval_center) / config.xval_scale)
        return (
            f"normalises to |(x - xval_center) / xval_scale| = {z:.6g}"
            f" > xval_clip={config.xval_clip}: adjust `xval_center`/`xval_scale` (fit_normalization) or `xval_clip`, "
            "or set out_of_range='text'."
        )

    def mostly_text_warning(self, config: NumberSettings, refused: Sequence[str], total: int) -> str | None:
        center, scale, clip = config.xval_center, config.xval_scale, config.xval_clip
        carried = "|x|" if config.sign_policy == "text" else "x"
        return (
            f"xVal left {len(refused)} of the {total} numbers of a batch as text (e.g. {refused[0]!r}): with "
            f"xval_center={center:g}, xval_scale={scale:g}, xval_clip={clip:g} a [NUM] carries only {carried} in "
            f"[{center - clip * scale:g}, {center + clip * scale:g}] (|(x - xval_center) / xval_scale| <= xval_clip). "
            "Fit xval_center and xval_scale to your numbers (numadapter.methods.xval.embedding.fit_normalization) or "
            "raise xval_scale; out_of_range='error' raises instead. This warning is shown once per NumberTokenizer."
        )

    def build_modules(
        self, config: NumberSettings, hidden_size: int, model_config: Any
    ) -> tuple[nn.Module, nn.Module]:
        from numadapter.methods.xval.embedding import XValEmbedding, resolve_xval_form
        from numadapter.methods.xval.head import RegressionHead

        form = resolve_xval_form(config.xval_form, model_config)
        return XValEmbedding(hidden_size, config, form=form), RegressionHead(hidden_size, config)

    def init_from_row(self, embedding: nn.Module | None, head: nn.Module | None, rms: float) -> None:
        if embedding.direction is not None:  # the affine form's learned direction u
            embedding.init_direction(rms)

    def report(self, head: nn.Module, outputs: torch.Tensor) -> dict[str, torch.Tensor | None]:
        return {"number_values": head.predict(outputs)}  # (...) denormalised, float64

    def head_loss(self, inputs: LossInputs) -> torch.Tensor:
        b, t = inputs.plan.target_index
        summed = inputs.head.loss(inputs.outputs, inputs.plan.targets.values[b, t], reduction="sum")  # (N,) preds
        return summed / inputs.denom

    def predict(self, config: NumberSettings, head: nn.Module, outputs: list[torch.Tensor]) -> HeadReading:
        values = torch.cat([head.predict(out[:, -1]) for out in outputs]).to(torch.float64)  # (N,)
        sign = torch.ones_like(values, dtype=torch.long)
        if config.sign_policy == "feature":
            sign = torch.where(values < 0, -1, 1)
        digits = None
        if self.context_size(config):  # a generated number joins the context as its text reads: rounded places
            digits = place_digits(values, config)
        return HeadReading(digits=digits, sign=sign, values=values)

    def read_numbers(
        self, config: NumberSettings, head: nn.Module, digits: list[list[int]] | None, signs: list[int],
        values: list[float],
    ) -> list[GeneratedNumber]:  # fmt: skip
        from numadapter.methods.xval.embedding import xval_in_range

        out = []
        for value in values:
            text = head.to_strings([value])[0] if math.isfinite(value) else str(value)
            feedable = xval_in_range(value, config)
            if feedable and self.context_size(config):  # it is read back from its place digits: they must hold it
                feedable = _fits_places(text, config)
            out.append(GeneratedNumber(value=value, text=text, feedable=feedable))
        return out

    def feedback_error(self, config: NumberSettings, value: Any) -> str:
        z = (value - config.xval_center) / config.xval_scale if math.isfinite(value) else value
        return (
            f"the xVal head predicted {value!r}, which normalises to {z!r} = (value - xval_center="
            f"{config.xval_center!r}) / xval_scale={config.xval_scale!r}, outside [-xval_clip, xval_clip] = "
            f"[-{config.xval_clip!r}, {config.xval_clip!r}], so it cannot be fed back as the next [NUM] (it is never "
            "clamped). Fit `xval_center`/`xval_scale` to the data the model generates or raise `xval_clip` (and "
            "retrain)."
        )


def place_digits(values: torch.Tensor, config: NumberSettings) -> torch.Tensor:
    """`(N, P)` int64 the place digits of ``|values|`` `(N,)` rounded to ``frac_digits`` (what the rendered text
    reads), most significant first; zeros for a value beyond ``int_digits`` places or not finite (never fed back:
    `XValMethod.read_numbers` marks it not feedable)."""
    scaled = torch.round(values.abs().to(torch.float64) * 10.0**config.frac_digits)  # (N,) units of the last place
    places = config.int_digits + config.frac_digits
    fits = torch.isfinite(scaled) & (scaled < 10.0**places)
    units = torch.where(fits, scaled, torch.zeros_like(scaled)).to(torch.long)  # (N,)
    powers = 10 ** torch.arange(places - 1, -1, -1, device=values.device, dtype=torch.long)  # (P,)
    return torch.div(units[:, None], powers, rounding_mode="floor") % 10  # (N, P)


def _fits_places(text: str, config: NumberSettings) -> bool:
    from numadapter.numbers import ExactNumber

    return ExactNumber.parse(text).fits(config.int_digits, config.frac_digits)
