"""The vLLM plugin's per-request choice (`NumberRequest`), checked without vLLM.

A stand-in for vLLM's engine runs the export's merged transformers model on the whole sequence at every step, with
the features of each [NUM] the request wrote added at its position (`ServedExport.embed`), and hands the request the
last position's logits and LM-head input; the request forces the next token. Random tiny Llamas in answers mode whose
context head copies the latest number emit [NUM]s often, side by side and next to digits (the '5' of the second
scores almost as high as [NUM]). Checked:

- the tokens numadapter's rules choose are `numadapter.generate`'s, exactly, up to and including the token after
  the first [NUM] (later ones read a context that holds the first number's digits, which numadapter's does not:
  docs/DESIGN.md, "Serving the export with vLLM");
- the text of the forced tokens is numadapter's decoding of the chosen tokens and their numbers, spaces included
  (vLLM's text is the tokens' text alone: the plugin writes those spaces as tokens).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from helpers.adapter_cases import Store
from helpers.answers_cases import SUMS_ONLY
from helpers.generation_cases import PROMPTS, copy_latest_number, num_first, number_writer, sum_latest_two

from numadapter.export import export_merged, load_exported
from numadapter.generation import generate
from numadapter.serving.vllm.requests import NumberRequest
from numadapter.serving.vllm.served import ServedExport

NEW = 8


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("vllm_requests")))


def serve(
    served: ServedExport, model: torch.nn.Module, prompt: str, decisions: int, most: int | None = None
) -> NumberRequest:
    """Runs a `NumberRequest` for `prompt` as vLLM would, with the plain transformers `model`, until it has chosen
    `decisions` tokens by numadapter's rules and forced every digit and space they need, or forced `most` tokens (a
    request that writes [NUM] after [NUM] always has a number's digits left to force)."""
    tokenizer = served.ntok.tokenizer
    ids = tokenizer(prompt)["input_ids"]
    request = NumberRequest(served, ids, SimpleNamespace(temperature=0.0, max_tokens=None), tokenizer.eos_token_id)
    sequence, captured = list(ids), []
    hook = model.get_output_embeddings().register_forward_pre_hook(lambda module, args: captured.append(args[0]))
    try:
        while (len(request.chosen) < decisions or request.queue or request.digits) and (
            most is None or len(request.forced) < most
        ):
            with torch.no_grad():
                embeddings = model.get_input_embeddings()(torch.tensor(sequence))  # (T, H)
                for position, token in enumerate(sequence):
                    if token == served.num_id:
                        row = served.embed(embeddings[position : position + 1], [request.side_at(position)])
                        embeddings[position] = row[0]
                logits = model(inputs_embeds=embeddings[None]).logits[0, -1]
            sequence.append(request.next_token(logits, captured[-1][0, -1]))
    finally:
        hook.remove()
    return request


@pytest.mark.parametrize("digits_too", [False, True])
def test_requests_choose_numadapters_tokens_and_write_its_text(store, tmp_path, digits_too):
    model, ntok = number_writer(store, copy_latest_number, digits_too, **SUMS_ONLY)
    export_merged(model, ntok, str(tmp_path))
    exported, exported_ntok = load_exported(str(tmp_path))
    ours = generate(exported, exported_ntok, PROMPTS, max_new_tokens=NEW, return_dict=True)
    served = ServedExport.load(tmp_path, exported.get_base_model().config)
    num, spaced = served.num_id, 0
    for prompt, ids in zip(PROMPTS, ours.token_ids):
        request = serve(served, exported.get_base_model(), prompt, len(ids))
        chosen = [c.token for c in request.chosen]
        exact = ids.index(num) + 2 if num in ids else len(ids)  # through the token after the first [NUM]
        assert chosen[:exact] == ids[:exact], (prompt, chosen, ids)
        texts = [c.text for c in request.chosen if c.token == num]
        head = exported_ntok.decode(request.prompt_ids, skip_special_tokens=True)
        whole = exported_ntok.decode(request.prompt_ids + chosen, number_texts=texts, skip_special_tokens=True)
        want = whole[len(head) :]  # as numadapter.generate cuts its completion out of the prompt's text
        got = served.ntok.tokenizer.decode(request.forced, skip_special_tokens=True)
        assert got == want, (prompt, got, want)
        spaced += len(request.forced) - len(chosen) - sum(len(served.text_ids(t)) for t in texts)
    assert sum(ids.count(num) for ids in ours.token_ids) >= 4
    if digits_too:
        assert spaced >= 1  # a space written between a [NUM]'s number and digits next to it


def test_a_number_that_would_not_fit_in_max_tokens_ends_the_request(store, tmp_path, caplog):
    """vLLM counts a [NUM]'s digits in ``max_tokens``: a number cut short would be a wrong number, so a request
    whose next [NUM] and digits do not fit ends there instead, with a warning naming max_tokens."""
    model, ntok = number_writer(store, copy_latest_number, False, **SUMS_ONLY)
    export_merged(model, ntok, str(tmp_path))
    exported, _ = load_exported(str(tmp_path))
    served = ServedExport.load(tmp_path, exported.get_base_model().config)
    plain, eos = exported.get_base_model(), served.ntok.tokenizer.eos_token_id
    prompt = next(p for p in PROMPTS if served.num_id in serve(served, plain, p, 1).forced)  # [NUM] first
    ids = served.ntok.tokenizer(prompt)["input_ids"]
    request = NumberRequest(served, ids, SimpleNamespace(temperature=0.0, max_tokens=1), eos)
    with torch.no_grad():
        out = plain(input_ids=torch.tensor([ids]), output_hidden_states=True)
    assert request.next_token(out.logits[0, -1], out.hidden_states[-1][0, -1]) == eos
    assert "max_tokens=1 leaves no room" in caplog.text


def test_a_prompt_holding_the_num_token_is_ended(store, tmp_path):
    model, ntok = number_writer(store, copy_latest_number, False, **SUMS_ONLY)
    export_merged(model, ntok, str(tmp_path))
    exported, _ = load_exported(str(tmp_path))
    served = ServedExport.load(tmp_path, exported.get_base_model().config)
    eos = served.ntok.tokenizer.eos_token_id
    request = NumberRequest(served, [5, served.num_id, 6], SimpleNamespace(temperature=0.0, max_tokens=8), eos)
    assert request.refused and request.next_token(torch.zeros(10), torch.zeros(4)) == eos


@pytest.mark.parametrize(
    ("prompt", "written"),
    [
        ("Then 3 - 8 =", "-5"),  # the minus token first, then the head's 5
        ("Then 25% + 5% =", "30%"),  # the head's 30, then the forced "%"
        ("Then 9000 + 2000 =", "11000"),  # past int_digits=4: the value's text, forced token by token
    ],
)
def test_requests_write_the_expression_checks_tokens(tmp_path, prompt, written):
    """The expression check's own tokens (a minus sign, a share's "%", a value past int_digits as text) are chosen
    by the plugin's request exactly as `numadapter.generate` chooses them on the export, and its text reads the
    expression's value."""
    store = Store(str(tmp_path / "store"))
    settings = {**SUMS_ONLY, "fone_expression_check": True, "int_digits": 4, "sign_policy": "text"}
    model, ntok = number_writer(store, copy_latest_number, False, **settings)
    num_first(model, ntok, [prompt])
    export_merged(model, ntok, str(tmp_path / "export"))
    exported, exported_ntok = load_exported(str(tmp_path / "export"))
    ours = generate(exported, exported_ntok, [prompt], max_new_tokens=NEW, return_dict=True)
    assert ours.completions[0].lstrip().startswith(written), ours.completions
    served = ServedExport.load(tmp_path / "export", exported.get_base_model().config)
    ids, num = ours.token_ids[0], served.num_id
    exact = ids.index(num) + 2 if num in ids else len(ids)  # through the token after the first [NUM]
    request = serve(served, exported.get_base_model(), prompt, exact, most=4 * NEW)
    assert [c.token for c in request.chosen][:exact] == ids[:exact]
    assert served.ntok.tokenizer.decode(request.forced, skip_special_tokens=True).lstrip().startswith(written)


def test_requests_leave_an_operand_the_head_would_compute_to_the_lm(tmp_path):
    """After "so 3 +" a head that sums the two latest numbers would write 11 as the operand; the expression check
    has the LM write it in digits instead, and the plugin's request chooses the same tokens as `generate` on the
    export."""
    store = Store(str(tmp_path / "store"))
    model, ntok = number_writer(store, sum_latest_two, False, **{**SUMS_ONLY, "fone_expression_check": True})
    prompt = "She has 3 apples and 8 pears, so 3 +"
    num_first(model, ntok, [prompt])
    export_merged(model, ntok, str(tmp_path / "export"))
    exported, exported_ntok = load_exported(str(tmp_path / "export"))
    ours = generate(exported, exported_ntok, [prompt], max_new_tokens=4, return_dict=True)
    served = ServedExport.load(tmp_path / "export", exported.get_base_model().config)
    ids = ours.token_ids[0]
    assert ids[0] != served.num_id and served.ntok.tokenizer.decode(ids[:1]).strip().isdigit(), ours.completions
    exact = ids.index(served.num_id) + 2 if served.num_id in ids else len(ids)  # through the token after a [NUM]
    request = serve(served, exported.get_base_model(), prompt, exact, most=16)
    assert [c.token for c in request.chosen][:exact] == ids[:exact]
