"""Reading the number head during generation, and turning its prediction into the next step's number features.

When the model emits [NUM] at step t, the number head's output at step t *is* that number (docs/DESIGN.md, "One
function owns each alignment": hidden t scores the number of the token chosen at t):

- FoNE: the digit head's argmax digits and sign (`FoNEDigitHead.predict`), exact; rendered canonically
  (`FoNEDigitHead.to_strings`) and returned as an `ExactNumber`.
- xVal: the regression head's value (`RegressionHead.predict`, float64), rendered with at most ``frac_digits``
  fraction digits (`RegressionHead.to_strings`) and returned as a float.

The same prediction becomes the side-tensor row of that [NUM] when it is fed back as input at step t+1: FoNE gets
its digits (and sign) back, exactly the number the text shows; xVal gets the predicted value itself (float32, as
``num_values`` stores values), as in the xVal paper, so the continuation is conditioned on the head's output and
not on its rounded rendering. An xVal value that normalises outside ``[-xval_clip, xval_clip]`` (or is not
finite) cannot be fed back (the xVal embedding refuses it, and clamping would silently change the number):
`GeneratedNumber.feedable` is False and the decode loop stops that sequence or raises.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from numadapter.config import NumberAdapterConfig
from numadapter.encodings.xval import xval_in_range
from numadapter.heads.digit import DigitHeadOutput, FoNEDigitHead
from numadapter.numbers import ExactNumber
from numadapter.tuner.loss import head_outputs
from numadapter.tuner.side_buffer import NumberInputs


@dataclass
class Prediction:
    """The number head's prediction at the last position of every row (device tensors, not synchronised).

    Attributes:
        digits: FoNE int64 ``[B, P]`` place digits of ``|x|``, most significant first; None for xVal.
        sign: int64 ``[B]`` of +1 / -1 (+1 with ``sign_policy="text"``).
        values: float64 ``[B]``: xVal's denormalised value; FoNE's value computed from the digits (metrics only).
    """

    digits: torch.Tensor | None
    sign: torch.Tensor
    values: torch.Tensor


@dataclass(frozen=True)
class GeneratedNumber:
    """One number the model generated.

    Attributes:
        value: `ExactNumber` (FoNE) or float (xVal).
        text: how it appears in the generated text.
        feedable: whether it can be fed back as the next [NUM] input (False: xVal value out of range).
    """

    value: ExactNumber | float
    text: str
    feedable: bool = True


class NumberReader:
    """Head predictions -> numbers (host) and -> side-tensor rows (device).

    Args:
        config: the adapter config (``encoding``, digit places, xVal normalisation).
        head: the adapter's number head (`FoNEDigitHead` or `RegressionHead`).
    """

    def __init__(self, config: NumberAdapterConfig, head: torch.nn.Module) -> None:
        self.config = config
        self.head = head
        self.places = config.num_places
        exponents = torch.arange(config.int_digits - 1, -config.frac_digits - 1, -1, dtype=torch.float64)
        self._place_values = torch.pow(10.0, exponents)  # (P,): 10^(m-1) ... 10^(-n)

    # -- device side ------------------------------------------------------------------------------------------
    def predict(self, hidden: torch.Tensor, rows: list[int]) -> Prediction:
        """The head's prediction for `rows` from the captured LM-head input at the last position.

        The head runs on one row at a time: it computes in float32, and a matrix product over a different number
        of rows can round differently, so a prompt's numbers would otherwise depend on the other prompts of its
        batch (and the cached path differ from the uncached one). Only rows that emitted [NUM] are read.

        Args:
            hidden: ``[B, T, H]`` the LM-head input (T = 1 in cached steps).
            rows: the rows to read.

        Returns:
            A `Prediction` over all B rows (rows not in `rows` hold digits 0, sign +1, value 0).
        """
        batch = hidden.shape[0]
        index = torch.tensor(rows, dtype=torch.long, device=hidden.device)
        outputs = [head_outputs(self.head, hidden[row : row + 1, -1:]) for row in rows]  # each (1, 1, ...)
        if self.config.encoding == "fone":
            logits = torch.cat([out["digit"].digit_logits[:, -1] for out in outputs])  # (N, P, 10)
            sign_logits = None
            if outputs[0]["digit"].sign_logits is not None:
                sign_logits = torch.cat([out["digit"].sign_logits[:, -1] for out in outputs])  # (N, 2)
            digits, sign = self.head.predict(DigitHeadOutput(digit_logits=logits, sign_logits=sign_logits))
            values = (digits.to(torch.float64) * self._place_values.to(digits.device)).sum(-1) * sign  # (N,)
            full_digits = torch.zeros(batch, self.places, dtype=torch.long, device=hidden.device)
            full_digits.index_copy_(0, index, digits)
        else:
            values = torch.cat([self.head.predict(out["pred"][:, -1]) for out in outputs]).to(torch.float64)  # (N,)
            sign = torch.ones_like(values, dtype=torch.long)
            if self.config.sign_policy == "feature":
                sign = torch.where(values < 0, -1, 1)
            full_digits = None
        full_sign = torch.ones(batch, dtype=torch.long, device=hidden.device).index_copy_(0, index, sign.long())
        full_values = torch.zeros(batch, dtype=torch.float64, device=hidden.device).index_copy_(0, index, values)
        return Prediction(digits=full_digits, sign=full_sign, values=full_values)

    def side_row(self, prediction: Prediction, fed: torch.Tensor, rows: list[int]) -> NumberInputs | None:
        """The side-tensor row ``[B, 1]`` of the tokens fed at the next step.

        Args:
            prediction: the head's prediction at the step that chose `fed`.
            fed: int64 ``[B]`` the tokens fed next.
            rows: the rows whose fed token is [NUM] (known on the host), ascending.

        Returns:
            `NumberInputs` of shape ``[B, 1]`` (the prediction on `rows`, zeros elsewhere; ``index`` set from
            `rows`, so no device-to-host sync is needed), or None when `rows` is empty.
        """
        if not rows:
            return None
        batch, device = fed.shape[0], fed.device
        index = torch.tensor(rows, dtype=torch.long, device=device)  # (N,)
        is_number = torch.zeros(batch, dtype=torch.bool, device=device).index_fill_(0, index, True)  # (B,)
        mask = is_number.long().unsqueeze(1)  # (B, 1)
        if prediction.digits is not None:
            digits = (prediction.digits * mask).unsqueeze(1)  # (B, 1, P)
        else:
            digits = torch.zeros(batch, 1, self.places, dtype=torch.long, device=device)
        values = torch.where(is_number, prediction.values, 0.0).to(torch.float32).unsqueeze(1)  # (B, 1)
        return NumberInputs(
            mask=mask,
            digits=digits,
            sign=prediction.sign.unsqueeze(1) * mask,
            values=values,
            has_numbers=True,
            index=(index, torch.zeros_like(index)),
        )

    # -- host side --------------------------------------------------------------------------------------------
    def numbers(self, prediction: Prediction, rows: list[int]) -> dict[int, GeneratedNumber]:
        """The numbers of `rows` on the host (one device-to-host copy).

        Args:
            prediction: the head's prediction.
            rows: the rows that emitted [NUM].

        Returns:
            row -> `GeneratedNumber`.
        """
        index = torch.tensor(rows, dtype=torch.long, device=prediction.sign.device)
        if prediction.digits is not None:
            both = torch.cat((prediction.digits, prediction.sign.unsqueeze(1)), dim=1).index_select(0, index).tolist()
            digits, signs = [row[:-1] for row in both], [row[-1] for row in both]  # (N, P), (N,)
            texts = FoNEDigitHead.to_strings(digits, signs, self.config.int_digits, self.config.frac_digits)
            out = {}
            for row, row_digits, sign, text in zip(rows, digits, signs, texts):
                value = ExactNumber.from_place_digits(
                    row_digits, self.config.int_digits, self.config.frac_digits, -1 if sign < 0 else 1
                )
                out[row] = GeneratedNumber(value=value, text=text)
            return out
        out = {}
        for row, value in zip(rows, prediction.values.index_select(0, index).tolist()):
            text = self.head.to_strings([value])[0] if math.isfinite(value) else str(value)
            out[row] = GeneratedNumber(value=value, text=text, feedable=xval_in_range(value, self.config))
        return out

    def out_of_range_message(self, value: float) -> str:
        """Why an xVal value cannot be fed back, and what to change."""
        cfg = self.config
        z = (value - cfg.xval_center) / cfg.xval_scale if math.isfinite(value) else value
        return (
            f"the xVal head predicted {value!r}, which normalises to {z!r} = (value - xval_center={cfg.xval_center!r})"
            f" / xval_scale={cfg.xval_scale!r}, outside [-xval_clip, xval_clip] = [-{cfg.xval_clip!r}, "
            f"{cfg.xval_clip!r}], so it cannot be fed back as the next [NUM] (it is never clamped). Fit "
            "`xval_center`/`xval_scale` to the data the model generates or raise `xval_clip` (and retrain)."
        )
