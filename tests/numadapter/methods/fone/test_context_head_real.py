"""The context head on the real checkpoint (SmolLM2-135M-Instruct, `tests/helpers/real.py`): the mechanism that made
FoNE learn arithmetic on a pretrained base, pinned in CI at a few steps (the full curves are the study's,
``eval_harness/results/pretrained_study``).

Eight `NumberSFTTrainer` steps of 16 held-out-disjoint 3-4 digit additions, LoRA r=8 on q/v at 1e-3, then greedy
`numadapter.generate` on 40 held-out problems: the context head (the default) answers them exactly; the paper's
linear read-out, with everything else equal, answers none.
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


@pytest.mark.parametrize("head_input, at_least, at_most", [("context", 0.95, 1.0), ("linear", 0.0, 0.05)])
def test_fone_learns_addition_on_the_pretrained_base_with_the_context_head(tmp_path, head_input, at_least, at_most):
    assert at_least <= held_out_exact_match(head_input, tmp_path) <= at_most
