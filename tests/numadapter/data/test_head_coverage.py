"""Which training answers FoNE's context head can form, and the trainer's warning when many are out of its reach."""

from __future__ import annotations

import itertools
import random
import warnings

import datasets
import pytest
from helpers.adapter_cases import Store
from helpers.generation_cases import build
from helpers.training_cases import sft_args

from numadapter.data.head_coverage import combination_of, head_coverage
from numadapter.data.prepare import prepare_dataset
from numadapter.training.sft import NumberSFTTrainer


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("coverage")))


def test_combination_of_finds_a_signed_sum_with_the_fewest_terms_or_none():
    rng = random.Random(0)
    for _ in range(300):
        context = tuple(rng.randrange(-50, 50) for _ in range(rng.randrange(0, 5)))
        target = rng.randrange(-120, 120)
        found = combination_of(context, target)
        every = [c for c in itertools.product((-1, 0, 1), repeat=len(context))
                 if sum(a * b for a, b in zip(c, context)) == target]  # fmt: skip
        if not every:
            assert found is None
        else:
            assert found in every
            assert sum(map(abs, found)) == min(sum(map(abs, c)) for c in every)
    assert combination_of((7, 5), 7) == (1, 0)  # a copy is one term
    assert combination_of((), 0) == ()  # nothing: the empty sum


def rows(kind: str, n: int) -> list[dict[str, str]]:
    rng, out = random.Random(kind), []
    for _ in range(n):
        a, b = rng.randrange(10, 100), rng.randrange(10, 100)
        if kind == "sum":
            out.append({"prompt": f"In 2024: {a} + {b} =", "completion": f" {a + b}"})
        elif kind == "difference":
            out.append({"prompt": f"{a} - {b} =", "completion": f" {a - b}"})
        else:
            out.append({"prompt": f"{a} km in metres =", "completion": f" {a * 1000}"})
    return out


def test_coverage_counts_the_completion_numbers_a_combination_forms(store):
    _, ntok = build(store, "llama", "fone", int_digits=6, frac_digits=0)
    for kind, share in (("sum", 1.0), ("difference", 1.0), ("metres", 0.0)):
        prepared = prepare_dataset(datasets.Dataset.from_list(rows(kind, 20)), ntok)
        coverage = head_coverage(prepared, count=4)
        assert (coverage.answers, coverage.share) == (20, share), kind
    mixed = prepare_dataset(datasets.Dataset.from_list(rows("sum", 15) + rows("metres", 5)), ntok)
    coverage = head_coverage(mixed, count=4)
    assert (coverage.answers, coverage.formed) == (20, 15)
    context, answer = coverage.examples[0]
    assert answer == context[0] * 1000  # the conversion: the latest number times 1000
    words = [{"prompt": "Write in digits: forty-two.", "completion": " 42"}, {"prompt": "zero?", "completion": " 0"}]
    coverage = head_coverage(prepare_dataset(datasets.Dataset.from_list(words), ntok), count=4)
    assert (coverage.answers, coverage.formed) == (2, 1)  # nothing before the answer: only 0 is formed (read-out)
    # with K = 1 only the latest number counts: "In 2024: a + b =" is out of reach, "a - b =" too
    assert head_coverage(prepare_dataset(datasets.Dataset.from_list(rows("sum", 10)), ntok), count=1).share == 0.0


def test_the_trainer_warns_when_the_head_cannot_form_many_answers(store, tmp_path):
    model, ntok = build(store, "llama", "fone", int_digits=6, frac_digits=0)
    args = sft_args(tmp_path, max_steps=1)
    data = datasets.Dataset.from_list(rows("sum", 8) + rows("metres", 8))
    with pytest.warns(
        UserWarning, match=r"8 of 16 training answers \(50%\) are no sum or difference.*encoding='digits'"
    ):
        NumberSFTTrainer(model=model, args=args, train_dataset=data, processing_class=ntok)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        NumberSFTTrainer(model=model, args=args, train_dataset=datasets.Dataset.from_list(rows("sum", 16)),
                         processing_class=ntok)  # fmt: skip
    assert not [w for w in caught if "no sum or difference" in str(w.message)]
    digits, digits_ntok = build(store, "llama", "digits")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        NumberSFTTrainer(model=digits, args=args, train_dataset=data, processing_class=digits_ntok)
    assert not [w for w in caught if "no sum or difference" in str(w.message)]
