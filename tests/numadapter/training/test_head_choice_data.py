"""The head choice on the data users bring: chat turns, streamed, tokenized, sorted and concatenated data, and a
config object reused for a second run. Each decision comes from a sample drawn across the data, counts the numbers
the model is trained to write, and lands on the model's and the tokenizer's copies of the config, never the caller's.
"""

from __future__ import annotations

import random
import warnings

import datasets
import pytest
import torch
from helpers.adapter_cases import Store
from helpers.training_cases import arithmetic, sft_args

import numadapter.training.head_choice as head_choice
from numadapter.config import NumberAdapterConfig
from numadapter.data.prepare import prepare_dataset
from numadapter.mapping import get_peft_model
from numadapter.schema import CONTEXT_KIND, KIND_FIELD, MARKER_KIND
from numadapter.tokenization import NumberTokenizer
from numadapter.training.sft import NumberSFTTrainer

CHAT = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
CHAT += "{% if add_generation_prompt %}assistant:{% endif %}"
SETTINGS = dict(int_digits=4, frac_digits=0, r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"])


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("head_choice_data")))


def twice_plus_one(n: int, seed: int = 0) -> datasets.Dataset:
    """Answers no combination of the numbers before them forms: 2a + 1."""
    rng = random.Random(seed)
    return datasets.Dataset.from_list(
        [{"prompt": f"Twice {a} plus one is", "completion": f" {2 * a + 1}."} for a in rng.sample(range(10, 99), n)]
    )


def as_messages(data: datasets.Dataset) -> datasets.Dataset:
    return datasets.Dataset.from_list(
        [
            {"messages": [{"role": "user", "content": r["prompt"]}, {"role": "assistant", "content": r["completion"]}]}
            for r in data
        ]  # fmt: skip
    )


def model_and_tokenizer(store: Store, config: NumberAdapterConfig):
    tokenizer = store.tokenizer("digits")
    tokenizer.chat_template = CHAT
    torch.manual_seed(0)
    model = get_peft_model(store.base("llama", tie=False, hidden=32), config, tokenizer=tokenizer)
    return model, NumberTokenizer(tokenizer, config)


def decide(store: Store, tmp_path, data, config: NumberAdapterConfig | None = None, ntok=None, **args):
    """The trainer built on `data` (no step run) and the warnings it gave."""
    config = config or NumberAdapterConfig(encoding="fone", **SETTINGS)
    model, own = model_and_tokenizer(store, config)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = NumberSFTTrainer(
            model=model, args=sft_args(tmp_path, max_steps=1, **args), train_dataset=data, processing_class=ntok or own
        )
    return trainer, [str(w.message) for w in caught if "FoNE context head" in str(w.message)]


def in_use(trainer) -> bool | None:
    return trainer.model.peft_config[trainer.model.active_adapter].fone_head_in_use


def test_chat_sums_keep_the_head_counting_the_assistant_turns(store, tmp_path):
    """Sums as `messages`: the question's operands are context, the assistant's sum the answer (before: every
    number counted, 33% formable, the head left out)."""
    trainer, said = decide(store, tmp_path, as_messages(arithmetic(16)))
    assert in_use(trainer) is True and trainer.processing_class.config.fone_head_in_use is True
    assert "counting the numbers of the assistant turns" in said[0] and "form 16 of 16 answers (100%" in said[0]
    trainer.train()  # trains with every token in the loss, as TRL does for messages


def test_a_text_column_says_what_it_counts(store, tmp_path):
    text = datasets.Dataset.from_list([{"text": r["prompt"] + r["completion"]} for r in arithmetic(16)])
    trainer, said = decide(store, tmp_path, text)
    assert (
        in_use(trainer) is False
        and "every number of the text" in said[0]
        and "prompt/completion or messages" in said[0]
    )


def pens(n: int, equations: bool, seed: int = 0) -> datasets.Dataset:
    """Whole worked solutions: operands and numbers restated in prose, the computed ones each an equation's result
    (`equations`), or the same solution told in prose, where its answer is two steps from the numbers before it."""
    rng, rows = random.Random(seed), []
    while len(rows) < n:
        a, b, c = rng.randint(2, 30), rng.randint(2, 30), rng.randint(1, 99)
        if c >= a * b or len({a, b, c, a * b, a * b - c}) < 5:
            continue
        prompt = f"Question: {a} boxes of {b} pens, and she gives away {c}. How many are left?\nAnswer:"
        if equations:
            steps = (
                f" She has {a} boxes of {b} pens.\n{a} * {b} = {a * b} pens.\nShe keeps {a * b} - {c} = {a * b - c}."
            )
        else:
            steps = f" She has {a} boxes of {b} pens and keeps {a * b - c} of them."
        rows.append({"prompt": prompt, "completion": f"{steps}\n#### {a * b - c}"})
    return datasets.Dataset.from_list(rows)


def test_whole_solutions_keep_the_head_counting_each_equations_result(store, tmp_path):
    """Every completion number counted (operands, restated numbers): 2 of 9 formable, the head left out; each
    equation's result counted: every one formable, the head kept, and only the results and their repeats (the
    operand a*b, the final answer: copies of [NUM]s) are [NUM]s."""
    trainer, said = decide(store, tmp_path, pens(16, equations=True))
    assert in_use(trainer) is True
    assert "only each equation's result" in said[0] and "form 64 of 64 answers (100%" in said[0]
    markers = [sum(k == MARKER_KIND for k in row[KIND_FIELD]) for row in trainer.train_dataset]
    assert set(markers) == {0, 4}  # results and repeats, or none in a text fone_digit_answers keeps in digits
    text = datasets.Dataset.from_list([{"text": r["prompt"] + r["completion"]} for r in pens(16, equations=True)])
    trainer, said = decide(store, tmp_path, text)  # as one text column: the question's numbers are no results either
    assert in_use(trainer) is True and "form 64 of 64 answers" in said[0]


def test_the_same_solutions_in_prose_leave_the_head_out(store, tmp_path):
    trainer, said = decide(store, tmp_path, pens(16, equations=False))
    assert in_use(trainer) is False and "form 0 of 64 answers (0%" in said[0]  # a, b, a*b-c, its copy
    formed = sum(k == MARKER_KIND for row in trainer.train_dataset for k in row[KIND_FIELD])
    assert formed == 0 and "fone_head_in_use=False" in said[0]


def test_answers_beyond_the_places_are_counted_and_named(store, tmp_path):
    """Products of 5 digits with int_digits=4: each one an answer the head cannot write (it stays text), counted
    as such, and the warning names the places that would hold them."""
    rng = random.Random(0)
    seats = [(rng.randint(120, 300), rng.randint(90, 99)) for _ in range(16)]
    data = datasets.Dataset.from_list(
        [{"prompt": f"{a} rows of {b} seats.", "completion": f" {a} * {b} = {a * b} seats."} for a, b in seats]
    )
    trainer, said = decide(store, tmp_path, data)
    assert in_use(trainer) is False and "form 0 of 16 answers (0%" in said[0]
    assert "16 of the answers need more places than int_digits=4, frac_digits=0" in said[0]
    assert "int_digits=5 holds every answer read" in said[0]


def test_a_second_chat_turn_writes_only_the_assistants_numbers_as_num(store):
    """The user's 7 in the second turn is 12 - 5 of the numbers before it: context all the same, never a [NUM]."""
    _, ntok = model_and_tokenizer(store, NumberAdapterConfig(encoding="fone", fone_digit_answers=0.0, **SETTINGS))
    turns = [("user", "What is 12 plus 30?"), ("assistant", "It is 42."), ("user", "And 5 plus 7?"),
             ("assistant", "It is 12.")]  # fmt: skip
    data = datasets.Dataset.from_list([{"messages": [{"role": r, "content": c} for r, c in turns]}])
    (row,) = prepare_dataset(data, ntok)
    assert row[KIND_FIELD] == [CONTEXT_KIND, CONTEXT_KIND, MARKER_KIND, CONTEXT_KIND, CONTEXT_KIND, MARKER_KIND]
    assert "completion_mask" not in row  # every token trained unless assistant_only_loss
    (masked,) = prepare_dataset(data, ntok, assistant_only_loss=True)
    assert masked["input_ids"] == row["input_ids"]
    mask, ids = masked["completion_mask"], masked["input_ids"]
    text = ntok.apply_chat_template([{"role": r, "content": c} for r, c in turns], tokenize=False)
    trained = ntok.tokenizer.decode([i for i, m in zip(ids, mask) if m and i != ntok.num_token_id])
    assert trained.replace(" ", "") == "Itis.\nItis.\n" and "user" not in trained  # the two turns' own text
    assert [mask[p] for p in masked["number_positions"]] == [0, 0, 1, 0, 0, 1]
    assert text.count("assistant: ") == 2


def test_assistant_only_loss_trains_the_assistant_turns(store, tmp_path):
    trainer, _ = decide(store, tmp_path, as_messages(arithmetic(8)), assistant_only_loss=True)
    batch = trainer.data_collator([trainer.train_dataset[0]])
    labels, ids = batch["labels"][0], batch["input_ids"][0]
    user = ntok_ids(trainer, "user")
    assert all(labels[t] == -100 for t in range(len(ids)) if int(ids[t]) in user)
    assert (labels != -100).sum() < (batch["attention_mask"][0] == 1).sum()  # fewer labels than tokens
    trainer.train()
    with pytest.raises(ValueError, match=r"assistant_only_loss=True trains the assistant turns of `messages`"):
        decide(store, tmp_path, arithmetic(8), assistant_only_loss=True)


def ntok_ids(trainer, word: str) -> set[int]:
    return set(trainer.processing_class.tokenizer(word, add_special_tokens=False)["input_ids"])


@pytest.mark.parametrize("order", ["sums_first", "sums_last", "shuffled"])
def test_sorted_and_concatenated_data_decide_as_the_shuffled_set(store, tmp_path, monkeypatch, order):
    """16 sums among 64 rows (25%, under the 0.5 share): read from a sample drawn across the set, every order leaves
    the head out (before: the first rows decided, and sums first kept it). The warning says what was read."""
    monkeypatch.setattr(head_choice, "SAMPLE_ROWS", 16)
    parts = [arithmetic(16), twice_plus_one(48)]
    data = datasets.concatenate_datasets(parts if order != "sums_last" else parts[::-1])
    if order == "shuffled":
        data = data.shuffle(seed=1)
    trainer, said = decide(store, tmp_path, data)
    assert in_use(trainer) is False
    assert "in 16 of the 64 training examples (drawn at random across the data set, seed 0)" in said[0]


def test_streamed_and_tokenized_data_are_refused_until_decided(store, tmp_path):
    rows = arithmetic(8)
    tokenizer = NumberTokenizer(store.tokenizer("digits"), NumberAdapterConfig(encoding="fone", **SETTINGS))
    for data, what in (
        (rows.to_iterable_dataset(), "a stream"),
        (prepare_dataset(rows, tokenizer), "already tokenized"),
    ):
        with pytest.raises(ValueError, match=rf"fone_head_in_use=None.*{what}.*set fone_head_in_use=True"):
            decide(store, tmp_path, data)
    decided = NumberAdapterConfig(encoding="fone", fone_head_in_use=True, **SETTINGS)
    trainer, said = decide(store, tmp_path, rows.to_iterable_dataset(), config=decided)
    assert in_use(trainer) is True and not said


def test_a_reused_config_object_decides_from_each_runs_data(store, tmp_path):
    """One config for two runs (a notebook, a sweep): the first run's decision lands on its model and tokenizer,
    the caller's object stays undecided, and the second run decides from its own data, with the first run's
    tokenizer too."""
    config = NumberAdapterConfig(encoding="fone", **SETTINGS)
    first, _ = decide(store, tmp_path / "a", arithmetic(16), config=config)
    assert in_use(first) is True and config.fone_head_in_use is None
    second, said = decide(store, tmp_path / "b", twice_plus_one(16), config=config)
    assert in_use(second) is False and config.fone_head_in_use is None and "form 0 of 16" in said[0]
    third, _ = decide(store, tmp_path / "c", twice_plus_one(16), config=config, ntok=first.processing_class)
    assert in_use(third) is False and third.processing_class.config.fone_head_in_use is False


def test_the_seq2seq_trainer_warns_about_answers_the_head_cannot_form(store, tmp_path):
    """NumberSeq2SeqTrainer gave no coverage warning at all; it counts the targets' numbers, with the source's numbers
    as their context, as NumberSFTTrainer counts completions."""
    from helpers.adapter_cases import Case, build
    from transformers import Seq2SeqTrainingArguments

    from numadapter.training.seq2seq import NumberSeq2SeqTrainer

    args = Seq2SeqTrainingArguments(str(tmp_path / "t5"), max_steps=1, report_to=[], save_strategy="no")
    model, ntok, _ = build(store, Case("t5", "fone", tie=False))
    with pytest.warns(UserWarning, match=r"16 of 16 training answers \(100%\) are no sum or difference"):
        NumberSeq2SeqTrainer(model=model, args=args, train_dataset=twice_plus_one(16), processing_class=ntok)
    model, ntok, _ = build(store, Case("t5", "fone", tie=False))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        NumberSeq2SeqTrainer(model=model, args=args, train_dataset=arithmetic(16), processing_class=ntok)
    assert not [w for w in caught if "no sum or difference" in str(w.message)]
