"""Trains a tiny numadapter Llama for a few steps, alone or under torchrun (DDP / DeepSpeed ZeRO-2 / ZeRO-3).

Used by ``tests/numadapter/integrations/test_distributed.py``; also a minimal example of a distributed numadapter
training script:

    # one process
    python tests/dist_scripts/train_tiny.py --base DIR --out OUT
    # 2 processes, CPU or GPU (DDP; add --deepspeed recipes/accelerate/deepspeed/zero3.json for ZeRO-3)
    torchrun --nproc_per_node 2 tests/dist_scripts/train_tiny.py --base DIR --out OUT
    # the same through accelerate (CPU or GPU; never with --cpu)
    accelerate launch --config_file recipes/accelerate/zero3.yaml tests/dist_scripts/train_tiny.py --base DIR --out OUT

``--base DIR`` must hold ``tok/`` (a tokenizer) and ``model/`` (a Llama), e.g. from `tests/helpers/tiny.py`. Every
process writes to ``OUT``:

- ``rank{r}.json``: the world size accelerate and torch.distributed report, the per-step loss this rank computed
  (``local_losses``, scaled by the Trainer as it is for backward), the Trainer's logged losses (averaged over ranks),
  and the numbers of every example this rank trained on, per step (the first is the example's index);
- ``params_rank{r}.safetensors``: every trainable parameter after training, gathered whole under ZeRO-3;
- ``logits_rank{r}.safetensors``: LM logits and the number head's output (FoNE digit logits / xVal values) on a
  fixed probe batch after training;
- rank 0 only: ``initial.safetensors`` (trainable parameters before training), ``probe.safetensors`` (the probe
  batch) and ``final/`` (``Trainer.save_model``, called on every rank as ZeRO-3 requires).
"""

from __future__ import annotations

import argparse
import json
import os
import random


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="directory with tok/ and model/")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--deepspeed", default=None, help="DeepSpeed JSON file (none: DDP or one process)")
    parser.add_argument("--ds-set", default="{}", help='JSON merged into zero_optimization, e.g. {"stage": 3}')
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--global-batch", type=int, default=4, help="examples per optimizer step, all ranks")
    parser.add_argument("--examples", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--encoding", default="fone", choices=sorted(ENCODINGS))
    parser.add_argument("--checkpointing", action="store_true", help="activation (gradient) checkpointing")
    parser.add_argument(
        "--load-after-args",
        action="store_true",
        help="load the base after the training arguments (under ZeRO-3: partitioned at load by zero.Init)",
    )
    return parser


# per encoding: settings that give every number module a gradient on this data
ENCODINGS = {
    "fone": {},
    "xval": {"xval_scale": 500.0},
    "digits": {"aggregate": True, "aggregate_loss_lambda": 0.5, "ntl_weight": 0.3},
}


def dataset_rows(n: int, seed: int = 0) -> list[dict[str, str]]:
    """Prompt-completion arithmetic with numbers (so the [NUM] row and the number modules get gradients)."""
    rng = random.Random(seed)
    rows = []
    for k in range(n):
        a, b = rng.randrange(1000), rng.randrange(1, 1000)
        rows.append({"prompt": f"Case {k}: what is {a} plus {b}?", "completion": f" It is {a + b}."})
    return rows


def main(argv: list[str] | None = None) -> None:
    args = make_parser().parse_args(argv)
    import torch

    torch.set_num_threads(1)  # tiny matrices, several processes on few cores

    from numadapter.integrations.launch import gathered_parameters, load_deepspeed_config, prepare_distributed_state

    ds_config = None
    if args.deepspeed:
        ds_config = load_deepspeed_config(args.deepspeed)
        ds_config.setdefault("zero_optimization", {}).update(json.loads(args.ds_set))
    # before the training arguments: fixes the CPU process state (see numadapter.integrations.launch)
    overrides = prepare_distributed_state(ds_config)

    import datasets
    from safetensors.torch import save_file
    from transformers import AutoTokenizer, LlamaForCausalLM
    from trl import SFTConfig

    from numadapter.config import NumberAdapterConfig
    from numadapter.mapping import get_peft_model
    from numadapter.tokenization import NumberTokenizer
    from numadapter.training.sft import NumberSFTTrainer

    datasets.disable_progress_bars()

    def build():
        torch.manual_seed(0)  # the same initial adapter on every rank
        tokenizer = AutoTokenizer.from_pretrained(os.path.join(args.base, "tok"))
        base = LlamaForCausalLM.from_pretrained(os.path.join(args.base, "model"), dtype=torch.float32)
        config = NumberAdapterConfig(
            encoding=args.encoding, int_digits=4, frac_digits=2, r=4, lora_alpha=8, lora_dropout=0.0,
            target_modules=["q_proj", "v_proj"], **ENCODINGS[args.encoding],
        )  # fmt: skip
        model = get_peft_model(base, config, tokenizer=tokenizer)
        return model, NumberTokenizer(tokenizer, config)

    if not args.load_after_args:  # a full copy per rank; DeepSpeed partitions it when training starts
        model, ntok = build()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if args.global_batch % world:
        raise ValueError(f"--global-batch {args.global_batch} must be a multiple of the world size {world}.")
    sft = SFTConfig(
        output_dir=os.path.join(args.out, "trainer"),
        max_steps=args.steps,
        per_device_train_batch_size=args.global_batch // world,
        gradient_accumulation_steps=1,
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        max_grad_norm=1.0,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        seed=0,
        data_seed=0,
        bf16=False,
        fp16=False,
        activation_checkpointing=args.checkpointing,
        dataloader_num_workers=0,
        **overrides,
    )
    rank = sft.process_index
    if args.load_after_args:  # with a ZeRO-3 config, from_pretrained now partitions the base as it loads
        model, ntok = build()

    def trainable() -> dict[str, torch.Tensor]:
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        with gathered_parameters([p for _, p in named]):
            return {n: p.detach().clone().float().cpu().contiguous() for n, p in named}

    os.makedirs(args.out, exist_ok=True)
    initial = trainable()
    if rank == 0:
        save_file(initial, os.path.join(args.out, "initial.safetensors"))

    record: dict[str, list] = {"local_losses": [], "batches": []}

    class RecordingTrainer(NumberSFTTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            out = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            if model.training:
                loss = out[0] if return_outputs else out
                record["local_losses"].append(loss.item())
                values, marks = inputs["num_values"].tolist(), inputs["num_mask"].tolist()
                record["batches"].append([[v for v, m in zip(row, keep) if m] for row, keep in zip(values, marks)])
            return out

    trainer = RecordingTrainer(
        model=model,
        args=sft,
        train_dataset=datasets.Dataset.from_list(dataset_rows(args.examples)),
        processing_class=ntok,
    )
    trainer.train()

    probe = ntok(
        ["Case 99: what is 12 plus 30? It is 42.", "Case 98: what is 7.5 plus 1?"], padding=True, return_tensors="pt"
    )
    probe = {k: v for k, v in probe.items() if isinstance(v, torch.Tensor)}
    engine = trainer.model_wrapped  # the DeepSpeed engine / DDP module: its forward gathers ZeRO-3 parameters
    engine.eval()
    with torch.no_grad():  # on the training device (a GPU: the CPU batch failed in the embedding lookup)
        out = engine(**{k: v.to(trainer.args.device) for k, v in probe.items()}, use_cache=False)
    fields = ("logits", "number_logits", "number_values")
    logits = {k: getattr(out, k).float().cpu().contiguous() for k in fields if getattr(out, k, None) is not None}
    save_file(logits, os.path.join(args.out, f"logits_rank{rank}.safetensors"))
    save_file(trainable(), os.path.join(args.out, f"params_rank{rank}.safetensors"))
    trainer.save_model(os.path.join(args.out, "final"))  # every rank: ZeRO-3 gathers the adapter for saving
    if rank == 0:
        save_file(probe, os.path.join(args.out, "probe.safetensors"))

    import torch.distributed as dist

    state = trainer.accelerator.state
    stage = overrides["deepspeed"]["zero_optimization"].get("stage", 0) if "deepspeed" in overrides else None
    summary = {
        "world_size": world,
        "accelerate_processes": state.num_processes,
        "torch_world_size": dist.get_world_size() if dist.is_initialized() else 1,
        "distributed_type": str(state.distributed_type),
        "zero_stage": stage,
        "logged_losses": [h["loss"] for h in trainer.state.log_history if "loss" in h],
        **record,
    }
    with open(os.path.join(args.out, f"rank{rank}.json"), "w", encoding="utf-8") as file:
        json.dump(summary, file)


if __name__ == "__main__":
    from numadapter.app.cli import close_process_group

    try:
        main()
        close_process_group(wait=True)
    finally:
        close_process_group()
