"""transformers' pipelines and tokenizer keyword arguments with a `NumberTokenizer`: numbers rendered, not lost.

``pipeline("number-text-generation", model=..., tokenizer=ntok)`` (`numadapter.generation.pipeline`) is
transformers' text-generation pipeline with the number tensors carried from ``ntok(prompt, return_tensors="pt")``
through transformers' batching into ``model.generate`` and on to ``ntok.decode``; the expected texts come from
`numadapter.generate`. transformers' own text-generation pipeline passes ids without numbers: refused, naming the
number-aware pipeline, which ``pipeline("text-generation")`` builds for a numadapter model once numadapter is imported.
"""

from __future__ import annotations

import pytest
import torch
from helpers.adapter_cases import Store
from helpers.generation_cases import PROMPTS, build, copy_latest_number, encourage_numbers
from transformers import TextGenerationPipeline, pipeline

from numadapter.generation import generate
from numadapter.generation.pipeline import NumberTextGenerationPipeline

PROMPT_LIST = [PROMPTS[0], PROMPTS[2], PROMPTS[3]]  # each with a number in the prompt


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("pipelines")))


@pytest.fixture(scope="module")
def llama(store):
    model, ntok = build(store, "llama", "fone")
    encourage_numbers(model, ntok)
    copy_latest_number(model)  # each row's numbers come from its own prompt
    return model, ntok


def check_pipeline(model, ntok) -> None:
    ref = generate(model, ntok, PROMPT_LIST, max_new_tokens=8, return_dict=True)
    assert sum(map(len, ref.numbers)) >= 2  # numbers are generated, so the texts show the head's decoding
    pipe = pipeline("number-text-generation", model=model, tokenizer=ntok, do_sample=False)  # else it samples
    assert isinstance(pipe, NumberTextGenerationPipeline)
    for prompt, text, completion in zip(PROMPT_LIST, ref.texts, ref.completions):
        assert pipe(prompt, max_new_tokens=8) == [{"generated_text": text}]
        assert pipe(prompt, max_new_tokens=8, return_full_text=False) == [{"generated_text": completion}]
    assert pipe(PROMPT_LIST, max_new_tokens=8) == [[{"generated_text": t}] for t in ref.texts]
    assert pipe(PROMPT_LIST, max_new_tokens=8, batch_size=2) == [[{"generated_text": t}] for t in ref.texts]


def test_text_generation_pipeline_on_the_adapter(llama):
    check_pipeline(*llama)


def test_text_generation_pipeline_on_the_exported_model(llama, tmp_path):
    from numadapter.export import export_merged, load_exported

    model, ntok = llama
    export_merged(model, ntok, tmp_path / "merged")
    check_pipeline(*load_exported(tmp_path / "merged"))


def test_chat_template_encodes_numbers_and_the_chat_pipeline_renders_them(llama):
    model, ntok = llama
    ntok.tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    chat = [{"role": "user", "content": "The price is 12.5 dollars and"}]
    text = ntok.apply_chat_template(chat, tokenize=False)
    assert text == "user: The price is 12.5 dollars and\n"
    enc = ntok.apply_chat_template(chat, return_tensors="pt")
    assert enc["number_texts"] == [["12.5"]]
    assert enc["input_ids"][0].tolist().count(ntok.num_token_id) == 1
    assert torch.equal(enc["input_ids"], ntok(text, add_special_tokens=False, return_tensors="pt")["input_ids"])
    assert ntok.apply_chat_template(chat, return_dict=False) == ntok(text, add_special_tokens=False)["input_ids"]
    assert ntok(text, add_special_tokens=False)["input_ids"] != ntok(text)["input_ids"]  # no bos added to the template
    out = pipeline("number-text-generation", model=model, tokenizer=ntok, do_sample=False)(chat, max_new_tokens=6)
    reply = out[0]["generated_text"][-1]
    assert reply["role"] == "assistant"
    ids = ntok.apply_chat_template(chat, return_tensors="pt")
    direct = model.generate(**ids, max_new_tokens=6)
    assert reply["content"] == ntok.decode(direct[0, ids["input_ids"].shape[1] :])
    assert ntok.config.num_token not in reply["content"]


def test_tokenizer_accepts_transformers_keyword_arguments(llama):
    _, ntok = llama
    enc = ntok(["a 12 b", "c"], padding=True, return_tensors="pt", return_attention_mask=False,
               return_token_type_ids=True, return_length=True, return_special_tokens_mask=True, verbose=False,
               stride=0, text_pair=None)  # fmt: skip
    assert "attention_mask" not in enc
    assert torch.equal(enc["token_type_ids"], torch.zeros_like(enc["input_ids"]))
    assert enc["length"].tolist() == [enc["input_ids"].shape[1]] * 2
    bos = ntok.tokenizer.bos_token_id
    assert enc["special_tokens_mask"][0].tolist() == [int(i in (bos, ntok.pad_token_id)) for i in enc["input_ids"][0]]
    single = ntok("a 12 b", return_length=True)
    assert single["length"] == len(single["input_ids"])
    ids = ntok("a 12 b")
    assert ntok.decode(ids, clean_up_tokenization_spaces=False, skip_special_tokens=True) == "a 12 b"
    assert ntok.batch_decode(ntok(["a 12 b"], return_tensors="pt"), clean_up_tokenization_spaces=True) == ["a 12 b"]
    with pytest.raises(ValueError, match=r"does not support text_pair='x'"):
        ntok("a", text_pair="x")
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'colour'"):
        ntok("a", colour=1)


def test_batched_pipeline_with_identical_completion_ids_renders_each_rows_numbers(llama):
    """Templated prompts: the prompts and the completions are the same ids ([NUM] tokens) with different numbers;
    the pipeline carries each prompt's numbers, and rows of the output decode with their own numbers, in any order
    and as often as asked."""
    model, ntok = llama
    prompts = ["What is 7 + 8 =", "What is 3 + 4 =", "What is 12 + 30 =", "What is 0.5 + 9 ="]
    ref = generate(model, ntok, prompts, max_new_tokens=2, return_dict=True)
    assert ref.token_ids[0] == ref.token_ids[1] and ref.numbers[0] != ref.numbers[1]  # the ambiguous case
    pipe = pipeline("text-generation", model=model, tokenizer=ntok, do_sample=False,
                    pipeline_class=NumberTextGenerationPipeline)  # fmt: skip
    for size in (1, 4):
        out = pipe(prompts, max_new_tokens=2, batch_size=size)
        assert [o[0]["generated_text"] for o in out] == ref.texts
        backwards = pipe(prompts[::-1], max_new_tokens=2, batch_size=size)
        assert [o[0]["generated_text"] for o in backwards] == ref.texts[::-1]
    batch = ntok(prompts, return_tensors="pt", padding=True, padding_side="left")
    width = batch["input_ids"].shape[1]
    output = model.generate(**batch, max_new_tokens=2)
    assert [ntok.decode(row) for row in output[:, width:]] == ref.completions
    assert ntok.decode(output[3, width:]) == ref.completions[3]  # any row, in any order
    assert ntok.decode(output[1, width:]) == ref.completions[1]
    with pytest.raises(ValueError, match=r"a copy of a tensor \(\.clone\(\)"):  # a copy carries no numbers
        ntok.decode(output[1, width:].clone())


def test_transformers_text_generation_pipeline_is_refused_naming_the_number_pipeline(llama):
    """transformers' own pipeline passes ids and mask only (after re-padding them when batching): the prompt's
    numbers cannot travel, so model.generate refuses, naming the fix; the number pipeline needs a number model.
    ``pipeline("text-generation")`` itself builds the number pipeline for a numadapter model (with its
    NumberTokenizer, or the plain tokenizer wrapped in one) and transformers' own for any other model."""
    model, ntok = llama
    ref = generate(model, ntok, PROMPT_LIST[:2], max_new_tokens=2, return_dict=True)
    for tokenizer in (ntok, ntok.tokenizer):
        pipe = pipeline("text-generation", model=model, tokenizer=tokenizer, do_sample=False)
        assert isinstance(pipe, NumberTextGenerationPipeline)
        assert [o[0]["generated_text"] for o in pipe(PROMPT_LIST[:2], max_new_tokens=2)] == ref.texts
    plain = pipeline("text-generation", model=model.get_base_model(), tokenizer=ntok.tokenizer)
    assert type(plain) is TextGenerationPipeline
    pipe = pipeline("text-generation", model=model, tokenizer=ntok, do_sample=False,
                    pipeline_class=TextGenerationPipeline)  # fmt: skip
    for size in (1, 2):
        with pytest.raises(ValueError, match=r"no number tensors.*pipeline\('number-text-generation'"):
            pipe(PROMPT_LIST[:2], max_new_tokens=2, batch_size=size)
    with pytest.raises(TypeError, match=r"needs a numadapter model .* got LlamaForCausalLM"):
        pipeline("number-text-generation", model=model.get_base_model(), tokenizer=ntok)
    with pytest.raises(TypeError, match=r"needs the model's NumberTokenizer as tokenizer=, got"):
        pipeline("number-text-generation", model=model, tokenizer=ntok.tokenizer)
