"""eval_harness.suite.pointer_probe: the ledger's number roles, and the probe's fit on data with a known answer."""

from __future__ import annotations

import pytest
import torch

from eval_harness.suite.families import family_rows
from eval_harness.suite.pointer_probe import fit_and_score, roles
from numadapter.numbers import find_numbers


def test_roles_give_each_number_the_coefficient_that_sums_to_the_balance():
    rows, _ = family_rows("ledger", 50, 0, 3)
    for row in rows:
        values = [span.exact for span in find_numbers(row["prompt"])]
        found = roles(row["prompt"])
        assert [end for end, _ in found] == [span.end for span in find_numbers(row["prompt"])]
        assert sum(int(str(v)) * c for v, (_, c) in zip(values, found)) == int(row["completion"])
    with pytest.raises(ValueError, match="expected"):
        roles("Account 1. Opening balance 5. Closing balance:")


def test_the_probe_scores_separable_roles_right_and_random_ones_near_chance():
    generator = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 3, (600,), generator=generator)
    owner = torch.arange(600) // 6  # 100 prompts of 6 numbers
    train = owner < 70
    separable = torch.nn.functional.one_hot(labels, 3).float() * 3 + torch.randn(600, 3, generator=generator) * 0.1
    scores = fit_and_score(separable, labels, train, owner)
    assert scores["number_accuracy"] == 1.0 and scores["prompts_all_right"] == 1.0
    noise = torch.randn(600, 3, generator=generator)
    scores = fit_and_score(noise, labels, train, owner)
    assert scores["number_accuracy"] < 0.5 and scores["prompts_all_right"] < 0.1
