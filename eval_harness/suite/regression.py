"""The suite's regression families beyond miles -> km: a temperature scale and a forecast of a public time series.

- `fahrenheit_celsius`: ``C = (F - 32) * 5 / 9`` with F from 32.0 to 999.9 (one decimal), rounded to two decimals: an
  affine conversion whose constants the prompt never writes.
- `sst_rows`: the monthly sea surface temperature of the Niño 1+2 region (NOAA, public domain; `DATA/elnino`): the
  last 12 months and the name of the next month as the prompt, its value as the answer. Targets in 1951-1999 train,
  2000-2010 are held out, so no held-out month is ever seen in training.

`repeat_last` is the forecast any model must beat: the latest value of the prompt, scored like an arm's answers.
"""

from __future__ import annotations

import csv
import random
import re
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")  # fmt: skip
# the first year whose months are held out
HELD_FROM = 2000


def _text(value: Decimal) -> str:
    written = format(value.normalize(), "f")
    return "0" if written in ("-0", "0") else written


def fahrenheit_celsius(rng: random.Random) -> tuple[str, str]:
    """One row: ``("Convert 98.6 degrees Fahrenheit to Celsius:", " 37")``."""
    fahrenheit = Decimal(rng.randint(320, 9999)) / 10
    celsius = ((fahrenheit - 32) * 5 / 9).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return f"Convert {_text(fahrenheit)} degrees Fahrenheit to Celsius:", f" {_text(celsius)}"


def sst_series() -> list[tuple[int, int, Decimal]]:
    """``(year, month 1-12, temperature)`` of every month of `DATA/elnino/elnino.csv`, in time order."""
    with (DATA / "elnino" / "elnino.csv").open(encoding="utf-8") as handle:
        rows = list(csv.reader(handle))[1:]
    return [(int(row[0]), month, Decimal(value)) for row in rows for month, value in enumerate(row[1:], start=1)]


def sst_rows(n_train: int, n_eval: int, seed: int) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Next-month forecasts of the shipped series: up to `n_train` of the 588 rows whose target falls in 1951-1999
    (shuffled by `seed`) and the first `n_eval` of the 132 rows of 2000-2010 (in time order), each
    ``{"prompt": "Sea surface temperature ... last 12 months (deg C): 23.11, ... Next, June:", "completion":
    " 21.57"}``."""
    series = sst_series()
    train, held = [], []
    for at in range(12, len(series)):
        year, month, value = series[at]
        window = ", ".join(_text(v) for _, _, v in series[at - 12 : at])
        row = {
            "prompt": (
                "Monthly sea surface temperature off Peru and Ecuador, the last twelve months (degrees Celsius): "
                f"{window}. Next, {MONTHS[month - 1]}:"
            ),
            "completion": f" {_text(value)}",
        }
        (held if year >= HELD_FROM else train).append(row)
    random.Random(seed).shuffle(train)
    return train[:n_train], held[:n_eval]


def repeat_last(rows: list[dict[str, str]]) -> list[str]:
    """The no-skill forecast: each row's answer is the latest number of its prompt (`sst_rows` writes no other
    digits after the values)."""
    return [" " + re.findall(r"\d+(?:\.\d+)?", row["prompt"])[-1] for row in rows]
