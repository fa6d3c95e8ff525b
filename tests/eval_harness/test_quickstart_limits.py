"""eval_harness.quickstart_limits: the probes behind the quick start's diagnosis (docs/results.md, "What limits
FoNE + LoRA on a tiny pretrained base")."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from eval_harness.quickstart_limits import _random_base, attention_entropy, parse_settings, scale_query_key


def test_parse_settings_reads_json_values_and_keeps_other_text():
    items = ["r=64", "lora_dropout=1e-3", "fone_projection=pad", 'target_modules=["q_proj", "v_proj"]']
    items.append("use_rslora=true")
    assert parse_settings(items) == {
        "r": 64,
        "lora_dropout": 0.001,
        "fone_projection": "pad",
        "target_modules": ["q_proj", "v_proj"],
        "use_rslora": True,
    }
    with pytest.raises(ValueError, match="'r64' must look like name=value"):
        parse_settings(["r64"])


def test_scale_query_key_scales_only_query_and_key_and_flattens_attention(tmp_path):
    source = _random_base("32,64,2", str(tmp_path / "base"))
    model = AutoModelForCausalLM.from_pretrained(source)
    with torch.no_grad():  # make the attention peaked, as in a pretrained base
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(40.0)
            layer.self_attn.k_proj.weight.mul_(40.0)
    model.save_pretrained(source)
    scaled = scale_query_key(source, 0.1, str(tmp_path / "scaled"))

    before = dict(AutoModelForCausalLM.from_pretrained(source).named_parameters())
    after = dict(AutoModelForCausalLM.from_pretrained(scaled).named_parameters())
    assert AutoTokenizer.from_pretrained(scaled).get_vocab() == AutoTokenizer.from_pretrained(source).get_vocab()
    for name, weight in before.items():
        factor = 0.1 if name.endswith(("q_proj.weight", "k_proj.weight")) else 1.0
        torch.testing.assert_close(after[name], weight * factor)
    assert sum(name.endswith("q_proj.weight") for name in before) == 2

    peaked = [h for layer in attention_entropy(source) for h in layer]
    flat = [h for layer in attention_entropy(scaled) for h in layer]
    uniform = torch.log(torch.tensor(13.0)).item()  # 13 tokens up to the answer position
    assert min(peaked) < 1.0  # logits x1600: nearly one-hot somewhere
    assert min(flat) > 0.95 * uniform  # logits x16 of a small init: close to uniform


def test_pretrained_base_has_the_requested_sizes_and_was_trained(tmp_path):
    from eval_harness.quickstart_limits import _pretrained_base

    path = _pretrained_base("32,48,1,3", str(tmp_path / "pre"))
    model = AutoModelForCausalLM.from_pretrained(path)
    config = model.config
    assert (config.hidden_size, config.intermediate_size, config.num_hidden_layers) == (32, 48, 1)
    torch.manual_seed(0)  # the init build_tiny_base starts from (seed 0): 3 steps must have moved it
    fresh = type(model)(config)
    assert not torch.equal(fresh.model.layers[0].mlp.up_proj.weight, model.model.layers[0].mlp.up_proj.weight)
    assert AutoTokenizer.from_pretrained(path).eos_token_id is not None


class _Slow:
    """A tokenizer seen as slow (no offsets): answer_position counts the tokens up to the marker instead."""

    is_fast = False

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer

    def __call__(self, *args, **kwargs):
        return self._tokenizer(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)


def test_answer_position_finds_the_token_after_the_equals_sign_in_any_tokenizer(tmp_path):
    from helpers.real import real_tokenizer

    from eval_harness.quickstart_limits import answer_position
    from numadapter.testing.toy import build_tokenizer

    text = "682 + 361 = 1043"
    toy = build_tokenizer("digits", str(tmp_path / "toy"))  # <s> 6 8 2 Ġ + Ġ 3 6 1 Ġ = | Ġ 1 0 4 3
    real = real_tokenizer()  # 6 8 2 Ġ+ Ġ 3 6 1 Ġ= | Ġ 1 0 4 3 (no bos): a byte-level BPE writes "Ġ="
    for tokenizer, expected in ((toy, 12), (real, 9), (_Slow(toy), 12), (_Slow(real), 9)):
        assert answer_position(tokenizer, text) == expected
        tokens = tokenizer.convert_ids_to_tokens(tokenizer(text)["input_ids"])
        assert tokens[expected - 1].endswith("=") and tokens[expected] == "Ġ"
    with pytest.raises(ValueError, match="has no '='"):
        answer_position(real, "682 + 361")
    with pytest.raises(ValueError, match="ends at its '='"):
        answer_position(real, "682 + 361 =")


def test_attention_entropy_runs_on_the_real_checkpoint():
    import math

    from helpers.real import real_dir

    entropy = attention_entropy(real_dir())  # crashed before: it looked for a "=" token, SmolLM2 writes "Ġ="
    assert len(entropy) == 30 and all(len(heads) == 9 for heads in entropy)
    values = [h for heads in entropy for h in heads]
    assert all(0.0 <= h <= math.log(10) + 1e-4 for h in values)  # 10 keys up to the answer position
    assert min(values) < 0.5 < max(values)  # a pretrained base: some heads peaked, some spread
