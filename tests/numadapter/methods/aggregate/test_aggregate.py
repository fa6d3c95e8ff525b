"""Tests for numadapter.methods.aggregate.embedding (eq. 1 weights, [AGG] embedding, auxiliary loss) and half
precision."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
import torch.nn.functional as F

from numadapter.config import NumberAdapterConfig
from numadapter.methods.aggregate.embedding import (
    AggregateEmbedding,
    aggregate_aux_loss,
    aggregate_loss,
    aggregation_weights,
)
from numadapter.methods.xval.embedding import XValEmbedding
from numadapter.methods.xval.head import RegressionHead


def digits_config(**kwargs) -> NumberAdapterConfig:
    return NumberAdapterConfig(encoding="digits", aggregate=True, **kwargs)


# -- equation 1 -------------------------------------------------------------------------------------------------------


def test_weights_by_hand():
    # w_i = 2^(N-i) * 3(N+1-i)(N+2-i) / (N(N+1)(N+2))
    # N = 1: 2^0 * 3*1*2 / (1*2*3) = 6/6 = 1
    assert aggregation_weights(1).tolist() == [1.0]
    # N = 2, denominator 2*3*4 = 24: i=1: 2^1 * 3*2*3 / 24 = 36/24 = 1.5;  i=2: 2^0 * 3*1*2 / 24 = 6/24 = 0.25
    assert aggregation_weights(2).tolist() == [1.5, 0.25]
    # N = 3, denominator 3*4*5 = 60: i=1: 4 * 3*3*4 / 60 = 144/60 = 2.4;  i=2: 2 * 3*2*3 / 60 = 36/60 = 0.6;
    # i=3: 1 * 3*1*2 / 60 = 6/60 = 0.1  (the paper's "1, 3, 6 normalised to 0.1, 0.3, 0.6" times 4, 2, 1)
    assert aggregation_weights(3, dtype=torch.float64).tolist() == pytest.approx([2.4, 0.6, 0.1], rel=1e-15)
    # N = 4, denominator 4*5*6 = 120: 8*3*4*5/120 = 4, 4*3*3*4/120 = 1.2, 2*3*2*3/120 = 0.3, 1*3*1*2/120 = 0.05
    assert aggregation_weights(4, dtype=torch.float64).tolist() == pytest.approx([4.0, 1.2, 0.3, 0.05], rel=1e-15)
    assert aggregation_weights(3).dtype == torch.float32


@pytest.mark.parametrize("n", [0, -1, 1.5, True, "3"])
def test_weights_reject_bad_n(n):
    with pytest.raises(ValueError, match="n >= 1"):
        aggregation_weights(n)


# -- AggregateEmbedding -----------------------------------------------------------------------------------------------


def digit_table() -> torch.Tensor:
    """(10, 3): E[j] = [j, 1, -j/2]."""
    j = torch.arange(10, dtype=torch.float32)
    return torch.stack([j, torch.ones(10), -j / 2], dim=-1)


def test_aggregate_embedding_by_hand():
    module = AggregateEmbedding(digits_config(int_digits=3, frac_digits=2))
    assert list(module.parameters()) == []
    embeds = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3) / 10
    num_mask = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 0]])
    num_digits = torch.tensor(
        [
            [[9, 9, 9, 9, 9], [0, 1, 2, 5, 0], [0, 0, 0, 0, 5], [1, 2, 0, 0, 5]],  # (junk), 12.5, 0.05, 120.05
            [[0, 0, 7, 0, 0], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 0]],  # 7, 0, 100, (none)
        ]
    )
    out = module(embeds, num_mask, num_digits, torch.ones(2, 4), torch.zeros(2, 4), digit_embeddings=digit_table())
    # E[j] = [j, 1, -j/2]. 12.5 -> digits 1, 2, 5 (N=3, w = 2.4, 0.6, 0.1):
    #   [2.4*1 + 0.6*2 + 0.1*5, 2.4 + 0.6 + 0.1, -(2.4*0.5 + 0.6*1 + 0.1*2.5)] = [4.1, 3.1, -2.05]
    # 0.05 -> digits 0, 0, 5 (units place counts): [0.1*5, 3.1, -0.1*2.5] = [0.5, 3.1, -0.25]
    # 120.05 -> digits 1, 2, 0, 0, 5 (N=5, w = [16*90, 8*60, 4*36, 2*18, 1*6] / 210 = [1440, 480, 144, 36, 6] / 210):
    #   [(1440 + 2*480 + 5*6) / 210, 2106 / 210, -(1440*0.5 + 480 + 6*2.5) / 210] = [2430/210, 2106/210, -1215/210]
    # 7 -> E[7] = [7, 1, -3.5];  0 -> E[0] = [0, 1, 0]
    # 100 -> digits 1, 0, 0 (N=3): [2.4, 3.1, -1.2]
    expected_agg = {
        (0, 1): [4.1, 3.1, -2.05],
        (0, 2): [0.5, 3.1, -0.25],
        (0, 3): [2430 / 210, 2106 / 210, -1215 / 210],
        (1, 0): [7.0, 1.0, -3.5],
        (1, 1): [0.0, 1.0, 0.0],
        (1, 2): [2.4, 3.1, -1.2],
    }
    for (b, t), agg in expected_agg.items():
        assert out[b, t].tolist() == pytest.approx((embeds[b, t] + torch.tensor(agg)).tolist(), rel=1e-6)
    for b, t in ((0, 0), (1, 3)):
        assert torch.equal(out[b, t], embeds[b, t])


def test_aggregate_is_a_function_of_the_value_across_configs():
    # 0.05 with int_digits = 0 still counts the units digit 0: same aggregate as with int_digits = 3.
    table = digit_table()
    a = AggregateEmbedding(digits_config(int_digits=0, frac_digits=3)).aggregate(torch.tensor([[[0, 5, 0]]]), table)
    b = AggregateEmbedding(digits_config(int_digits=3, frac_digits=2)).aggregate(
        torch.tensor([[[0, 0, 0, 0, 5]]]), table
    )
    assert torch.allclose(a, b)
    assert a[0, 0].tolist() == pytest.approx([0.5, 3.1, -0.25])
    # 7 and 7.0 / 007 are the same place digits, 70 is not 7.
    seven = AggregateEmbedding(digits_config(int_digits=3, frac_digits=2)).aggregate(
        torch.tensor([[[0, 0, 7, 0, 0], [0, 7, 0, 0, 0]]]), table
    )
    assert seven[0, 0].tolist() == pytest.approx([7.0, 1.0, -3.5])
    assert seven[0, 1].tolist() == pytest.approx([1.5 * 7, 1.75, -1.5 * 3.5])  # digits 7, 0: 1.5 E7 + 0.25 E0


def test_aggregate_embedding_errors():
    module = AggregateEmbedding(digits_config(int_digits=3, frac_digits=2))
    embeds = torch.zeros(1, 2, 3)
    mask = torch.tensor([[1, 0]])
    with pytest.raises(ValueError, match="in 0..9"):
        module(embeds, mask, torch.tensor([[[0, 0, 10, 0, 0], [0] * 5]]), digit_embeddings=digit_table())
    with pytest.raises(ValueError, match="int_digits"):
        module(embeds, mask, torch.zeros(1, 2, 4, dtype=torch.long), digit_embeddings=digit_table())
    with pytest.raises(ValueError, match=r"\(10, 3\)"):
        module(embeds, mask, torch.zeros(1, 2, 5, dtype=torch.long), digit_embeddings=torch.zeros(9, 3))
    with pytest.raises(ValueError, match="digit_embeddings"):
        module(embeds, mask, torch.zeros(1, 2, 5, dtype=torch.long))


def test_aggregate_fp16_overflow_is_an_error():
    # 20 integer places: w_1 = 2^19 * 3*20*21 / (20*21*22) = 524288 * 3/22 = 71493.8 > 65504 (fp16 max).
    module = AggregateEmbedding(digits_config(int_digits=20, frac_digits=0))
    embeds = torch.zeros(1, 1, 3, dtype=torch.float16)
    digits = torch.full((1, 1, 20), 9)
    with pytest.raises(ValueError, match="overflows torch.float16"):
        module(embeds, torch.ones(1, 1), digits, digit_embeddings=digit_table().half())
    out = module(embeds.bfloat16(), torch.ones(1, 1), digits, digit_embeddings=digit_table().bfloat16())
    assert torch.isfinite(out).all()


# -- aggregate_loss ---------------------------------------------------------------------------------------------------

DIGIT_IDS = list(range(4, 14))  # digit k is token 4 + k; tokens 0..3 are text
NEG = -1e4  # exp(-1e4) == 0 in float32


def test_aggregate_ignores_the_decimal_point():
    # Pinned limitation (issue 16): eq. 1 sees only the significant digits 1, 2, 5 of 12.5, 125 and 1.25, so all
    # three get w = 2.4, 0.6, 0.1 (N = 3): [2.4*1 + 0.6*2 + 0.1*5, 3.1, -(2.4*0.5 + 0.6*1 + 0.1*2.5)].
    module = AggregateEmbedding(digits_config(int_digits=3, frac_digits=2))
    place_digits = torch.tensor([[[0, 1, 2, 5, 0], [1, 2, 5, 0, 0], [0, 0, 1, 2, 5]]])  # 12.5, 125, 1.25
    agg = module.aggregate(place_digits, digit_table())
    for t in range(3):
        assert agg[0, t].tolist() == pytest.approx([4.1, 3.1, -2.05], rel=1e-6)


def test_aux_loss_splits_a_decimal_at_the_point():
    # Pinned limitation (issue 16): "." ends a digit run, so labels "1", "2", ".", "5" are two numbers, "12" and
    # "5". Exact predictions give the eps floor log2(1e-6) for each run.
    point = 2  # a text row of embedding_table()
    labels = torch.tensor([[DIGIT_IDS[1], DIGIT_IDS[2], point, DIGIT_IDS[5]]])
    logits = torch.full((1, 4, 14), NEG)
    for t, label in enumerate(labels[0].tolist()):
        logits[0, t, label] = 0.0
    aux, num_numbers = aggregate_aux_loss(logits, labels, DIGIT_IDS, embedding_table())
    assert num_numbers == 2
    assert aux.item() == pytest.approx(math.log2(1e-6), rel=1e-4)


def embedding_table() -> torch.Tensor:
    """(14, 3): text rows arbitrary, digit row 4 + k = [k, 0, 1]."""
    weight = torch.tensor(
        [[5.0, 5.0, 5.0], [-3.0, 2.0, 0.0], [1.0, 1.0, 1.0], [0.0, -4.0, 2.0]] + [[0.0, 0.0, 1.0]] * 10
    )
    weight[4:, 0] = torch.arange(10, dtype=torch.float32)
    return weight


def test_aggregate_loss_by_hand():
    labels = torch.tensor([[1, 5, 6, 2]])  # text, digit 1, digit 2, text: one number "12"
    logits = torch.zeros(1, 4, 14)
    logits[0, 1] = NEG
    logits[0, 1, 5] = logits[0, 1, 7] = math.log(0.5)  # p(digit 1) = p(digit 3) = 0.5
    logits[0, 2] = NEG
    logits[0, 2, 6] = 0.0  # p(digit 2) = 1
    out = aggregate_loss(logits, labels, DIGIT_IDS, embedding_table(), lam=0.6)
    # CE: t0, t3 uniform over 14 -> log 14 each; t1 -> -log 0.5 = log 2; t2 -> 0. Mean over 4 tokens.
    ce = (2 * math.log(14) + math.log(2)) / 4
    # N = 2, w = 1.5, 0.25; E[k] = [k, 0, 1].
    # W(l) = 1.5 E1 + 0.25 E2 = [1.5 + 0.5, 0, 1.75] = [2, 0, 1.75]
    # W(p) = 1.5 (0.5 E1 + 0.5 E3) + 0.25 E2 = 1.5 [2, 0, 1] + 0.25 [2, 0, 1] = [3.5, 0, 1.75]
    # ||W(p) - W(l)|| = 1.5 -> L_AUX = log2(1.5)
    aux = math.log2(1.5)
    assert out.num_numbers == 1
    assert out.ce.item() == pytest.approx(ce, rel=1e-6)
    assert out.aux.item() == pytest.approx(aux, rel=1e-6)
    assert out.loss.item() == pytest.approx(0.6 * ce + 0.4 * aux, rel=1e-6)


def test_non_numeric_prediction_falls_back_to_20():
    labels = torch.tensor([[0, 5, 6, 1, 11]])  # numbers "12" and "7"
    logits = torch.zeros(1, 5, 14)
    logits[0, 2, 2] = 5.0  # at the second digit of "12" the argmax is text token 2 -> L_AUX = 20 for that number
    logits[0, 4] = NEG
    logits[0, 4, 11] = 0.0  # "7" predicted exactly: distance 0 -> 0.5 * log2(0 + eps^2) = log2(1e-6)
    out = aggregate_loss(logits, labels, DIGIT_IDS, embedding_table(), lam=0.0)
    assert out.num_numbers == 2
    assert out.aux.item() == pytest.approx((20.0 + math.log2(1e-6)) / 2, abs=1e-5)  # float32 sum 20 - 19.93
    assert out.loss.item() == pytest.approx(out.aux.item())


def reference_aux(logits, labels, digit_ids, weight, eps=1e-6):
    """Loop implementation of eq. 1-2 with the same conventions (runs within rows, digit-restricted softmax)."""
    table = weight[digit_ids].double()  # (10, H)
    losses = []
    for b in range(labels.shape[0]):
        runs, current = [], []
        for t in range(labels.shape[1]):
            if int(labels[b, t]) in digit_ids:
                current.append(t)
            elif current:
                runs.append(current)
                current = []
        if current:
            runs.append(current)
        for run in runs:
            n = len(run)
            gold = torch.zeros(table.shape[1], dtype=torch.float64)
            pred = torch.zeros(table.shape[1], dtype=torch.float64)
            numeric = True
            for i, t in enumerate(run, start=1):
                w = float(Fraction(2) ** (n - i) * 3 * (n + 1 - i) * (n + 2 - i) / (n * (n + 1) * (n + 2)))
                gold += w * table[digit_ids.index(int(labels[b, t]))]
                probs = torch.softmax(logits[b, t, digit_ids].double(), -1)
                pred += w * (probs @ table)
                numeric &= int(logits[b, t].argmax()) in digit_ids
            distance = (pred - gold).norm().item()
            losses.append(math.log2(math.sqrt(distance**2 + eps**2)) if numeric else 20.0)
    return losses


def test_aggregate_loss_matches_reference_and_runs_stay_in_rows():
    torch.manual_seed(0)
    labels = torch.tensor(
        [
            [0, 7, 8, 9, -100, 4, 5],  # "345", "01" (a run at the row end ...)
            [6, 1, 13, 12, 11, 10, 2],  # ... must not continue into "2" at the start of the next row; "9876"
            [-100, -100, 3, 3, 3, 3, 3],  # no number
        ]
    )
    logits = torch.randn(3, 7, 14)
    logits[..., 4:] += 3.0  # mostly digit argmaxes ...
    logits[1, 3, 0] = 20.0  # ... but "9876" is predicted with a text token inside
    out = aggregate_loss(logits, labels, DIGIT_IDS, embedding_table(), lam=0.3)
    expected = reference_aux(logits, labels, DIGIT_IDS, embedding_table())
    assert out.num_numbers == len(expected) == 4
    assert 20.0 in expected
    assert out.aux.item() == pytest.approx(sum(expected) / len(expected), rel=1e-5)
    ce = F.cross_entropy(logits.reshape(-1, 14), labels.reshape(-1))
    assert out.ce.item() == pytest.approx(ce.item(), rel=1e-6)


def test_aux_alone_reads_only_digit_positions():
    torch.manual_seed(4)
    logits = torch.randn(2, 5, 14)
    labels = torch.tensor([[0, 5, 6, 1, 7], [-100, 2, 9, 9, 3]])
    combined = aggregate_loss(logits, labels, DIGIT_IDS, embedding_table(), lam=0.5)
    aux, count = aggregate_aux_loss(logits, labels, DIGIT_IDS, embedding_table())
    assert count == combined.num_numbers == 3
    assert torch.equal(aux, combined.aux)
    logits[0, 0] = float("nan")  # a non-digit label position: never read
    logits[1, 0] = float("nan")
    again, _ = aggregate_aux_loss(logits, labels, DIGIT_IDS, embedding_table())
    assert torch.equal(again, aux)


def test_gradient_flows_to_digit_logits_only():
    torch.manual_seed(1)
    logits = torch.randn(2, 4, 14)
    logits[..., 4:] += 10.0  # argmax is a digit everywhere: no fallback
    logits.requires_grad_()
    weight = embedding_table().requires_grad_()
    labels = torch.tensor([[0, 5, 6, 1], [9, 9, 0, -100]])
    out = aggregate_loss(logits, labels, DIGIT_IDS, weight, lam=0.5)
    out.aux.backward()
    grad = logits.grad
    digit_rows = [(0, 1), (0, 2), (1, 0), (1, 1)]
    for b, t in digit_rows:
        assert grad[b, t, 4:].abs().sum() > 0
        assert torch.equal(grad[b, t, :4], torch.zeros(4))  # only the digit-restricted softmax is scored
    for b, t in ((0, 0), (0, 3), (1, 2), (1, 3)):
        assert torch.equal(grad[b, t], torch.zeros(14))
    assert weight.grad is None  # the embedding is a fixed metric


def test_lambda_one_is_plain_cross_entropy():
    torch.manual_seed(2)
    logits = torch.randn(2, 5, 14)
    labels = torch.tensor([[0, 5, 6, 1, 7], [-100, 2, 9, 9, 3]])
    out = aggregate_loss(logits, labels, DIGIT_IDS, embedding_table(), lam=1.0)
    assert torch.equal(out.loss, out.ce)
    assert out.loss.item() == pytest.approx(F.cross_entropy(logits.reshape(-1, 14), labels.reshape(-1)).item())
    assert out.num_numbers == 3
    summed = aggregate_loss(logits, labels, DIGIT_IDS, embedding_table(), lam=1.0, num_items_in_batch=4)
    total = F.cross_entropy(logits.reshape(-1, 14), labels.reshape(-1), reduction="sum").item()
    assert summed.ce.item() == pytest.approx(total / 4)


def test_no_numbers_gives_zero_with_graph():
    logits = torch.randn(1, 3, 14, requires_grad=True)
    labels = torch.tensor([[0, 1, -100]])
    out = aggregate_loss(logits, labels, DIGIT_IDS, embedding_table(), lam=0.5)
    assert out.num_numbers == 0
    assert out.aux.item() == 0.0 and out.aux.requires_grad
    out.loss.backward()
    assert torch.isfinite(logits.grad).all()
    empty = aggregate_loss(logits, torch.full((1, 3), -100), DIGIT_IDS, embedding_table(), lam=0.5)
    assert empty.loss.item() == 0.0 and empty.loss.requires_grad  # no NaN from 0 / 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lam": 1.5}, "aggregate_loss_lambda"),
        ({"digit_token_ids": list(range(4, 13))}, "10 distinct"),
        ({"digit_token_ids": [4] * 10}, "10 distinct"),
        ({"digit_token_ids": list(range(5, 15))}, r"\[0, 14\)"),
        ({"labels": torch.zeros(1, 2, dtype=torch.long)}, "same B, T"),
    ],
)
def test_aggregate_loss_rejects_bad_input(kwargs, match):
    args = {
        "logits": torch.zeros(1, 3, 14),
        "labels": torch.zeros(1, 3, dtype=torch.long),
        "digit_token_ids": DIGIT_IDS,
        "embedding_weight": embedding_table(),
        "lam": 0.5,
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        aggregate_loss(**args)


# -- half precision (all four modules) --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_inputs_stay_finite(dtype):
    torch.manual_seed(3)
    h = 8
    embeds = (torch.randn(2, 3, h) * 0.02).to(dtype)
    num_mask = torch.tensor([[0, 1, 0], [1, 0, 1]])
    num_values = torch.tensor([[0.0, 4.9, 0.0], [-5.0, 0.0, 1e-3]])
    for form in ("multiplicative", "affine"):
        module = XValEmbedding(h, NumberAdapterConfig(encoding="xval"), form=form)
        out = module(embeds, num_mask, num_values=num_values)
        assert out.dtype == dtype and torch.isfinite(out).all()
        assert torch.equal(out[0, 0], embeds[0, 0])

    head = RegressionHead(h, NumberAdapterConfig(encoding="xval"))
    hidden = torch.randn(4, h).to(dtype).requires_grad_()
    pred = head(hidden)
    loss = head.loss(pred, torch.tensor([1.0, -2.0, 4.5, 0.0]))
    loss.backward()
    assert torch.isfinite(pred).all() and torch.isfinite(loss) and torch.isfinite(hidden.grad).all()
    assert torch.isfinite(head.predict(pred)).all()

    config = digits_config(int_digits=8, frac_digits=4)
    table = (torch.randn(10, h) * 0.02).to(dtype)
    digits = torch.zeros(2, 3, 12, dtype=torch.long)
    digits[0, 1] = torch.tensor([9] * 12)  # the largest number: N = 12 digits
    digits[1, 0, 7] = 3
    digits[1, 2, 11] = 1
    out = AggregateEmbedding(config)(embeds, num_mask, digits, digit_embeddings=table)
    assert out.dtype == dtype and torch.isfinite(out).all()

    logits = (torch.randn(2, 6, 14) * 3).to(dtype).requires_grad_()
    labels = torch.tensor([[0, 5, 6, 7, 1, 2], [13, 13, 13, 13, 13, 13]])
    result = aggregate_loss(logits, labels, DIGIT_IDS, embedding_table().to(dtype), lam=0.6)
    result.loss.backward()
    assert torch.isfinite(result.loss) and torch.isfinite(logits.grad).all()
