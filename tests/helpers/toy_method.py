"""The toy number method "signed_digits", defined outside numadapter as an outside package would define one.

Each number becomes one [NUM] whose embedding gets a linear map of its place digits and sign added, and a one-output
linear head regresses the value scaled by 10^-int_digits; generation reads the value back rounded to ``frac_digits``
places. Used by `tests/numadapter/methods/test_registry.py` (it registers and trains) and
`tests/numadapter/methods/test_outside_method.py` (the whole product path).
"""

from __future__ import annotations

import torch
from torch import nn

from numadapter.methods import HeadReading, LossInputs, NumberMethod

TOY = "signed_digits"


class SignedDigitsEmbedding(nn.Module):
    """Adds ``W [digits / 9, sign]`` to the [NUM] rows: ``[B, T, H]`` in, ``[B, T, H]`` out."""

    def __init__(self, places: int, hidden: int) -> None:
        super().__init__()
        self.proj = nn.Linear(places + 1, hidden, bias=False)

    def forward(self, embeds, num_mask, num_digits, num_sign=None, num_values=None):
        features = torch.cat([num_digits.float() / 9.0, num_sign.float().unsqueeze(-1)], dim=-1)  # (B, T, P + 1)
        mixed = (embeds.float() + self.proj(features)).to(embeds.dtype)
        return torch.where(num_mask.bool().unsqueeze(-1), mixed, embeds)


class SignedDigitsHead(nn.Module):
    """One linear output: hidden ``[..., H]`` -> the value scaled by ``10^-int_digits``, ``[..., 1]``."""

    def __init__(self, hidden: int, int_digits: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden, 1)
        self.scale = 10.0**int_digits  # a plain number, not a weight: it comes from the config

    def forward(self, hidden):
        return self.linear(hidden)


def place_digits(magnitude: float, int_digits: int, frac_digits: int) -> list[int]:
    """The ``int_digits + frac_digits`` place digits of ``|x| < 10^int_digits``, most significant first."""
    units = round(abs(magnitude) * 10**frac_digits)
    return [int(d) for d in str(units).zfill(int_digits + frac_digits)[-(int_digits + frac_digits) :]]


class SignedDigitsMethod(NumberMethod):
    """The toy method: digits and sign in, the scaled value out (squared error), read back to frac_digits places."""

    def fields(self, config):
        return ("digits", "sign", "values")

    def build_modules(self, config, hidden_size, model_config):
        return SignedDigitsEmbedding(config.num_places, hidden_size), SignedDigitsHead(hidden_size, config.int_digits)

    def head_outputs(self, head, hidden):
        return head(hidden.float()).squeeze(-1)  # (...) scaled values

    def report(self, head, outputs):
        return {"number_values": outputs.double() * head.scale}  # (...) values

    def predict(self, config, head, outputs):
        limit = 10.0**config.int_digits - 10.0**-config.frac_digits
        values = torch.cat([out[:, -1] for out in outputs]).double() * head.scale  # (N,)
        values = (values * 10**config.frac_digits).round().div(10**config.frac_digits).clamp(-limit, limit)
        digits = torch.tensor(
            [place_digits(v, config.int_digits, config.frac_digits) for v in values.tolist()],
            dtype=torch.long,
            device=values.device,
        ).view(len(values), config.num_places)  # (N, P)
        return HeadReading(digits=digits, sign=torch.where(values < 0, -1, 1), values=values)

    def read_numbers(self, config, head, digits, signs, values):
        from numadapter.methods import GeneratedNumber

        out = []
        for row, sign in zip(digits, signs):
            whole = "".join(map(str, row[: config.int_digits])).lstrip("0") or "0"
            frac = "".join(map(str, row[config.int_digits :])).rstrip("0")
            text = ("-" if sign < 0 else "") + whole + ("." + frac if frac else "")
            out.append(GeneratedNumber(value=float(text), text=text))
        return out

    def head_loss(self, inputs: LossInputs):
        b, t = inputs.plan.target_index
        target = inputs.plan.targets.values[b, t].float() / 10.0**inputs.config.int_digits  # (N,)
        return (inputs.outputs - target).pow(2).sum() / inputs.denom
