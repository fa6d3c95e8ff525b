"""The regression families: Fahrenheit -> Celsius answers computed right, and the shipped sea surface temperature
series cut into forecasts without leaking a held-out month into training."""

from __future__ import annotations

import csv
import random
from decimal import Decimal
from pathlib import Path

from eval_harness.suite.regression import fahrenheit_celsius, repeat_last, sst_rows

DATA = Path(__file__).resolve().parents[3] / "eval_harness" / "suite" / "data" / "elnino"


def test_fahrenheit_to_celsius_is_right_to_the_cent():
    rng = random.Random(3)
    for _ in range(200):
        prompt, completion = fahrenheit_celsius(rng)
        fahrenheit = Decimal(prompt.split()[1])
        assert Decimal("32") <= fahrenheit <= Decimal("999.9")
        assert abs(Decimal(completion) - (fahrenheit - 32) * 5 / 9) <= Decimal("0.005")


def test_forecasts_are_the_series_with_the_later_years_held_out():
    with (DATA / "elnino.csv").open() as handle:
        rows = list(csv.reader(handle))
    series = [Decimal(v) for row in rows[1:] for v in row[1:]]
    assert len(series) == 732 and (DATA / "LICENSE").read_text().startswith("Public domain.")
    train, held = sst_rows(10_000, 10_000, seed=0)
    assert (len(train), len(held)) == (588, 132)  # targets 1951-1999 and 2000-2010
    first = held[0]
    window = [Decimal(v) for v in first["prompt"].split(": ", 1)[1].split(". Next")[0].split(", ")]
    at = (2000 - 1950) * 12  # January 2000
    assert window == series[at - 12 : at] and Decimal(first["completion"]) == series[at]
    assert first["prompt"].endswith("Next, January:")
    held_targets = {r["prompt"] for r in held}
    assert not held_targets & {r["prompt"] for r in train}
    assert repeat_last(held[:2]) == [f" {series[at - 1].normalize():f}", f" {series[at].normalize():f}"]
    assert sst_rows(20, 5, seed=1)[0] != sst_rows(20, 5, seed=2)[0]
