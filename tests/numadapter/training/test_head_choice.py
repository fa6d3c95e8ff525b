"""fone_head_in_use: NumberSFTTrainer leaves the context head out where it forms few training answers; the adapter
then trains and writes numbers as LoRA on digits does (same LoRA weights), and says so."""

from __future__ import annotations

import random
import warnings

import datasets
import peft
import pytest
import torch
from helpers.adapter_cases import Store
from helpers.training_cases import arithmetic, sft_args
from transformers import pipeline

from numadapter.config import NumberAdapterConfig
from numadapter.data.head_coverage import head_share
from numadapter.export import export_merged, load_exported
from numadapter.generation import generate
from numadapter.mapping import get_peft_model
from numadapter.schema import KIND_FIELD
from numadapter.tokenization import NumberTokenizer
from numadapter.training.sft import NumberSFTTrainer


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("head_choice")))


def twice_plus_one(n: int, seed: int = 0) -> datasets.Dataset:
    """Answers the head cannot form from the numbers before them: 2a + 1 (no sum, product or copy of a)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a = rng.randrange(10, 100)
        rows.append({"prompt": f"Twice {a} plus one is", "completion": f" {2 * a + 1}."})
    return datasets.Dataset.from_list(rows)


def trainer_for(store: Store, tmp_path, data: datasets.Dataset, encoding: str = "fone", steps: int = 3, **config):
    tokenizer = store.tokenizer("digits")
    settings = dict(
        int_digits=4, frac_digits=0, r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"]
    )
    adapter = NumberAdapterConfig(encoding=encoding, **settings, **config)
    torch.manual_seed(0)
    model = get_peft_model(store.base("llama", tie=False, hidden=32), adapter, tokenizer=tokenizer)
    ntok = NumberTokenizer(tokenizer, adapter)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = NumberSFTTrainer(
            model=model, args=sft_args(tmp_path, max_steps=steps, learning_rate=1e-2), train_dataset=data,
            processing_class=ntok,
        )  # fmt: skip
    return trainer, ntok, [str(w.message) for w in caught]


def test_head_left_out_where_it_forms_no_answer(store, tmp_path):
    trainer, ntok, caught = trainer_for(store, tmp_path, twice_plus_one(16))
    config = trainer.model.peft_config[trainer.model.active_adapter]
    assert config.fone_head_in_use is False and ntok.config.fone_head_in_use is False
    said = [m for m in caught if "fone_head_in_use=False" in m]
    assert said and "in 16 of the 16 training examples, counting the numbers of the completions" in said[0]
    assert "form 0 of 16 answers" in said[0] and "fone_head_min_share=0.5" in said[0]
    assert all(kind != 1 for row in trainer.train_dataset for kind in row[KIND_FIELD])  # no [NUM] to train
    enc = ntok(["Twice 12 plus one is"], return_tensors="pt")
    with torch.no_grad():
        logits = trainer.model(**{k: v for k, v in enc.items() if k != "number_texts"}).logits
    assert torch.isneginf(logits[..., ntok.num_token_id]).all() and torch.isfinite(logits[..., :-1]).all()
    trainer.train()
    out = generate(trainer.model, ntok, ["Twice 12 plus one is"], max_new_tokens=6, return_dict=True)
    assert ntok.num_token_id not in list(out.token_ids[0])  # nothing written through the head
    trainer.save_model(str(tmp_path / "saved"))
    loaded = NumberTokenizer.from_pretrained(str(tmp_path / "saved"))
    assert loaded.config.fone_head_in_use is False  # the decision travels with the adapter's tokenizer


def test_head_used_where_it_forms_the_answers(store, tmp_path):
    trainer, ntok, caught = trainer_for(store, tmp_path, arithmetic(16))
    assert ntok.config.fone_head_in_use is True and not [m for m in caught if "fone_head_in_use=False" in m]
    said = [m for m in caught if "fone_head_in_use=True" in m]  # the choice is said under default settings too
    assert said and "form 16 of 16 answers (100%" in said[0] and "Set fone_head_in_use to False" in said[0]
    assert any(kind == 1 for row in trainer.train_dataset for kind in row[KIND_FIELD])  # sums written as [NUM]


def test_head_left_out_where_it_forms_under_half_of_the_answers(store, tmp_path):
    """5 sums among 11 answers the head cannot form (31%, as the suite's expressions): left out by default (the LM
    beside a head that writes a third of the answers wrote its own digit answers worse), kept at a lower share."""
    data = datasets.concatenate_datasets([arithmetic(5), twice_plus_one(11)])
    trainer, ntok, caught = trainer_for(store, tmp_path, data, steps=1)
    assert ntok.config.fone_head_in_use is False
    assert [m for m in caught if "form 5 of 16 answers (31%" in m], caught
    trainer, ntok, _ = trainer_for(store, tmp_path, data, steps=1, fone_head_min_share=0.3)
    assert ntok.config.fone_head_in_use is True


def test_a_decided_or_zero_share_keeps_the_head(store, tmp_path):
    trainer, ntok, _ = trainer_for(store, tmp_path, twice_plus_one(16), fone_head_min_share=0.0)
    assert ntok.config.fone_head_in_use is True
    trainer, ntok, _ = trainer_for(store, tmp_path, twice_plus_one(16), fone_head_in_use=True)
    assert ntok.config.fone_head_in_use is True


def test_head_share_counts_formable_answers_whatever_the_digit_share(store):
    tokenizer = store.tokenizer("digits")
    config = NumberAdapterConfig(encoding="fone", int_digits=4, frac_digits=0, fone_digit_answers=0.9)
    ntok = NumberTokenizer(tokenizer, config)
    rows = datasets.Dataset.from_list(list(arithmetic(10)) + list(twice_plus_one(30)))
    from numadapter.data.prepare import prepare_dataset

    assert head_share(rows, ntok, prepare_dataset) == (10, 40)
    assert config.fone_digit_answers == 0.9 and config.fone_head_in_use is None  # measured on a copy


def test_left_out_head_trains_as_lora_on_digits(store, tmp_path):
    """The same seed, data and steps: the FoNE adapter without its head (number modules at 10x, as the quick start
    sets them) ends with LoRA on digits' LoRA weights; its rows train at LoRA's rate."""
    data = twice_plus_one(16)
    fone, _, _ = trainer_for(store, tmp_path / "fone", data, steps=4, number_lr_ratio=10.0)
    digits, _, _ = trainer_for(store, tmp_path / "digits", data, encoding="digits", steps=4)
    assert fone.model.peft_config["default"].fone_head_in_use is False
    fone.train()
    digits.train()
    lora = {n: p for n, p in digits.model.named_parameters() if "lora_" in n}
    theirs = {n: p for n, p in fone.model.named_parameters() if "lora_" in n}
    assert lora.keys() == theirs.keys() and lora
    moved = max((p - 0).abs().max().item() for n, p in lora.items() if "lora_B" in n)
    assert moved > 0  # LoRA trained
    for name, weight in lora.items():
        torch.testing.assert_close(theirs[name], weight, rtol=1e-4, atol=1e-6, msg=name)
    rate = {id(p): group["initial_lr"] for group in fone.optimizer.param_groups for p in group["params"]}
    rows = [p for n, p in fone.model.named_parameters() if "trainable_tokens_delta" in n]
    assert rows and all(rate[id(p)] == pytest.approx(1e-2) for p in rows)  # LoRA's rate, not 10x


def test_rows_follow_number_lr_ratio_while_the_head_is_in_use(store, tmp_path):
    trainer, _, _ = trainer_for(store, tmp_path, arithmetic(16), steps=1, number_lr_ratio=10.0)
    trainer.train()
    rate = {id(p): group["initial_lr"] for group in trainer.optimizer.param_groups for p in group["params"]}
    rows = [p for n, p in trainer.model.named_parameters() if "trainable_tokens_delta" in n]
    assert rows and all(rate[id(p)] == pytest.approx(1e-1) for p in rows)


def ledgers(n: int, seed: int = 0) -> datasets.Dataset:
    """A balance after deposits and withdrawals, the opening balance 5 to 9 numbers back (after an id, a date and
    list numbers): beyond the last 4 numbers, within the pointer's 16."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        opening = rng.randrange(500, 1000)
        changes = [(rng.choice(["in", "out"]), rng.randrange(10, 100)) for _ in range(rng.randint(2, 4))]
        balance = opening + sum(v if kind == "in" else -v for kind, v in changes)
        items = " ".join(f"{i}) {kind} {v}" for i, (kind, v) in enumerate(changes, 1))
        prompt = f"Id {rng.randrange(100, 1000)}, day {rng.randrange(1, 29)}. Open {opening}. {items}. Close:"
        rows.append({"prompt": prompt, "completion": f" {balance}."})
    return datasets.Dataset.from_list(rows)


def test_pointer_chosen_where_the_numbers_lie_further_back(store, tmp_path):
    """The last 4 numbers form few ledger balances, the last 16 chosen by their keys form all: the trainer turns the
    pointer on, on both configs, builds the head for it, and trains and saves it; reloaded, it is the pointer, and
    merged into one checkpoint (`export_merged`) it writes the same numbers, through `generate` and the number
    pipeline. The switch is a warning that says what it chose; products (left at None) go off with it: the pointer
    combines by sums only."""
    trainer, ntok, caught = trainer_for(store, tmp_path, ledgers(16), steps=2)
    assert ntok.config.fone_context_products is False
    said = [m for m in caught if "fone_context_pointer=True" in m]
    assert said and "choosing each of the last 16 by its own key forms 16 (100%)" in said[0]
    config = trainer.model.peft_config[trainer.model.active_adapter]
    assert config.fone_context_pointer is True and ntok.config.fone_context_pointer is True
    assert config.fone_context_numbers == ntok.config.fone_context_numbers == 16
    assert ntok.config.fone_head_in_use is True and not [m for m in caught if "fone_head_in_use=False" in m]
    head = trainer.model.base_model.number_modules["default"].head
    assert head.pointer is not None and head.pointer.count == 16 and not hasattr(head, "coefficients")
    from numadapter.data.prepare import prepare_dataset

    assert head_share(ledgers(16), ntok, prepare_dataset) == (16, 16)  # every balance formable now
    assert any(kind == 1 for row in trainer.train_dataset for kind in row[KIND_FIELD])  # half of them written [NUM]
    before = head.pointer.query.weight.detach().clone()
    trainer.train()
    assert not torch.equal(before, head.pointer.query.weight)  # the new head is the one trained
    trainer.save_model(str(tmp_path / "saved"))
    loaded = peft.PeftModel.from_pretrained(store.base("llama", tie=False, hidden=32), str(tmp_path / "saved"))
    reloaded = NumberTokenizer.from_pretrained(str(tmp_path / "saved"))
    assert reloaded.config.fone_context_pointer is True and reloaded.config.fone_context_numbers == 16
    loaded_head = loaded.base_model.number_modules["default"].head
    assert torch.equal(loaded_head.pointer.query.weight, head.pointer.query.weight)
    prompts = [row["prompt"] for row in ledgers(3, seed=1)]
    trainer.model.eval()
    ours = generate(trainer.model, ntok, prompts, max_new_tokens=4, return_dict=True)
    theirs = generate(loaded.eval(), reloaded, prompts, max_new_tokens=4, return_dict=True)
    assert ours.completions == theirs.completions
    assert sum(map(len, ours.numbers)) >= 2  # the head wrote numbers: the comparisons below decode through it
    export_merged(trainer.model, ntok, tmp_path / "merged")  # the pointer survives the merge into one checkpoint
    merged, merged_ntok = load_exported(tmp_path / "merged")
    assert merged_ntok.config.fone_context_pointer is True
    assert generate(merged, merged_ntok, prompts, max_new_tokens=4, return_dict=True).completions == ours.completions
    pipe = pipeline("number-text-generation", model=merged, tokenizer=merged_ntok, do_sample=False)
    assert [pipe(p, max_new_tokens=4)[0]["generated_text"] for p in prompts] == ours.texts


def test_pointer_not_chosen_where_it_forms_no_more(store, tmp_path):
    """Answers no combination forms: the pointer is measured but not taken, and the head is left out as before."""
    trainer, ntok, _ = trainer_for(store, tmp_path, twice_plus_one(16), steps=1)
    assert ntok.config.fone_head_in_use is False and ntok.config.fone_context_pointer is None
    assert trainer.model.base_model.number_modules["default"].head.pointer is None
    trainer, ntok, _ = trainer_for(store, tmp_path, arithmetic(16), steps=1)  # the last 4 form them: kept as is
    assert ntok.config.fone_head_in_use is True and ntok.config.fone_context_pointer is None


@pytest.mark.parametrize("explicit", [{"fone_context_products": True}, {"fone_context_numbers": 4}])
def test_pointer_not_chosen_over_an_explicit_setting(store, tmp_path, explicit):
    """The user set the count or products: the trainer keeps them (it replaced them before) and says in its warning
    what the pointer would have formed and how to let it choose."""
    trainer, ntok, caught = trainer_for(store, tmp_path, ledgers(16), steps=1, **explicit)
    config = trainer.model.peft_config[trainer.model.active_adapter]
    ((name, value),) = explicit.items()
    assert getattr(config, name) == getattr(ntok.config, name) == value
    assert (
        config.fone_context_pointer is None and trainer.model.base_model.number_modules["default"].head.pointer is None
    )
    said = [m for m in caught if "is not chosen" in m]
    assert said and f"{name}={value!r} was set" in said[0] and "leave those at None" in said[0]
