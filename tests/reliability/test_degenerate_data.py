"""Degenerate data (issue 16, item 3): an empty dataset, every row filtered, rows without numbers, all-masked
labels, a number cut at max_length, and examples that max_length leaves without a completion."""

from __future__ import annotations

import math
import warnings

import datasets
import pytest
import torch
from helpers.adapter_cases import Case, build, make_batch
from trl import SFTConfig

from numadapter.data import prepare_dataset
from numadapter.data.collator import NumberDataCollator
from numadapter.training.seq2seq import NumberSeq2SeqTrainer
from numadapter.training.sft import NumberSFTTrainer

LLAMA = Case("llama", "fone", tie=False)


def args(tmp_path, **overrides) -> SFTConfig:
    settings = dict(output_dir=str(tmp_path / "out"), max_steps=2, per_device_train_batch_size=2, report_to=[],
                    bf16=False, save_strategy="no", disable_tqdm=True, logging_steps=1)  # fmt: skip
    settings.update(overrides)
    return SFTConfig(**settings)


def train(store, tmp_path, rows, **overrides):
    model, ntok, _ = build(store, LLAMA)
    data = datasets.Dataset.from_list(rows) if rows else datasets.Dataset.from_dict({"prompt": [], "completion": []})
    trainer = NumberSFTTrainer(
        model=model, args=args(tmp_path, **overrides), train_dataset=data, processing_class=ntok
    )
    trainer.train()
    return trainer, [entry for entry in trainer.state.log_history if "loss" in entry]


def test_empty_dataset_names_the_dataset(store, tmp_path):
    with pytest.raises(ValueError, match=r"`train_dataset` is empty \(0 examples\).*at least one example"):
        train(store, tmp_path, [])


def test_empty_dataset_seq2seq(store, tmp_path):
    model, ntok, _ = build(store, Case("t5", "fone", tie=False))
    data = datasets.Dataset.from_dict({"prompt": [], "completion": []})
    with pytest.raises(ValueError, match=r"`train_dataset` is empty"):
        NumberSeq2SeqTrainer(model=model, train_dataset=data, processing_class=ntok)


def test_empty_iterable_dataset_to_prepare_dataset(store):
    _, ntok, _ = build(store, LLAMA)
    data = datasets.IterableDataset.from_generator(
        lambda: iter([]), features=datasets.Features({"text": datasets.Value("string")})
    )
    with pytest.raises(ValueError, match=r"`dataset` is empty"):
        prepare_dataset(data, ntok)


def test_every_row_truncated_away_says_so(store, tmp_path):
    rows = [{"prompt": "What is 2 plus 3? " * 5, "completion": " It is 5."}] * 4
    with pytest.raises(
        ValueError, match=r"every example .* was dropped: truncated to max_length=8 .* Raise max_length"
    ):
        train(store, tmp_path, rows, max_length=8)


def test_rows_without_numbers_train(store, tmp_path):
    rows = [{"prompt": "hello there", "completion": " general kenobi"}, {"prompt": "a b", "completion": " c d"}] * 2
    trainer, logs = train(store, tmp_path, rows)
    assert len(logs) == 2 and all(math.isfinite(entry["loss"]) and entry["loss"] > 0 for entry in logs)


@pytest.mark.parametrize("count", [None, 0])
def test_all_masked_labels_give_a_zero_loss_not_nan(store, count):
    model, ntok, _ = build(store, LLAMA)
    batch = make_batch(LLAMA, ntok)
    batch["labels"] = torch.full_like(batch["labels"], -100)
    extra = {} if count is None else {"num_items_in_batch": torch.tensor(count)}
    out = model(**batch, **extra)
    assert out.loss.item() == 0.0
    out.loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() and not g.any() for g in grads)


def test_all_masked_rows_in_tokenized_data_train_without_nan(store, tmp_path):
    model, ntok, _ = build(store, LLAMA)
    prepared = prepare_dataset(
        datasets.Dataset.from_list([{"prompt": "What is 12 plus 30?", "completion": " 42"}] * 4), ntok
    )
    prepared = prepared.map(lambda example: {"completion_mask": [0] * len(example["completion_mask"])})
    trainer = NumberSFTTrainer(
        model=model, args=args(tmp_path, completion_only_loss=True), train_dataset=prepared, processing_class=ntok
    )
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert losses == [0.0, 0.0]
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_a_number_cut_at_max_length_is_dropped_whole(store):
    _, ntok, _ = build(store, Case("llama", "digits", tie=False))
    data = datasets.Dataset.from_list([{"text": "Total 12345 items"}])
    full = prepare_dataset(data, ntok)[0]["input_ids"]
    digits = set(ntok.digit_token_ids)
    first_digit = next(i for i, t in enumerate(full) if t in digits)
    cut = prepare_dataset(data, ntok, max_length=first_digit + 2)[0]  # the cut falls inside "12345"
    kept = cut["input_ids"]
    assert kept == full[: len(kept)] and not digits & set(kept)  # no partial number: none of its digits kept
    assert len(kept) < first_digit + 2


SHORT = {"prompt": "What is 2 plus 3?", "completion": " It is 5."}  # 16 tokens, the last 7 the completion
LONG = {"prompt": "What is 2 plus 3? " * 5, "completion": " It is 5."}  # 53 tokens: max_length=16 cuts the completion
DROPPED = r"2 of 4 examples were dropped: truncated to max_length=16 \(truncation_mode='keep_start'\).*Raise max_len"


def test_examples_dropped_by_max_length_are_counted(store):
    """Before: the two cut examples vanished without a word."""
    _, ntok, _ = build(store, LLAMA)
    with pytest.warns(UserWarning, match=DROPPED):
        prepared = prepare_dataset(datasets.Dataset.from_list([SHORT, LONG, LONG, SHORT]), ntok, max_length=16)
    assert prepared.num_rows == 2


def test_trainer_warns_about_examples_dropped_by_max_length(store, tmp_path):
    with pytest.warns(UserWarning, match=DROPPED):
        trainer, logs = train(store, tmp_path, [SHORT, LONG, SHORT, LONG], max_length=16, max_steps=1)
    assert trainer.train_dataset.num_rows == 2 and len(logs) == 1


def test_streamed_examples_dropped_by_max_length_warn_once(store):
    _, ntok, _ = build(store, LLAMA)
    data = datasets.Dataset.from_list([SHORT, LONG, LONG, SHORT]).to_iterable_dataset()
    prepared = prepare_dataset(data, ntok, max_length=16)
    with pytest.warns(UserWarning, match=r"Examples are dropped: truncated to max_length=16") as caught:
        kept = list(prepared)
    assert len(kept) == 2 and len([w for w in caught if "are dropped" in str(w.message)]) == 1


def test_collator_warns_once_about_examples_that_lose_their_completion(store):
    """Tokenized data is cut by the collator, where the example stays but its every label becomes -100."""
    _, ntok, _ = build(store, LLAMA)
    prepared = list(prepare_dataset(datasets.Dataset.from_list([SHORT, LONG]), ntok))
    collator = NumberDataCollator.from_tokenizer(ntok, max_length=16)
    match = r"1 of 2 examples of this batch lost their whole completion .* max_length=16"
    with pytest.warns(UserWarning, match=match):
        batch = collator(prepared)
    scored = (batch["labels"] != -100).sum(dim=1).tolist()
    assert scored == [7, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        collator(prepared)  # warned once per collator
        NumberDataCollator.from_tokenizer(ntok)(prepared)  # no max_length: nothing is cut
