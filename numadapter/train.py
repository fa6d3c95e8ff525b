"""Moved: ``numadapter.train`` was split in two. The commands behind ``numadapter train | eval | export`` are
`numadapter.app.commands` (application); scoring generated answers (`answer_metrics`, `AnswerMetrics`,
`generate_answers`, `last_number`) is `numadapter.evaluation` (library).

This module keeps the old import path working by re-exporting the public names of both.
"""

from numadapter.app.commands import evaluate, export, load_base_model, load_data, load_tokenizer, train
from numadapter.evaluation import AnswerMetrics, answer_metrics, generate_answers, last_number

__all__ = [
    "AnswerMetrics",
    "answer_metrics",
    "evaluate",
    "export",
    "generate_answers",
    "last_number",
    "load_base_model",
    "load_data",
    "load_tokenizer",
    "train",
]
