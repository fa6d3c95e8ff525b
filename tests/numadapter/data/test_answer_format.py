"""answer_format="head": one-number answers trained at the number head without being fed (mixed batches too)."""

from __future__ import annotations

import datasets
import pytest
import torch
from trl import SFTConfig

import numadapter
from numadapter.data.answer_format import answer_number_position, check_answer_format
from numadapter.data.collator import NumberDataCollator

NUM, EOS, PAD = 7, 2, 0


def _example(ids, completion, numbers):
    """An example with [NUM] (id 7) tokens whose 2-place digits are given in order."""
    mask = [int(i == NUM) for i in ids]
    found = iter(numbers)
    digits = [list(next(found)) if m else [0, 0] for m in mask]
    values = [float(d[0] * 10 + d[1]) for d in digits]
    return {"input_ids": ids, "completion_mask": completion, "num_mask": mask, "num_digits": digits,
            "num_sign": mask, "num_values": values}  # fmt: skip


def test_one_number_answer_is_cut_before_it_and_mixed_rows_stay_sequences():
    collator = NumberDataCollator(pad_token_id=PAD, num_places=2, answer_format="head", eos_token_ids=[EOS])
    head = _example([5, NUM, 9, 4, NUM, EOS], [0, 0, 0, 1, 1, 1], [(1, 2), (4, 2)])  # "12 + ' ' 42 eos"
    text_after = _example([5, NUM, 4, NUM, 8, EOS], [0, 0, 1, 1, 1, 1], [(1, 2), (3, 3)])  # "... 33 apples eos"
    batch = collator([head, text_after])
    # the head row is fed up to the space before its answer; the space predicts the answer [NUM] and its number
    assert batch["input_ids"].tolist() == [[5, NUM, 9, 4, PAD, PAD], [5, NUM, 4, NUM, 8, EOS]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 0, 0], [1] * 6]
    assert batch["shift_labels"].tolist() == [[-100, -100, 4, NUM, -100, -100], [-100, 4, NUM, 8, EOS, -100]]
    assert batch["labels_num_mask"].tolist() == [[0, 0, 0, 1, 0, 0], [0, 0, 1, 0, 0, 0]]
    assert batch["labels_num_digits"][0, 3].tolist() == [4, 2] and batch["labels_num_digits"][1, 2].tolist() == [3, 3]
    assert batch["labels_num_values"][0, 3].item() == 42.0
    # the input side keeps the prompt's numbers, aligned with the (cut) ids
    assert batch["num_mask"].tolist() == [[0, 1, 0, 0, 0, 0], [0, 1, 0, 1, 0, 0]]
    assert batch["num_digits"][0, 1].tolist() == [1, 2]


def test_the_rule_for_a_one_number_answer():
    assert answer_number_position([-100, 4, NUM, EOS], [0, 0, 1, 0], [EOS]) == 2
    assert answer_number_position([-100, 4, NUM], [0, 0, 1], [EOS]) == 2  # no EOS after it
    assert answer_number_position([-100, NUM, 4, NUM, EOS], [0, 1, 0, 1, 0], [EOS]) is None  # two numbers
    assert answer_number_position([-100, -100, 4, 8, EOS], [0, 0, 0, 0, 0], [EOS]) is None  # none (e.g. text)
    assert answer_number_position([NUM, EOS], [1, 0], [EOS]) is None  # nothing to feed before it (causal)
    assert answer_number_position([NUM, EOS], [1, 0], [EOS], first=0) == 0  # T5
    with pytest.raises(ValueError, match="'sequence', 'head'"):
        check_answer_format("prompt")
    with pytest.raises(ValueError, match="encoding='digits'"):
        NumberDataCollator(pad_token_id=PAD, num_places=2, answer_format="head", digit_token_ids=list(range(10)))


def test_seq2seq_target_drops_the_eos_after_a_one_number_answer():
    collator = NumberDataCollator(pad_token_id=PAD, num_places=2, seq2seq=True, answer_format="head",
                                  eos_token_ids=[EOS])  # fmt: skip
    source = _example([5, NUM, 9], [1, 1, 1], [(1, 2)])
    one = {**source, "labels": [NUM, EOS], "labels_num_mask": [1, 0], "labels_num_digits": [[4, 2], [0, 0]]}
    two = {
        **source,
        "labels": [NUM, 8, EOS],
        "labels_num_mask": [1, 0, 0],
        "labels_num_digits": [[3, 3], [0, 0], [0, 0]],
    }
    batch = collator([one, two])
    assert batch["labels"].tolist() == [[NUM, -100, -100], [NUM, 8, EOS]]
    assert batch["labels_num_mask"].tolist() == [[1, 0, 0], [1, 0, 0]]


def test_head_batches_give_the_models_loss_on_the_cut_prompt(tmp_path):
    """Through NumberSFTTrainer: the head-format loss equals the model's loss on the prompt alone, with the answer
    given by hand as shift_labels + labels_num_* (an independent construction)."""
    from helpers.quickstart_specs import SMALL_SPEC as SPEC
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from numadapter.testing.tiny_base import build_tiny_base

    path = str(tmp_path / "base")
    build_tiny_base(path, SPEC, seed=0, print_fn=lambda line: None)
    tokenizer = AutoTokenizer.from_pretrained(path)
    config = numadapter.NumberAdapterConfig(encoding="fone", int_digits=4, frac_digits=0, r=4, fone_numbers="all",
                                            target_modules=["q_proj"], init_lora_weights=False)  # fmt: skip
    torch.manual_seed(0)
    model = numadapter.get_peft_model(AutoModelForCausalLM.from_pretrained(path), config, tokenizer=tokenizer)
    ntok = numadapter.NumberTokenizer(tokenizer, config)
    rows = [{"prompt": "12 + 30 =", "completion": " 42"}, {"prompt": "I have", "completion": " 3 apples."}]
    args = SFTConfig(output_dir=str(tmp_path / "run"), per_device_train_batch_size=2, report_to=[], use_cpu=True,
                     bf16=False, max_steps=1, save_strategy="no")  # fmt: skip
    trainer = numadapter.NumberSFTTrainer(model=model, args=args, train_dataset=datasets.Dataset.from_list(rows),
                                          processing_class=ntok, answer_format="head")  # fmt: skip
    batch = trainer.data_collator([trainer.train_dataset[0]])
    model.eval()
    with torch.no_grad():
        got = trainer.compute_loss(model, batch, return_outputs=True)
        prompt = ntok(["12 + 30 = "], return_tensors="pt")
        prompt.pop("number_texts")
        length = prompt["input_ids"].shape[1]
        assert torch.equal(batch["input_ids"], prompt["input_ids"])  # the answer [NUM] and its EOS are not fed
        shift = torch.full((1, length), -100)
        shift[0, -1] = ntok.num_token_id
        answer = ntok(["42"], return_tensors="pt")
        at = answer["num_mask"][0].nonzero()[0, 0]
        hand = {"shift_labels": shift, "labels_num_mask": torch.zeros(1, length, dtype=torch.long)}
        hand["labels_num_mask"][0, -1] = 1
        for key in ("num_digits", "num_sign", "num_values"):
            column = torch.zeros_like(prompt[key])
            column[0, -1] = answer[key][0, at]
            hand["labels_" + key] = column
        want = model(**prompt, **hand)
    # the trainer's batch also scores the completion's space (2 scored labels, per-token normalisation): the same
    # number-loss sum is divided by 2 labels there, by 1 here
    torch.testing.assert_close(got[1].number_loss * 2, want.number_loss)
    assert want.number_loss > 0
    trainer.train()  # a mixed batch (one head row, one sequence row) trains
