"""`numadapter.integrations.deepspeed_zero`: shapes and ties of parameters that may be DeepSpeed ZeRO-3 partitioned
(single process).

A ZeRO-3 partitioned parameter is faked here the way DeepSpeed leaves it outside a forward: an empty Parameter
(shape ``(0,)``) carrying ``ds_id`` and ``ds_shape``. The real thing (a base loaded under ``zero.Init`` by 2
processes) is tested in ``tests/numadapter/integrations/test_distributed.py``.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

from numadapter.config import NumberAdapterConfig
from numadapter.integrations.deepspeed_zero import (
    full_shape,
    gathered_parameters,
    is_partitioned,
    matrix_shape,
    same_parameter,
)
from numadapter.mapping import bind_tokenizer
from numadapter.tuner.patches import resize_embeddings, same_storage, tied_group

ROWS, HIDDEN = 684, 16


def fake_partitioned(ds_id: int, shape: tuple[int, ...]) -> nn.Parameter:
    """An empty Parameter with DeepSpeed's attributes, as ZeRO-3 leaves it between forwards."""
    param = nn.Parameter(torch.empty(0))
    param.ds_id = ds_id
    param.ds_shape = torch.Size(shape)
    return param


def tiny_llama(tie: bool) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=ROWS, hidden_size=HIDDEN, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, tie_word_embeddings=tie,
    )  # fmt: skip
    return LlamaForCausalLM(config)


def partition(model: LlamaForCausalLM, tie: bool) -> None:
    """Replaces the embedding (and LM head) weights by fake partitions; tied weights stay one Parameter."""
    embedding = fake_partitioned(7, (ROWS, HIDDEN))
    model.model.embed_tokens.weight = embedding
    model.lm_head.weight = embedding if tie else fake_partitioned(8, (ROWS, HIDDEN))


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from numadapter.testing import toy

    return toy.build_tokenizer("digits", tmp_path_factory.mktemp("tok"))


def test_full_shape_reads_ds_shape_of_a_partition():
    param = fake_partitioned(1, (ROWS, HIDDEN))
    assert param.shape == (0,) and is_partitioned(param)  # what code reading .shape used to see
    assert full_shape(param) == (ROWS, HIDDEN)
    assert matrix_shape(param, "w") == (ROWS, HIDDEN)
    plain = nn.Parameter(torch.zeros(3, 5))
    assert not is_partitioned(plain)
    assert full_shape(plain) == (3, 5) and matrix_shape(plain, "w") == (3, 5)


@pytest.mark.parametrize("shape", [(0,), (0, 16), (12,), (2, 3, 4)], ids=["empty", "no-rows", "1d", "3d"])
def test_matrix_shape_refuses_what_is_not_a_matrix(shape):
    weight = nn.Parameter(torch.empty(shape))
    with pytest.raises(ValueError, match=rf"the weight has shape \[{', '.join(map(str, shape))}\], expected \[rows"):
        matrix_shape(weight, "the weight")


def test_distinct_partitions_are_not_tied_although_they_look_alike():
    a, b = fake_partitioned(1, (ROWS, HIDDEN)), fake_partitioned(2, (ROWS, HIDDEN))
    # the storage test alone would call them tied: both are empty tensors of shape (0,) on the same device
    assert a.shape == b.shape == (0,) and a.device == b.device
    assert not same_parameter(a, b) and not same_storage(a, b)
    assert same_parameter(a, a) and same_storage(a, a)
    alias = fake_partitioned(1, (ROWS, HIDDEN))  # another handle on ds_id 1
    assert same_parameter(a, alias)
    assert not same_parameter(a, nn.Parameter(torch.zeros(ROWS, HIDDEN)))  # partitioned vs ordinary


def test_ordinary_ties_by_identity_and_storage():
    weight = nn.Parameter(torch.randn(4, 3))
    assert same_parameter(weight, weight)
    assert same_parameter(weight, nn.Parameter(weight.data))  # another Parameter on the same storage
    assert not same_parameter(weight, nn.Parameter(weight.data.clone()))
    assert not same_parameter(nn.Parameter(torch.empty(0)), nn.Parameter(torch.empty(0)))  # empty: nothing to share
    meta = torch.empty(4, 3, device="meta")
    assert not same_parameter(meta, torch.empty(4, 3, device="meta"))


@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
def test_tied_group_on_a_partitioned_model(tie: bool):
    model = tiny_llama(tie=False)
    partition(model, tie)
    tied, untied_output = tied_group(model)
    if tie:
        assert tied == ["model.embed_tokens", "lm_head"] and untied_output is None
    else:
        assert tied == ["model.embed_tokens"] and untied_output == "lm_head"


def test_bind_tokenizer_records_the_full_vocabulary_of_a_partitioned_base(tokenizer):
    from helpers import tiny

    model = tiny_llama(tie=False)
    partition(model, tie=False)
    config = NumberAdapterConfig(encoding="fone", target_modules=["q_proj"])
    bind_tokenizer(config, tiny.copy_tokenizer(tokenizer), model)
    assert config.original_vocab_size == ROWS  # not 0, the size of the empty partition
    assert config.resized_vocab_size == ROWS + 1 and config.num_token_id == ROWS  # [NUM] appended


def test_bind_tokenizer_refuses_an_embedding_of_unknown_size(tokenizer):
    from helpers import tiny

    model = tiny_llama(tie=False)
    model.model.embed_tokens.weight = nn.Parameter(torch.empty(0))  # partitioned, but without DeepSpeed's ds_shape
    config = NumberAdapterConfig(encoding="fone", target_modules=["q_proj"])
    with pytest.raises(ValueError, match=r"input embedding weight has shape \[0\].*ds_shape"):
        bind_tokenizer(config, tiny.copy_tokenizer(tokenizer), model)
    assert config.original_vocab_size is None  # nothing half-recorded


def test_resize_still_grows_ordinary_weights_with_zero_rows():
    model = tiny_llama(tie=False)
    before = model.lm_head.weight.detach().clone()
    resize_embeddings(model, ROWS + 2)
    assert model.get_input_embeddings().weight.shape == (ROWS + 2, HIDDEN)
    assert torch.equal(model.lm_head.weight[:ROWS], before)
    assert torch.equal(model.lm_head.weight[ROWS:], torch.zeros(2, HIDDEN))
    with pytest.raises(ValueError, match=f"has {ROWS + 2} rows, asked for {ROWS}"):
        resize_embeddings(model, ROWS)


def test_gathered_parameters_leaves_ordinary_parameters_alone():
    layer = nn.Linear(3, 2)
    before = layer.weight.detach().clone()
    with gathered_parameters([layer.weight, layer.bias], modifier_rank=0):
        layer.weight.data.add_(1.0)
    torch.testing.assert_close(layer.weight.detach(), before + 1.0, rtol=0, atol=0)


def tiny_t5(own_head: bool):
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(
        vocab_size=ROWS, d_model=HIDDEN, d_kv=8, d_ff=32, num_layers=1, num_heads=2, feed_forward_proj="gated-gelu",
        tie_word_embeddings=not own_head,  # transformers 5 keeps it as scale_decoder_outputs
    )  # fmt: skip
    return T5ForConditionalGeneration(config)


def partition_t5(model, tie_head: bool) -> None:
    embedding = fake_partitioned(11, (ROWS, HIDDEN))
    for module in (model.shared, model.encoder.embed_tokens, model.decoder.embed_tokens):
        module.weight = embedding
    model.lm_head.weight = embedding if tie_head else fake_partitioned(12, (ROWS, HIDDEN))


def test_a_t5_v11_whose_head_zero_init_tied_is_refused(tokenizer):
    from helpers import tiny

    from numadapter.mapping import get_peft_model
    from numadapter.tuner.patches import check_partitioned_head, expects_untied_head

    model = tiny_t5(own_head=True)
    assert expects_untied_head(model.config)
    partition_t5(model, tie_head=True)  # what transformers' zero.Init load makes of a T5 v1.1
    config = NumberAdapterConfig(encoding="fone", target_modules=["q", "v"])
    with pytest.raises(ValueError, match=r"LM head of its own.*scale_decoder_outputs=False.*zero3_init_flag: false"):
        get_peft_model(model, config, tokenizer=tiny.copy_tokenizer(tokenizer))
    partition_t5(model, tie_head=False)  # a correctly loaded v1.1: its own head
    check_partitioned_head(model)
    tied_v10 = tiny_t5(own_head=False)  # T5 v1.0: the head really is the embedding
    assert not expects_untied_head(tied_v10.config)
    partition_t5(tied_v10, tie_head=True)
    check_partitioned_head(tied_v10)


@pytest.mark.parametrize(("own_head", "expected"), [(True, True), (False, False)], ids=["t5-v1.1", "t5-v1.0"])
def test_train_loads_a_t5_with_its_own_head_whole(tmp_path, own_head: bool, expected: bool):
    from numadapter.app.commands import _untied_t5
    from numadapter.app.recipe import ModelSettings

    tiny_t5(own_head).config.save_pretrained(tmp_path)  # what numadapter train reads before deciding
    assert _untied_t5(ModelSettings(name_or_path=str(tmp_path))) is expected
    tiny_llama(tie=False).config.save_pretrained(tmp_path / "llama")
    assert _untied_t5(ModelSettings(name_or_path=str(tmp_path / "llama"))) is False
