"""QLoRA (`numadapter.integrations.qlora`): a FoNE adapter on a 4-bit NF4 tiny Llama, trained on CPU (bitsandbytes >=
0.50).

Checked: the base Linear layers really are 4-bit and LoRA wraps them; the [NUM] rows and the number modules are
float32 and trainable, before and after training with `NumberSFTTrainer` (whose TRL base casts trainable parameters
of quantised models to bf16); training changes LoRA, the [NUM] rows and the number modules but not a single byte of
the 4-bit weights; the saved adapter holds the number parameters in float32; and the input errors.
"""

from __future__ import annotations

import random

import pytest
import torch

pytest.importorskip("bitsandbytes", reason="QLoRA needs bitsandbytes: pip install 'numadapter[bnb]'")

import datasets  # noqa: E402
from transformers import AutoTokenizer, LlamaForCausalLM  # noqa: E402

from numadapter.config import NumberAdapterConfig  # noqa: E402
from numadapter.integrations.qlora import (  # noqa: E402
    check_number_precision,
    check_zero3_quant_storage,
    number_parameters,
    prepare_qlora_model,
    qlora_config,
    quantized_weights,
    restore_number_precision,
)
from numadapter.mapping import get_peft_model  # noqa: E402

ZERO3 = {"zero_optimization": {"stage": 3, "stage3_gather_16bit_weights_on_model_save": True}}


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    from helpers import tiny

    from numadapter.app import toy

    root = tmp_path_factory.mktemp("qlora")
    tokenizer = toy.build_tokenizer("digits", root / "tok")
    tiny.build_model("llama", root / "model", len(tokenizer), tie=False, hidden_size=64, layers=2, heads=4)
    return root


def load_4bit(paths, storage: torch.dtype | None = torch.bfloat16) -> torch.nn.Module:
    config = qlora_config(torch.bfloat16, quant_storage=storage)
    return LlamaForCausalLM.from_pretrained(
        str(paths / "model"), dtype=torch.bfloat16, quantization_config=config, device_map="cpu"
    )


def adapter_config() -> NumberAdapterConfig:
    return NumberAdapterConfig(
        encoding="fone", int_digits=4, frac_digits=2, r=4, lora_alpha=8, lora_dropout=0.0,
        target_modules=["q_proj", "v_proj"],
    )  # fmt: skip


def qlora_model(paths):
    tokenizer = AutoTokenizer.from_pretrained(str(paths / "tok"))
    base = prepare_qlora_model(load_4bit(paths))
    torch.manual_seed(0)
    config = adapter_config()
    return get_peft_model(base, config, tokenizer=tokenizer), tokenizer, config


def packed_bytes(model) -> dict[str, torch.Tensor]:
    """The raw bytes of every 4-bit weight (compared as bytes: a bf16 view of packed nibbles may hold NaNs)."""
    return {n: p.data.detach().view(torch.uint8).clone() for n, p in quantized_weights(model).items()}


def arithmetic(n: int) -> datasets.Dataset:
    rng = random.Random(0)
    rows = []
    for k in range(n):
        a, b = rng.randrange(1000), rng.randrange(1000)
        rows.append({"prompt": f"Case {k}: what is {a} plus {b}?", "completion": f" It is {a + b}."})
    return datasets.Dataset.from_list(rows)


def test_base_is_4bit_and_number_parts_are_float32(paths):
    model, _, _ = qlora_model(paths)
    attention = model.get_base_model().model.layers[0].self_attn
    assert type(attention.q_proj.base_layer).__name__ == "Linear4bit"  # LoRA around a 4-bit layer
    assert type(attention.k_proj).__name__ == "Linear4bit"  # not targeted: 4-bit, no LoRA
    packed = quantized_weights(model)
    assert len(packed) == 2 * 7  # q, k, v, o, gate, up, down per layer
    hidden = 64
    # 4 bits per weight: a [64, 64] q_proj packs into 64 * 64 / 2 bytes, stored as bf16 (2 bytes each)
    q_name = next(n for n in packed if "layers.0.self_attn.q_proj" in n)
    assert packed[q_name].dtype == torch.bfloat16 and packed[q_name].numel() == hidden * hidden // 4
    dtypes = check_number_precision(model)
    assert any("embed_tokens.token_adapter.trainable_tokens_delta" in n for n in dtypes)
    assert any("lm_head.token_adapter.trainable_tokens_delta" in n for n in dtypes)
    assert {n.split(".default.")[-1] for n in dtypes if "number_modules" in n} >= {"embedding.proj.weight"}
    assert set(dtypes.values()) == {torch.float32}


def test_qlora_trains_with_number_parts_kept_in_float32(paths, tmp_path):
    from trl import SFTConfig

    from numadapter.tokenization import NumberTokenizer
    from numadapter.training.sft import NumberSFTTrainer

    model, tokenizer, config = qlora_model(paths)
    args = SFTConfig(
        output_dir=str(tmp_path / "out"), max_steps=3, per_device_train_batch_size=4, learning_rate=1e-2,
        logging_steps=1, report_to=[], save_strategy="no", disable_tqdm=True, use_cpu=True, bf16=True, seed=0,
        activation_checkpointing=True, activation_checkpointing_kwargs={"use_reentrant": False},
    )  # fmt: skip
    trainer = NumberSFTTrainer(
        model=model, args=args, train_dataset=arithmetic(12), processing_class=NumberTokenizer(tokenizer, config)
    )
    check_number_precision(model)  # still float32 after the trainer's constructor
    before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    packed = packed_bytes(model)
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 3 and all(torch.isfinite(torch.tensor(losses)))
    assert set(check_number_precision(model).values()) == {torch.float32}
    after = dict(model.named_parameters())
    for name in number_parameters(model):
        assert (after[name].detach().float() - before[name].float()).abs().max() > 1e-3, f"{name} did not train"
    lora = [n for n in before if "lora_B" in n]
    assert lora and all((after[n].detach() - before[n]).abs().max() > 0 for n in lora)
    for name, value in packed_bytes(model).items():
        assert torch.equal(value, packed[name]), f"4-bit weight {name} changed"
    model.save_pretrained(str(tmp_path / "adapter"))
    from safetensors.torch import load_file

    saved = load_file(str(tmp_path / "adapter" / "adapter_model.safetensors"))
    numbers = {k: v for k, v in saved.items() if "number_modules" in k or "trainable_tokens_delta" in k}
    numbers.pop("base_model.number_modules.settings_stamp")  # bytes of the settings, not a parameter
    assert len(numbers) == len(number_parameters(model)) and {v.dtype for v in numbers.values()} == {torch.float32}


def test_restore_number_precision_undoes_a_bf16_cast(paths):
    model, _, _ = qlora_model(paths)
    names = sorted(number_parameters(model))
    for param in model.parameters():  # what TRL's SFTTrainer does to a quantised model's trainable parameters
        if param.requires_grad:
            param.data = param.data.to(torch.bfloat16)
    with pytest.raises(ValueError, match=r"torch.bfloat16, expected torch.float32: .*restore_number_precision\(model"):
        check_number_precision(model)
    assert sorted(restore_number_precision(model)) == names
    assert set(check_number_precision(model).values()) == {torch.float32}
    lora = [p for n, p in model.named_parameters() if "lora_A" in n]
    assert {p.dtype for p in lora} == {torch.bfloat16}  # LoRA itself is left as the trainer set it
    assert restore_number_precision(model) == []


def test_rows_are_float32_without_prepare_and_bf16_with_autocast_off(paths):
    tokenizer = AutoTokenizer.from_pretrained(str(paths / "tok"))
    base = load_4bit(paths)
    assert base.get_input_embeddings().weight.dtype == torch.bfloat16
    model = get_peft_model(base, adapter_config(), tokenizer=tokenizer)  # PEFT upcasts adapter weights
    assert set(check_number_precision(model).values()) == {torch.float32}
    plain = get_peft_model(load_4bit(paths), adapter_config(), tokenizer=tokenizer, autocast_adapter_dtype=False)
    with pytest.raises(ValueError, match="trainable_tokens_delta.* is torch.bfloat16.*restore_number_precision"):
        check_number_precision(plain)


def test_zero3_needs_quant_storage_equal_to_the_training_dtype(paths):
    uint8 = load_4bit(paths, storage=None)
    assert {p.dtype for p in quantized_weights(uint8).values()} == {torch.uint8}
    with pytest.raises(ValueError, match=r"training dtype torch.bfloat16, found torch.uint8.*quant_storage="):
        check_zero3_quant_storage(uint8, ZERO3)
    check_zero3_quant_storage(uint8, {"zero_optimization": {"stage": 2}})  # only ZeRO-3 partitions weights
    check_zero3_quant_storage(uint8)  # no ZeRO-3 in this process
    matching = load_4bit(paths, storage=torch.bfloat16)
    check_zero3_quant_storage(matching, ZERO3)
    with pytest.raises(ValueError, match="training dtype torch.float16, found torch.bfloat16"):
        check_zero3_quant_storage(matching, {**ZERO3, "fp16": {"enabled": True}})


def test_qlora_input_errors(paths):
    with pytest.raises(ValueError, match=r"`quant_type` must be one of \['nf4', 'fp4'\], got 'int4'"):
        qlora_config(quant_type="int4")
    with pytest.raises(ValueError, match="`quant_storage` must be None or one of.*got torch.int32"):
        qlora_config(quant_storage=torch.int32)
    with pytest.raises(ValueError, match="`compute_dtype` must be one of.*got 'bf16'"):
        qlora_config(compute_dtype="bf16")
    with pytest.raises(TypeError, match="`double_quant` must be a bool, got str"):
        qlora_config(double_quant="yes")
    plain = LlamaForCausalLM.from_pretrained(str(paths / "model"), dtype=torch.float32)
    with pytest.raises(ValueError, match="no bitsandbytes 4-bit weights: load it with .*qlora_config"):
        prepare_qlora_model(plain)
    with pytest.raises(ValueError, match="has no numadapter number parameters"):
        check_number_precision(plain)


def test_qlora_config_is_nf4_with_double_quantisation():
    config = qlora_config(torch.float32, quant_storage=torch.float32)
    assert config.load_in_4bit and not config.load_in_8bit
    assert config.bnb_4bit_quant_type == "nf4" and config.bnb_4bit_use_double_quant is True
    assert config.bnb_4bit_compute_dtype == torch.float32 and config.bnb_4bit_quant_storage == torch.float32
    assert qlora_config().bnb_4bit_quant_storage == torch.uint8
