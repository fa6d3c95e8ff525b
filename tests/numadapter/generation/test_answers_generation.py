"""Generation with ``fone_numbers="answers"``: the prompt's numbers stay digit tokens and are the context head's
context, numbers the model writes in digits join that context, and generation agrees with the training forward."""

from __future__ import annotations

import pytest
import torch
from helpers.adapter_cases import Store
from helpers.answers_cases import SUMS_ONLY, agrees_with_the_training_forward
from helpers.generation_cases import (
    PROMPTS,
    build,
    copy_latest_number,
    encourage_numbers,
    num_first,
    number_writer,
    output_rows,
)

from numadapter.generation import generate
from numadapter.numbers import find_numbers
from numadapter.tuner.patches import base_weight

PLACES = (4, 2)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("answers-generation")))


@pytest.fixture(scope="module")
def copier(store):
    """A random llama whose context head writes the latest number before it, and which emits [NUM] and digits."""
    return number_writer(store, copy_latest_number, False, **SUMS_ONLY)


@pytest.fixture(scope="module")
def writer(store):
    """The same copier, which also writes numbers in digits between its [NUM]s when sampled among the top 2."""
    return number_writer(store, copy_latest_number, True, **SUMS_ONLY)


def test_prompt_numbers_are_digits_and_the_heads_context(copier):
    model, ntok = copier
    enc = ntok("What is 7 + 8 =", return_tensors="pt")
    assert ntok.num_token_id not in enc["input_ids"][0].tolist()
    assert (enc["num_mask"] == 2).sum() == 2
    out = generate(model, ntok, ["What is 7 + 8 =", "Paris in 1999"], max_new_tokens=8, return_dict=True)
    firsts = [next(n for n, c in zip(row, conf) if c is not None) for row, conf in zip(out.numbers, out.confidences)
              if any(c is not None for c in conf)]  # fmt: skip
    assert firsts, out.completions
    # the first [NUM] copies the prompt's latest number (before the fix it read an empty context: its read-out)
    assert [float(n.to_float()) for n in firsts] == [8.0, 1999.0][: len(firsts)]


@pytest.mark.parametrize("use_cache,sample", [(True, False), (False, False), (True, True)])
def test_generation_agrees_with_the_training_forward(copier, writer, use_cache, sample):
    """The public forward on prompt + generated ids, with the prompt's numbers, the generated [NUM]s and the numbers
    generated in digits (num_mask 2 at their last token, as the tokenizer marks them) as side tensors, predicts every
    generated [NUM]'s number (and, greedy, picks every generated token). Sampling among the top 2 tokens makes the
    model with a strong '5' write digits too, so numbers written in digits precede later [NUM]s."""
    model, ntok = writer if sample else copier
    agrees_with_the_training_forward(model, ntok, use_cache, sample)


def test_digits_written_beside_a_num_stay_apart_in_the_text(copier):
    """A model in answers mode can write digits right before or after a [NUM]; the text keeps them apart, so it reads
    back as the numbers written (an adapter with fone_numbers='all' joins them as written: test_lossless)."""
    _, ntok = copier
    five, num = ntok.tokenizer.convert_tokens_to_ids("5"), ntok.num_token_id
    assert ntok.decode([five, num, five], number_texts=["12"]) == "5 12 5"
    assert [s.text for s in find_numbers(ntok.decode([five, num], number_texts=["0.5"]))] == ["5", "0.5"]
    enc = ntok("Total 5 12, then 3", return_tensors="pt")
    assert ntok.decode(enc["input_ids"][0], skip_special_tokens=True) == "Total 5 12, then 3"


def test_a_num_the_head_cannot_form_is_written_in_digits(store):
    """Where the head combines no number (all coefficients 0: its read-out alone), the adapter writes the number in
    digit tokens: the [NUM] the LM preferred is ruled out and the best digit token is taken."""
    torch.manual_seed(0)  # the random LoRA weights: each test's model does not depend on the tests before it
    model, ntok = build(store, "llama", "fone", **SUMS_ONLY)
    copy_latest_number(model)
    encourage_numbers(model, ntok, PROMPTS[:6])
    wanted = generate(model, ntok, PROMPTS[:6], max_new_tokens=6, return_dict=True)
    assert sum(ids.count(ntok.num_token_id) for ids in wanted.token_ids) >= 2
    head = model.base_model.number_modules["default"].head
    with torch.no_grad():  # a fresh head's tie: every coefficient 0, the read-out alone
        head.coefficients.bias.zero_()
    out = generate(model, ntok, PROMPTS[:6], max_new_tokens=6, return_dict=True)
    assert all(ntok.num_token_id not in ids for ids in out.token_ids), out.completions
    assert all(c is None for row in out.confidences for c in row)
    row = next(r for r, ids in enumerate(wanted.token_ids) if ids[0] == ntok.num_token_id)
    enc = ntok(PROMPTS[row], return_tensors="pt")
    with torch.no_grad():  # the LM alone still ranks [NUM] first where the number was written otherwise
        first = model(**enc).logits[0, -1].argmax().item()
    assert first == ntok.num_token_id != out.token_ids[row][0]


def test_a_num_the_head_cannot_form_is_not_dropped_for_the_end_of_the_answer(store):
    """The LM's next choice after an unformable [NUM] is the end of the text (it learned "[NUM] then EOS"): the
    number is still written, in digit tokens, instead of ending the answer without it."""
    torch.manual_seed(0)
    model, ntok = build(store, "llama", "fone", **SUMS_ONLY)
    copy_latest_number(model)
    encourage_numbers(model, ntok, PROMPTS[:6])
    head = model.base_model.number_modules["default"].head
    eos = ntok.tokenizer.eos_token_id
    with torch.no_grad():
        head.coefficients.bias.zero_()  # the head forms nothing
        base_weight(model.base_model.model.get_output_embeddings())[eos] = output_rows(model)[0] * 0.97
    rows = []
    for row, prompt in enumerate(PROMPTS[:6]):
        with torch.no_grad():
            logits = model(**ntok(prompt, return_tensors="pt")).logits[0, -1]
        if logits.argmax().item() == ntok.num_token_id and logits.topk(2).indices[1].item() == eos:
            rows.append(row)
    assert rows  # [NUM] first, the end of the text second
    out = generate(model, ntok, PROMPTS[:6], max_new_tokens=6, return_dict=True)
    digits = set(model.peft_config["default"].digit_token_ids)
    for row in rows:
        assert out.token_ids[row][0] in digits, (row, out.completions[row])
        assert out.numbers[row], out.completions[row]  # a number was written


def test_products_are_written_exactly_and_their_answers_become_num(store):
    """fone_context_products: a head set to multiply the two latest numbers writes their exact product (not written
    in digits instead: it combines two numbers), a head with one number before it its sum, and the tokenizer writes
    a product answer as [NUM]."""
    from numadapter.methods.fone.pair_ops import pair_list

    torch.manual_seed(0)
    model, ntok = build(store, "llama", "fone", **{**SUMS_ONLY, "fone_context_products": True})
    copy_latest_number(model)
    encourage_numbers(model, ntok, PROMPTS[:6])
    head = model.base_model.number_modules["default"].head
    with torch.no_grad():
        head.operations.bias.zero_()
        head.operations.bias[1 + pair_list(head.context_numbers).index(("*", 0, 1))] = 30.0
    out = generate(model, ntok, ["What is 7 + 8 =", "Paris in 1999"], max_new_tokens=8, return_dict=True)
    heads = [[n for n, c in zip(row, conf) if c is not None] for row, conf in zip(out.numbers, out.confidences)]
    assert heads[0] and abs(heads[0][0].to_float()) == 56.0, out.completions  # the sign is the (random) sign head's
    # one number before it: no pair to multiply, so the sum (here the copy) writes it
    assert heads[1] and abs(heads[1][0].to_float()) == 1999.0, out.completions
    enc = ntok("431 * 7 = 3017", answer_start=9, return_tensors="pt")
    assert enc["number_texts"] == [["3017"]] and (enc["num_mask"] == 2).sum() == 2
    plain, _ = build(store, "llama", "fone", **SUMS_ONLY)
    assert plain.peft_config["default"].fone_context_products is False


def test_with_digit_answers_a_number_the_head_forms_is_written_as_num(store):
    """fone_digit_answers > 0: the LM learned both forms, so where it starts a number in digits and the head forms
    that number, [NUM] is written instead; where the head forms none (no number before it) the digits stay."""
    torch.manual_seed(0)
    model, ntok = build(store, "llama", "fone", **{**SUMS_ONLY, "fone_digit_answers": 0.5})
    copy_latest_number(model)
    encourage_numbers(model, ntok, PROMPTS[:6])
    five, num = ntok.tokenizer.convert_tokens_to_ids("5"), ntok.num_token_id
    prompts = ["What is 7 + 8 =", "Paris in 1999"]
    num_first(model, ntok, prompts)
    lm_head = base_weight(model.base_model.model.get_output_embeddings())
    with torch.no_grad():  # '5' now just wins wherever [NUM] would have: the LM starts its numbers in digits, with
        lm_head[five] = output_rows(model)[0] * 1.001  # [NUM] about as likely
    with torch.no_grad():
        assert all(model(**ntok(p, return_tensors="pt")).logits[0, -1].argmax() == five for p in prompts)
    out = generate(model, ntok, prompts, max_new_tokens=6, return_dict=True)
    for row in (0, 1):  # the number the LM starts in digits is the head's copy of the latest number: a [NUM]
        assert out.token_ids[row][0] == num and out.confidences[row][0] is not None, out.completions
    assert [abs(out.numbers[r][0].to_float()) for r in (0, 1)] == [8.0, 1999.0], out.completions  # random signs
    uncached = generate(model, ntok, prompts, max_new_tokens=6, return_dict=True, use_cache=False)
    assert uncached.token_ids == out.token_ids
    head = model.base_model.number_modules["default"].head
    with torch.no_grad():  # a head that forms nothing: the digits the LM started stay
        head.coefficients.bias.zero_()
    out = generate(model, ntok, prompts, max_new_tokens=6, return_dict=True)
    assert all(ids[0] == five and num not in ids for ids in out.token_ids), out.completions
    copy_latest_number(model)  # the head forms the numbers again, but [NUM] is now unlikely where the LM writes '5':
    with torch.no_grad():  # a number the head was not trained to write there, so the digits stay
        lm_head[five] = output_rows(model)[0] * 1.5
    out = generate(model, ntok, prompts, max_new_tokens=6, return_dict=True)
    assert all(ids[0] == five and num not in ids for ids in out.token_ids), out.completions


@pytest.mark.parametrize("digit_answers", [0.0, 0.5])
def test_without_head_copies_a_copy_is_written_in_digits_and_a_sum_as_num(store, digit_answers):
    """fone_head_copies=False: a head that sums the two latest numbers writes [NUM] with their exact sum; where its
    chosen combination is a copy of one number (the copier), the row writes its number in digits instead, whether
    the LM chose [NUM] or started digits (fone_digit_answers)."""
    torch.manual_seed(0)
    settings = {**SUMS_ONLY, "fone_head_copies": False, "fone_digit_answers": digit_answers}
    model, ntok = build(store, "llama", "fone", **settings)
    head = model.base_model.number_modules["default"].head
    count = head.context_numbers
    with torch.no_grad():  # +1 on the two latest numbers: their sum
        head.coefficients.weight.zero_()
        head.coefficients.bias.copy_(torch.tensor([-30.0, -30.0, 30.0] * 2 + [-30.0, 30.0, -30.0] * (count - 2)))
    encourage_numbers(model, ntok, PROMPTS[:6])
    sums = {PROMPTS[2]: 15.0, PROMPTS[3]: 5.25, PROMPTS[4]: 5.0}  # the two latest numbers of each prompt, added
    num_first(model, ntok, [PROMPTS[2]])
    with torch.no_grad():
        starts = [p for p in sums if model(**ntok(p, return_tensors="pt")).logits[0, -1].argmax() == ntok.num_token_id]
    assert PROMPTS[2] in starts
    out = generate(model, ntok, starts, max_new_tokens=6, return_dict=True)
    for row, prompt in enumerate(starts):
        assert out.token_ids[row][0] == ntok.num_token_id, out.completions
        assert abs(out.numbers[row][0].to_float()) == sums[prompt], out.completions  # the sign head is random
    prompts = [*starts, "Paris in 1999"]
    copy_latest_number(model)  # the LM is unchanged: it still starts with [NUM] after `starts`
    out = generate(model, ntok, prompts, max_new_tokens=6, return_dict=True)
    assert all(ntok.num_token_id not in ids for ids in out.token_ids), out.completions
    assert all(c is None for row in out.confidences for c in row), out.completions
    if digit_answers:  # the LM starts its numbers in digits: the head's copy does not take them over
        five = ntok.tokenizer.convert_tokens_to_ids("5")
        with torch.no_grad():
            base_weight(model.base_model.model.get_output_embeddings())[five] = output_rows(model)[0] * 1.001
        out = generate(model, ntok, prompts, max_new_tokens=6, return_dict=True)
        assert all(five in ids and ntok.num_token_id not in ids for ids in out.token_ids), out.completions


def test_t5_refuses_answers_mode_with_the_fix(store):
    with pytest.raises(ValueError, match="encoder-decoder.*fone_numbers='all'"):
        build(store, "t5", "fone", fone_numbers="answers")


@pytest.mark.parametrize("digit_answers", [0.0, 0.5])
def test_a_number_the_head_writes_below_the_least_confidence_is_written_in_digits(store, digit_answers):
    """fone_head_min_confidence: a [NUM] whose confidence (the chosen combination's probability times the fit of its
    digits) is below it is written in digit tokens; at or under the lowest confidence the head wrote with, the same
    [NUM]s as without the gate."""
    torch.manual_seed(0)
    model, ntok = build(store, "llama", "fone", **{**SUMS_ONLY, "fone_digit_answers": digit_answers})
    copy_latest_number(model)
    encourage_numbers(model, ntok, PROMPTS[:6])
    num_first(model, ntok, PROMPTS[2:5])
    config = model.peft_config["default"]
    assert config.fone_head_min_confidence == 0.0
    out = generate(model, ntok, PROMPTS[2:5], max_new_tokens=6, return_dict=True)
    written = [c for row in out.confidences for c in row if c is not None]
    assert written and all(ids[0] == ntok.num_token_id for ids in out.token_ids), out.completions
    try:
        config.fone_head_min_confidence = min(written)
        assert generate(model, ntok, PROMPTS[2:5], max_new_tokens=6, return_dict=True).token_ids == out.token_ids
        config.fone_head_min_confidence = min(1.0, max(written) + 1e-6)
        gated = generate(model, ntok, PROMPTS[2:5], max_new_tokens=6, return_dict=True)
    finally:
        config.fone_head_min_confidence = 0.0
    assert all(ntok.num_token_id not in ids for ids in gated.token_ids), gated.completions
    assert all(c is None for row in gated.confidences for c in row), gated.completions
    assert all(find_numbers(text) for text in gated.completions), gated.completions  # written in digits instead


def test_a_number_whose_first_digit_the_lm_does_not_expect_is_written_in_digits(store):
    """fone_head_digit_check=k: the head writes its number only where the number's first digit is among the LM's k
    likeliest digit tokens at that step (found here by a forward of its own); elsewhere the LM writes digits."""
    torch.manual_seed(0)
    model, ntok = build(store, "llama", "fone", **SUMS_ONLY)
    copy_latest_number(model)
    prompts = ["What is 7 + 8 =", "Paris in 1999", "Alice bought 3 apples for 2.25 each, so", "count 1 2 3"]
    encourage_numbers(model, ntok, prompts)
    num_first(model, ntok, prompts)
    config, num = model.peft_config["default"], ntok.num_token_id
    digit_ids = list(config.digit_token_ids)
    sign = model.base_model.number_modules["default"].head.sign_proj
    with torch.no_grad():  # positive numbers; the LM's likeliest digit is '1' wherever it writes [NUM]
        sign.weight.zero_()
        sign.bias.copy_(torch.tensor([10.0, -10.0]))
        base_weight(model.base_model.model.get_output_embeddings())[digit_ids[1]] = output_rows(model)[0] * 0.5
        lm_digit = [int(model(**ntok(p, return_tensors="pt")).logits[0, -1, digit_ids].argmax()) for p in prompts]
    out = generate(model, ntok, prompts, max_new_tokens=4, return_dict=True)
    assert all(ids[0] == num for ids in out.token_ids), out.completions
    written = [str(row[0]) for row in out.numbers]
    assert written == ["8", "1999", "2.25", "3"], out.completions
    expected = [int(text[0]) == digit for text, digit in zip(written, lm_digit)]
    assert any(expected) and not all(expected), (written, lm_digit)
    try:
        config.fone_head_digit_check = 10  # every digit is among the 10 likeliest: nothing changes
        assert generate(model, ntok, prompts, max_new_tokens=4, return_dict=True).token_ids == out.token_ids
        config.fone_head_digit_check = 1
        checked = generate(model, ntok, prompts, max_new_tokens=4, return_dict=True)
        width = ntok(prompts, return_tensors="pt", padding=True)["input_ids"].shape[1]
        through_hf = model.generate(**ntok(prompts, return_tensors="pt", padding=True), max_new_tokens=4)
        with torch.no_grad():  # a negative number is not checked (the LM would write its sign first)
            sign.bias.copy_(torch.tensor([-10.0, 10.0]))
        negative = generate(model, ntok, prompts, max_new_tokens=4, return_dict=True)
    finally:
        config.fone_head_digit_check = 0
    assert all(ids[0] == num for ids in negative.token_ids), negative.completions
    assert [str(row[0]) for row in negative.numbers] == ["-8", "-1999", "-2.25", "-3"], negative.completions
    assert [ids[0] == num for ids in checked.token_ids] == expected, checked.completions
    assert [int(row[width]) for row in through_hf] == [ids[0] for ids in checked.token_ids]  # model.generate: the same
    for row, kept in enumerate(expected):
        if not kept:  # written in digits from the LM's likeliest digit
            assert checked.token_ids[row][0] == digit_ids[lm_digit[row]], checked.completions
