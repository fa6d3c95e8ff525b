"""The context head on the real checkpoint (SmolLM2-135M-Instruct, `tests/helpers/real.py`): the mechanism that made
FoNE learn arithmetic on a pretrained base, pinned in CI at a few steps (the full curves are the study's,
``eval_harness/results/pretrained_study``).

`NumberSFTTrainer` steps of 16 held-out-disjoint 3-4 digit additions, LoRA r=8 on q/v at 1e-3, then greedy
`numadapter.generate` on 40 held-out problems: the context head (the default, 16 steps, half the rows as chat turns)
answers them exactly, also behind an older number and in a chat with a numbered system prompt; the paper's linear
read-out (8 steps of plain rows) answers none.
"""

from __future__ import annotations

import datasets
import pytest
import torch
from helpers.real import real_base, real_tokenizer
from helpers.training_cases import sft_args

from numadapter.config import NumberAdapterConfig
from numadapter.data.arithmetic import addition_examples
from numadapter.evaluation import answer_metrics, generate_answers
from numadapter.mapping import get_peft_model
from numadapter.tokenization import NumberTokenizer
from numadapter.training.sft import NumberSFTTrainer

STEPS, BATCH = 8, 16
pytestmark = pytest.mark.usefixtures("two_threads")  # tests/conftest.py


def held_out_exact_match(head_input: str, tmp_path) -> float:
    torch.manual_seed(0)
    tokenizer = real_tokenizer()
    config = NumberAdapterConfig(
        encoding="fone", int_digits=5, frac_digits=0, r=8, lora_alpha=16, lora_dropout=0.0,
        target_modules=["q_proj", "v_proj"], fone_head_input=head_input,
    )  # fmt: skip
    model = get_peft_model(real_base(), config, tokenizer=tokenizer)
    ntok = NumberTokenizer(tokenizer, config)
    train = addition_examples(STEPS * BATCH, 3, 4, seed=0)
    held = addition_examples(40, 3, 4, seed=1, exclude={row["prompt"] for row in train})
    args = sft_args(tmp_path / head_input, max_steps=STEPS, per_device_train_batch_size=BATCH, learning_rate=1e-3,
                    lr_scheduler_type="constant", max_grad_norm=1.0)  # fmt: skip
    data = datasets.Dataset.from_list(train)
    NumberSFTTrainer(model=model, args=args, train_dataset=data, processing_class=ntok).train()
    answers = generate_answers(model, ntok, [row["prompt"] for row in held], 8, 40, progress=False)
    return answer_metrics(answers, [row["completion"] for row in held])["exact_match"]


def test_the_linear_read_out_does_not_learn_addition_in_the_same_steps(tmp_path):
    """The paper's linear read-out with everything else as in the context head's test below: no better than 5%."""
    assert held_out_exact_match("linear", tmp_path) <= 0.05


def chat_prompt(tokenizer, user: str, system: str | None = None, before: list[dict] | None = None) -> str:
    """A ChatML prompt as SmolLM2's template renders it (with the generation prompt), after the turns `before`."""
    messages = ([{"role": "system", "content": system}] if system else []) + (before or [])
    messages.append({"role": "user", "content": user})
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


EARLIER_TURN = [{"role": "user", "content": "What is 5 + 7?"}, {"role": "assistant", "content": "12"}]


def test_fone_learns_addition_and_numbers_training_never_showed_leave_the_answer_alone(tmp_path):
    """The context head learns addition on the real base in a few steps (>= 95% on held-out sums), and, trained on
    clean rows ("a + b =", plain and as a chat), the adapter answers as well when the prompt carries one
    more, older number ("Q3. a + b =", "In 2024: a + b ="), in a chat whose system prompt has a number and in a second
    chat turn after "What is 5 + 7?" / "12": a slot
    that never held a number in training leaves it out (it subtracted it: 0% on "Q3. a + b =")."""
    torch.manual_seed(0)
    tokenizer = real_tokenizer()
    config = NumberAdapterConfig(
        encoding="fone", int_digits=5, frac_digits=0, r=8, lora_alpha=16, lora_dropout=0.0,
        target_modules=["q_proj", "v_proj"], fone_numbers="all",
    )  # fmt: skip
    model = get_peft_model(real_base(), config, tokenizer=tokenizer)
    ntok = NumberTokenizer(tokenizer, config)
    # 16 steps: at 8, a prefix made the LM write a stray digit before the number in a quarter of the answers (the
    # number itself was right). Every other row is a chat turn, the answer right after the assistant's header.
    train = addition_examples(2 * STEPS * BATCH, 3, 4, seed=0)
    for row in train[1::2]:
        row["prompt"], row["completion"] = chat_prompt(tokenizer, row["prompt"]), row["completion"].strip()
    held = addition_examples(40, 3, 4, seed=1, exclude={row["prompt"] for row in train})
    args = sft_args(tmp_path, max_steps=2 * STEPS, per_device_train_batch_size=BATCH, learning_rate=1e-3,
                    lr_scheduler_type="constant", max_grad_norm=1.0)  # fmt: skip
    NumberSFTTrainer(
        model=model, args=args, train_dataset=datasets.Dataset.from_list(train), processing_class=ntok
    ).train()
    references = [row["completion"] for row in held]
    prompts = {
        "clean": [row["prompt"] for row in held],
        "older number": [f"Q3. {row['prompt']}" for row in held],
        "a year before": [f"In 2024: {row['prompt']}" for row in held],
        "chat": [chat_prompt(tokenizer, row["prompt"]) for row in held],
        "chat, numbered system prompt": [
            chat_prompt(tokenizer, row["prompt"], system="You are assistant number 7.") for row in held
        ],
        "chat, second turn": [chat_prompt(tokenizer, row["prompt"], before=EARLIER_TURN) for row in held],
    }
    scores = {
        name: answer_metrics(generate_answers(model, ntok, texts, 8, 40, progress=False), references)["exact_match"]
        for name, texts in prompts.items()
    }
    assert scores["clean"] >= 0.95, scores
    assert all(score >= scores["clean"] - 0.05 for score in scores.values()), scores
