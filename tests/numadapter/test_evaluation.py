"""numadapter.evaluation: the last number of each answer against the reference's, exact match and MAE."""

from __future__ import annotations

import math
from decimal import Decimal
from types import SimpleNamespace

import pytest

import numadapter
from numadapter.evaluation import AnswerMetrics, answer_metrics, last_number


def test_last_number_is_exact_and_last():
    assert last_number("3 + 4 = 7") == Decimal(7)
    assert last_number("total: 1,234.50 dollars") == Decimal("1234.50")
    assert last_number("12345678901234567890.5") == Decimal("12345678901234567890.5")  # not via float64
    assert last_number("no number here") is None


def test_answer_metrics_by_hand():
    predictions = ["= 10", "so 7.5", "no idea", "-3"]
    references = [" 10", " 8", " 4", "unanswerable"]  # the last reference has no number: skipped
    metrics = answer_metrics(predictions, references)
    # 3 scored: 10 == 10 (right), 7.5 vs 8 (|0.5|), no number (wrong, not in the MAE)
    assert metrics == {"examples": 3, "answered": 2, "exact_match": 1 / 3, "mae": 0.25}


def test_answer_metrics_nothing_answered_and_length_mismatch():
    metrics = answer_metrics(["none"], ["5"])
    assert metrics["examples"] == 1 and metrics["answered"] == 0 and metrics["exact_match"] == 0.0
    assert math.isnan(metrics["mae"])
    with pytest.raises(ValueError, match="2 predictions for 1 references"):
        answer_metrics(["1", "2"], ["1"])


def test_answer_metrics_as_compute_metrics():
    metric = AnswerMetrics(max_new_tokens=8, batch_size=2)
    assert metric.generates and metric.max_new_tokens == 8 and metric.batch_size == 2
    assert metric(SimpleNamespace(texts=[" 12"], references=[" 12"]))["exact_match"] == 1.0
    with pytest.raises(TypeError, match="takes the generated answers"):
        metric(SimpleNamespace(predictions=[[1, 2]], label_ids=[[1, 2]]))
    assert numadapter.AnswerMetrics is AnswerMetrics  # the public name
