"""The aggregate loss's number count M (numadapter.tuner.loss): what it counts, and that L_AUX / M adds up exactly.

End to end (gradient accumulation, two simulated processes) in tests/numadapter/training/test_trainer.py.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from numadapter.methods.aggregate.embedding import aggregate_aux_loss
from numadapter.tuner.loss import ItemCounts, aggregate_term, count_aggregate_numbers, split_counts

DIGITS = list(range(10, 20))  # token id of digit k: 10 + k
CONFIG = SimpleNamespace(digit_token_ids=DIGITS, aggregate_loss_lambda=0.5)


def test_count_is_digit_runs_within_rows():
    labels = torch.tensor(
        [
            [10, 11, 5, 12, -100, 13],  # "01", "2", "3": three runs (-100 and 5 end a run)
            [14, 15, -100, 16, 17, 3],  # "45", "67": two (a run never continues from the previous row)
            [-100, -100, -100, -100, -100, -100],  # none
        ]
    )
    assert count_aggregate_numbers(labels, DIGITS).item() == 5
    logits = torch.randn(3, 6, 24)
    assert aggregate_aux_loss(logits, labels, DIGITS, torch.randn(24, 8))[1] == 5  # the runs the loss averages


def test_split_counts():
    assert split_counts(None) == (None, None)
    assert split_counts(7) == (7, None)
    assert split_counts(ItemCounts(7, 3)) == (7, 3)


def test_aggregate_term_over_parts_adds_up_to_the_whole():
    torch.manual_seed(0)
    labels = torch.tensor([[10, 11, 3, 12, 13, 14], [15, 4, 16, 17, -100, -100], [18, 19, 10, 2, 11, 3], [5] * 6])
    logits = torch.randn(4, 6, 24)
    logits[..., DIGITS] += 6.0  # digits are the argmax: eq. 2 distances, not footnote 2's constant
    logits.requires_grad_(True)
    embeddings = torch.randn(10, 8)
    total = count_aggregate_numbers(labels, DIGITS)
    assert total.item() == 6
    whole = aggregate_term(CONFIG, logits, labels, embeddings)  # the mean over the 6 numbers
    parts = aggregate_term(CONFIG, logits[:1], labels[:1], embeddings, total) + aggregate_term(
        CONFIG, logits[1:], labels[1:], embeddings, total
    )
    torch.testing.assert_close(parts, whole, rtol=0, atol=1e-6)
    assert whole.item() < 15  # footnote 2 did not apply
    (grad_whole,) = torch.autograd.grad(whole, logits)
    (grad_parts,) = torch.autograd.grad(parts, logits)
    torch.testing.assert_close(grad_parts, grad_whole, rtol=0, atol=1e-7)
    none = aggregate_term(CONFIG, logits[3:], labels[3:], embeddings, torch.tensor(0))  # no numbers at all
    assert none.item() == 0.0 and none.requires_grad
