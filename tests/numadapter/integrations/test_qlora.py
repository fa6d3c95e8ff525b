"""QLoRA (`numadapter.integrations.qlora`): a FoNE adapter on a 4-bit NF4 tiny Llama, trained on CPU (bitsandbytes >=
0.50).

Checked: the base Linear layers really are 4-bit and LoRA wraps them; the [NUM] rows and the number modules are
float32 and trainable, before and after training with `NumberSFTTrainer` (whose TRL base casts trainable parameters
of quantised models to bf16); training changes LoRA, the [NUM] rows and the number modules but not a single byte of
the 4-bit weights; the saved adapter holds the number parameters in float32; and the input errors.

bitsandbytes' CPU repack (a 4-bit layer's first eval forward on an AVX512-BF16 CPU rewrites its weight): the repacked
layout is read exactly and undone exactly, gradients flow again; `prepare_qlora_model` and the trainer keep it from
happening, so an export after a training step and an evaluation matches the adapter; a layer repacked anyway is
exported from its new layout; and the same on the real SmolLM2-135M checkpoint in 4-bit.
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
    dequantize_cpu_packed,
    is_cpu_packed,
    keep_canonical_layout,
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

    from numadapter.testing import toy

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


def load_4bit_float32(path) -> torch.nn.Module:
    """A 4-bit model computing in float32 (its forward is float32-exact against its de-quantised weights)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(
        str(path), dtype=torch.float32, quantization_config=qlora_config(torch.float32), device_map="cpu"
    )


def repack(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> None:
    """What an evaluation does to the 4-bit layers on an AVX512-BF16 CPU: an eval forward without gradients repacks
    them. Elsewhere bitsandbytes' own conversion (the function that forward calls) stands in."""
    with torch.no_grad():
        model.eval()(**inputs)
    from bitsandbytes.functional import _convert_weight_packed_for_cpu

    for weight in quantized_weights(model).values():
        if not is_cpu_packed(weight):
            weight.data, weight.quant_state = _convert_weight_packed_for_cpu(weight.data, weight.quant_state)


def bf16_scaled(weight) -> torch.Tensor:
    """bitsandbytes' own de-quantisation of a 4-bit weight in the original layout, with its (double-quantised) block
    scales rounded to bf16 as the CPU repack rounds them: the weights a repacked layer computes with."""
    import copy

    import bitsandbytes.functional as bnbf

    state = copy.deepcopy(weight.quant_state)
    if state.nested:
        state.absmax = bnbf.dequantize_blockwise(state.absmax, state.state2) + state.offset
        state.nested, state.state2 = False, None
    state.absmax = state.absmax.to(torch.bfloat16).float()
    return bnbf.dequantize_4bit(weight.data.clone(), state).float()


@pytest.mark.parametrize("storage", [None, torch.bfloat16])
def test_cpu_repack_is_read_exactly_and_undone(paths, storage):
    import bitsandbytes.functional as bnbf

    config = qlora_config(torch.float32, quant_storage=storage)
    model = LlamaForCausalLM.from_pretrained(
        str(paths / "model"), dtype=torch.float32, quantization_config=config, device_map="cpu"
    )
    layer = model.model.layers[0].mlp.down_proj  # [64, 128]
    weight = layer.weight
    before = bnbf.dequantize_4bit(weight.data, weight.quant_state).float()
    expected = bf16_scaled(weight)
    repack(model, {"input_ids": torch.tensor([[1, 5, 9]])})
    assert is_cpu_packed(weight) and list(weight.shape) == [64, 64]  # [N, K / 2] bytes
    misread = bnbf.dequantize_4bit(weight.data, weight.quant_state).float()
    assert (misread - before).abs().max() > 0.1 * before.abs().max()  # why the export needs its own reader
    got = dequantize_cpu_packed(weight)
    assert torch.equal(got, expected)
    torch.testing.assert_close(got, before, rtol=2**-8, atol=0)  # bf16 scales: relative error <= 2^-8

    assert keep_canonical_layout(model) == [
        f"model.layers.{i}.{m}" for i in range(2) for m in
        ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
         "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
    ]  # fmt: skip
    assert not is_cpu_packed(weight) and weight.dtype == (storage or torch.uint8)
    assert torch.equal(bnbf.dequantize_4bit(weight.data, weight.quant_state).float(), expected)
    inputs = torch.randn(3, 128, requires_grad=True)
    layer.train()(inputs).sum().backward()  # repacked, this input got no gradient at all
    torch.testing.assert_close(inputs.grad, expected.sum(0).expand(3, -1), rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        layer.eval()(torch.randn(2, 128))
    assert not is_cpu_packed(weight)  # turned off: an evaluation no longer repacks
    assert keep_canonical_layout(model) == []
    with pytest.raises(ValueError, match="CPU layout, got Params4bit .*use bitsandbytes.functional.dequantize_4bit"):
        dequantize_cpu_packed(weight)


def float32_lora(model: torch.nn.Module) -> None:
    """TRL's SFTTrainer casts the LoRA matrices of a quantised model to bf16; casting them back is exact, so the
    adapter then computes the same function in float32, as the float32 export does."""
    for name, param in model.named_parameters():
        if "lora_" in name:
            param.data = param.data.float()


def test_export_after_a_training_step_matches_the_adapter(paths, tmp_path):
    """Train a step, evaluate, export: the export's logits are the adapter's (before the fix bitsandbytes repacked
    every 4-bit layer in the evaluation and the export read the new layout as the old one: off by 0.73)."""
    from trl import SFTConfig

    from numadapter.export import export_merged, load_exported
    from numadapter.tokenization import NumberTokenizer
    from numadapter.training.sft import NumberSFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(str(paths / "tok"))
    base = prepare_qlora_model(load_4bit_float32(paths / "model"), gradient_checkpointing=False)
    torch.manual_seed(0)
    config = NumberAdapterConfig(encoding="fone", int_digits=4, frac_digits=2, r=4, lora_alpha=8, lora_dropout=0.0,
                                 target_modules="all-linear")  # fmt: skip
    model = get_peft_model(base, config, tokenizer=tokenizer)
    ntok = NumberTokenizer(tokenizer, config)
    args = SFTConfig(
        output_dir=str(tmp_path / "out"), max_steps=1, per_device_train_batch_size=4, learning_rate=1e-2,
        report_to=[], save_strategy="no", disable_tqdm=True, use_cpu=True, bf16=False, seed=0,
    )  # fmt: skip
    # bf16=False: Accelerate would leave a bf16 autocast around the adapter's forward after training.
    NumberSFTTrainer(model=model, args=args, train_dataset=arithmetic(4), processing_class=ntok).train()
    float32_lora(model)
    batch = ntok(["what is 12.5 plus 3?", "It is 7"], return_tensors="pt", padding=True)
    with torch.no_grad():
        want = model.eval()(**batch).logits
    export_merged(model, ntok, tmp_path / "merged", dtype="float32")
    loaded, _ = load_exported(tmp_path / "merged")
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, want, rtol=1e-5, atol=1e-5)
    assert not any(is_cpu_packed(w) for w in quantized_weights(model).values())  # the evaluation did not repack


def test_export_reads_layers_a_forward_repacked(paths, tmp_path):
    """Without `prepare_qlora_model` or the trainer nothing stops the repack; the export reads the repacked layout and
    equals the same adapter computed from those weights in the original layout (before the fix: off by ~0.7)."""
    import copy

    from numadapter.export import export_merged, load_exported
    from numadapter.tokenization import NumberTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(paths / "tok"))
    torch.manual_seed(0)
    config = NumberAdapterConfig(encoding="fone", int_digits=4, frac_digits=2, r=4, lora_alpha=8, lora_dropout=0.0,
                                 target_modules="all-linear", init_lora_weights=False)  # fmt: skip
    model = get_peft_model(load_4bit_float32(paths / "model"), config, tokenizer=tokenizer)
    ntok = NumberTokenizer(tokenizer, config)
    batch = ntok(["what is 12.5 plus 3?", "It is 7"], return_tensors="pt", padding=True)
    repack(model, batch)
    assert all(is_cpu_packed(w) for w in quantized_weights(model).values())
    reference = copy.deepcopy(model)
    assert len(keep_canonical_layout(reference)) == 14
    with torch.no_grad():
        want = reference(**batch).logits
    export_merged(model, ntok, tmp_path / "merged", dtype="float32")
    loaded, _ = load_exported(tmp_path / "merged")
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, want, rtol=1e-5, atol=1e-5)


def test_real_checkpoint_in_4bit_exports_what_it_computes(tmp_path):
    """SmolLM2-135M-Instruct in 4-bit NF4 on CPU, as `numadapter train` loads a QLoRA recipe: one forward, export,
    the export's logits are the adapter's within the README's tolerance (before the fix: off by 35-53)."""
    from helpers.real import EXPORT_ATOL, real_dir, real_tokenizer

    from numadapter.export import export_merged, load_exported
    from numadapter.tokenization import NumberTokenizer

    base = prepare_qlora_model(load_4bit_float32(real_dir()), gradient_checkpointing=False)
    tokenizer = real_tokenizer()
    torch.manual_seed(0)
    config = NumberAdapterConfig(encoding="fone", int_digits=6, frac_digits=2, r=8, lora_alpha=16, lora_dropout=0.0,
                                 target_modules="all-linear", init_lora_weights=False)  # fmt: skip
    model = get_peft_model(base, config, tokenizer=tokenizer).eval()
    ntok = NumberTokenizer(tokenizer, config)
    batch = ntok(["What is 12.5 plus 3?"], return_tensors="pt")
    with torch.no_grad():
        want = model(**batch).logits
    export_merged(model, ntok, tmp_path / "merged", dtype="float32", inplace=True)
    loaded, _ = load_exported(tmp_path / "merged")
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, want, rtol=0, atol=EXPORT_ATOL)


def test_trainer_undoes_a_repack_and_turns_it_off(paths, tmp_path):
    """An evaluation before training (without `prepare_qlora_model`) repacked the layers; the trainer restores them,
    or training would get no gradient through them."""
    import bitsandbytes
    from trl import SFTConfig

    from numadapter.tokenization import NumberTokenizer
    from numadapter.training.sft import NumberSFTTrainer

    tokenizer, config = AutoTokenizer.from_pretrained(str(paths / "tok")), adapter_config()
    model = get_peft_model(load_4bit(paths), config, tokenizer=tokenizer)
    ntok = NumberTokenizer(tokenizer, config)
    repack(model, ntok(["what is 12.5 plus 3?"], return_tensors="pt"))
    args = SFTConfig(output_dir=str(tmp_path / "out"), report_to=[], use_cpu=True, max_steps=1)
    NumberSFTTrainer(model=model, args=args, train_dataset=arithmetic(4), processing_class=ntok)
    layers = [m for m in model.modules() if isinstance(m, bitsandbytes.nn.Linear4bit)]
    assert len(layers) == 14 and not any(is_cpu_packed(m.weight) or m.support_avx512bf16_for_cpu for m in layers)
