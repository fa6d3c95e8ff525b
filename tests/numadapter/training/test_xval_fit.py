"""xVal's normalisation fitted by the trainers (``xval_fit``): on the numbers of the training data, written on the
trainer's copy of the config, the tokenizer and the built modules, said in a warning, saved with the adapter; never
over values the user set, never on the caller's config object, refused on a stream."""

from __future__ import annotations

import warnings

import datasets
import pytest
import torch
from helpers.adapter_cases import Store
from helpers.training_cases import sft_args
from transformers import Seq2SeqTrainingArguments

from numadapter.config import NumberAdapterConfig
from numadapter.data.head_coverage import sample_rows
from numadapter.mapping import get_peft_model
from numadapter.methods.xval import fit_normalization
from numadapter.tokenization import NumberTokenizer
from numadapter.training import xval_fit
from numadapter.training.seq2seq import NumberSeq2SeqTrainer
from numadapter.training.sft import NumberSFTTrainer

TOKENIZER_OF = {"llama": "digits", "t5": "t5"}
TARGETS = {"llama": ["q_proj", "v_proj"], "t5": ["q", "v"]}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("xval_fit")))


def miles(n: int = 24) -> datasets.Dataset:
    rows = [{"prompt": f"Convert {10 * k + 5} miles to km:", "completion": f" {round((10 * k + 5) * 1.609344, 2)}"}
            for k in range(n)]  # fmt: skip
    return datasets.Dataset.from_list(rows)


def values_of(data: datasets.Dataset) -> list[float]:
    return [float(r[c].split()[-1].rstrip(":")) if c == "completion" else float(r[c].split()[1])
            for r in data for c in ("prompt", "completion")]  # fmt: skip


def build(store: Store, family: str = "llama", **settings):
    config = NumberAdapterConfig(encoding="xval", int_digits=4, frac_digits=2, r=4, lora_alpha=8,
                                 target_modules=TARGETS[family], **settings)  # fmt: skip
    tokenizer = store.tokenizer(TOKENIZER_OF[family])
    torch.manual_seed(0)
    model = get_peft_model(store.base(family, tie=False, hidden=32), config, tokenizer=tokenizer)
    return model, NumberTokenizer(tokenizer, config), config


def fit_warnings(make) -> tuple[list[str], object]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        made = make()
    return [str(w.message) for w in caught if str(w.message).startswith("xVal: ")], made


@pytest.mark.parametrize("family", ["llama", "t5"])
def test_the_trainer_fits_the_normalisation_on_the_training_numbers(store, tmp_path, family):
    model, ntok, config = build(store, family)
    data = miles()
    assert ntok("Convert 65 miles to km: 104.61")["number_texts"] == []  # before: every value above 5 is text
    if family == "t5":
        args = Seq2SeqTrainingArguments(str(tmp_path / "out"), max_steps=1, report_to=[], save_strategy="no")
        found, trainer = fit_warnings(lambda: NumberSeq2SeqTrainer(model=model, args=args, train_dataset=data,
                                                                   processing_class=ntok))  # fmt: skip
    else:
        found, trainer = fit_warnings(lambda: NumberSFTTrainer(model=model, args=sft_args(tmp_path, max_steps=1),
                                                               train_dataset=data, processing_class=ntok))  # fmt: skip
    center, scale = fit_normalization(values_of(data), "absmax", 5.0)  # every row read: the largest at the clip
    own = model.peft_config["default"]
    assert (own.xval_center, own.xval_scale) == (center, scale)
    assert center == 0.0 and scale == pytest.approx(max(values_of(data)) / 5, rel=1e-6)  # float32, as stored
    assert (config.xval_center, config.xval_scale) == (0.0, 1.0)  # the caller's object is left alone
    assert trainer.processing_class is not None and ntok.config is own
    modules = model.base_model.number_modules["default"]
    assert (modules.embedding.center, modules.embedding.scale) == (center, scale)
    assert (modules.head.center, modules.head.scale) == (center, scale)
    assert ntok("Convert 65 miles to km: 104.61")["number_texts"] == ["65", "104.61"]
    assert len(found) == 1 and f"xval_center=0, xval_scale={scale:.6g} ('absmax')" in found[0]
    assert "beyond them" not in found[0]  # every row read: no headroom
    assert "on the 48 numbers of 24 of the 24 training examples (from 5 to " in found[0]
    assert "xval_fit=None" in found[0]
    # the head starts at the least-squares combination: the mileage times 1.609344, nothing else
    assert "least-squares combination of the 4 numbers before each of 24 answers: weights (1.6093" in found[0]
    weights = modules.head.weights.bias.detach()
    assert weights[0].item() == pytest.approx(1.609344, rel=1e-4) and weights[1:].abs().max() < 1e-6
    assert modules.head.fc2.weight.abs().max() == 0 and abs(modules.head.fc2.bias.item()) < 1e-3
    if family == "llama":
        trainer.train()
        model.save_pretrained(tmp_path / "adapter")
        from peft import PeftModel

        loaded = PeftModel.from_pretrained(store.base(family, tie=False, hidden=32), tmp_path / "adapter")
        saved = loaded.peft_config["default"]
        assert (saved.xval_center, saved.xval_scale) == (center, scale)
        assert loaded.base_model.number_modules["default"].head.scale == scale


def test_a_row_the_sample_missed_keeps_its_numbers(store, tmp_path, monkeypatch):
    """The fit reads a sample of the rows; one it missed may hold a value a little beyond the sample's largest. The
    range reaches 10% beyond them, so that row's numbers are [NUM] as well (before, its answer stayed text in silence
    and the head trained there with no number to read)."""
    monkeypatch.setattr(xval_fit, "SAMPLE_ROWS", 10)
    read = sample_rows(24, 10)
    missed = next(i for i in range(24) if i not in read)
    mileages = [10 * k + 5 for k in range(24)]
    mileages[missed] = round(max(mileages[i] for i in read) * 1.05)  # 5% beyond every value the fit reads
    rows = [{"prompt": f"Convert {m} miles to km:", "completion": f" {round(m * 1.609344, 2)}"} for m in mileages]
    model, ntok, _ = build(store)
    found, _ = fit_warnings(lambda: NumberSFTTrainer(model=model, args=sft_args(tmp_path, max_steps=1),
                                                     train_dataset=datasets.Dataset.from_list(rows),
                                                     processing_class=ntok))  # fmt: skip
    assert "on the 20 numbers of 10 of the 24 training examples" in found[0] and "1.1 x beyond them" in found[0]
    own = model.peft_config["default"]
    largest = max(float(r["completion"]) for i, r in enumerate(rows) if i in read)
    assert own.xval_scale == pytest.approx(largest * xval_fit.HEADROOM / 5, rel=1e-6)
    row = rows[missed]
    assert ntok(row["prompt"] + row["completion"])["number_texts"] == [str(mileages[missed]), row["completion"][1:]]


def test_the_headroom_stops_at_the_digit_places():
    """``limit`` (10^int_digits) caps the reach: no value beyond it can come, so the range need not cover it; a value
    beyond it in the data is still covered, and headroom under 1 is refused."""
    assert fit_normalization([1.0, 9500.0], "absmax", 5.0, 1.1) == (0.0, pytest.approx(10450.0 / 5))
    assert fit_normalization([1.0, 9500.0], "absmax", 5.0, 1.1, limit=1e4) == (0.0, pytest.approx(1e4 / 5))
    assert fit_normalization([1.0, 12000.0], "absmax", 5.0, 1.1, limit=1e4) == (0.0, pytest.approx(12000.0 / 5))
    center, scale = fit_normalization([10.0] * 99 + [1000.0], "standard", 5.0, 1.1)  # an outlier past 5 spreads
    assert center == pytest.approx(19.9) and scale == pytest.approx((1000.0 - 19.9) * 1.1 / 5)
    with pytest.raises(ValueError, match=r"`headroom` must be a finite number >= 1.*0.5"):
        fit_normalization([1.0], "absmax", 5.0, 0.5)


def test_values_the_user_set_are_kept_and_none_never_fits(store, tmp_path):
    for settings in ({"xval_scale": 400.0}, {"xval_fit": None}):
        model, ntok, _ = build(store, **settings)
        args = sft_args(tmp_path, max_steps=1)
        found, _ = fit_warnings(lambda m=model, t=ntok, a=args: NumberSFTTrainer(m, a, train_dataset=miles(),
                                                                                 processing_class=t))  # fmt: skip
        own = model.peft_config["default"]
        assert found == [] and own.xval_scale == settings.get("xval_scale", 1.0) and own.xval_center == 0.0


def test_standard_centres_on_the_mean_and_the_fit_decides_once(store, tmp_path):
    model, ntok, _ = build(store, xval_fit="standard")
    NumberSFTTrainer(model=model, args=sft_args(tmp_path, max_steps=1), train_dataset=miles(), processing_class=ntok)
    own = model.peft_config["default"]
    assert (own.xval_center, own.xval_scale) == fit_normalization(values_of(miles()), "standard", 5.0)
    assert own.xval_center > 100
    found, _ = fit_warnings(lambda: NumberSFTTrainer(model=model, args=sft_args(tmp_path, max_steps=1),
                                                     train_dataset=miles(4), processing_class=ntok))  # fmt: skip
    assert found == []  # fitted values are the adapter's: a second trainer on it keeps them


def test_a_stream_is_refused_with_the_fix(store, tmp_path):
    model, ntok, _ = build(store)
    stream = miles().to_iterable_dataset()
    with pytest.raises(ValueError, match=r"stream \(IterableDataset\).*set xval_center and xval_scale"):
        NumberSFTTrainer(model=model, args=sft_args(tmp_path, max_steps=1), train_dataset=stream,
                         processing_class=ntok)  # fmt: skip


def test_chat_data_is_fitted_on_its_numbers_and_generates_right_after_training(store, tmp_path):
    """xVal's default on `messages` data, as a TRL user brings it: the fit reads the numbers of the conversations, the
    trainer trains on them, and ``model.generate`` straight after ``train()`` (TRL leaves the model in train mode)
    answers a padded batch of chats as it answers each chat alone, with no [NUM] left in the text."""
    model, ntok, _ = build(store)
    ntok.tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    chats = [[{"role": "user", "content": r["prompt"]}, {"role": "assistant", "content": r["completion"].strip()}]
             for r in miles()]  # fmt: skip
    data = datasets.Dataset.from_list([{"messages": chat} for chat in chats])
    found, trainer = fit_warnings(lambda: NumberSFTTrainer(model=model, args=sft_args(tmp_path, max_steps=2),
                                                           train_dataset=data, processing_class=ntok))  # fmt: skip
    center, scale = fit_normalization(values_of(miles()), "absmax", 5.0)
    assert (model.peft_config["default"].xval_center, model.peft_config["default"].xval_scale) == (center, scale)
    assert len(found) == 1 and "on the 48 numbers of 24 of the 24 training examples" in found[0]
    trainer.train()
    assert model.training  # as TRL leaves it
    prompts = [chat[:1] for chat in chats[:3]]
    ntok.tokenizer.padding_side = "left"
    batch = ntok.apply_chat_template(prompts, return_tensors="pt", padding=True)
    together = model.generate(**batch, max_new_tokens=6, do_sample=False)
    width = batch["input_ids"].shape[1]
    texts = [ntok.decode(row[width:], skip_special_tokens=True) for row in together]
    for prompt, text in zip(prompts, texts):
        alone = ntok.apply_chat_template([prompt], return_tensors="pt")
        out = model.generate(**alone, max_new_tokens=6, do_sample=False)
        assert ntok.decode(out[0, alone["input_ids"].shape[1] :], skip_special_tokens=True) == text
        assert ntok.config.num_token not in text
