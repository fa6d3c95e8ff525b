"""Trains a tiny FoNE Llama through numadapter's own entry point (`numadapter.app.commands.train`, i.e.
``numadapter train``).

Used by ``tests/numadapter/integrations/test_distributed.py`` to check the ZeRO-3 path real large models take: under
``torchrun`` with a ZeRO-3 DeepSpeed config, `numadapter.app.commands.train` builds the training arguments first, so
``from_pretrained`` loads the base *partitioned* (``deepspeed.zero.Init``), and the adapter is bound, trained and saved
on top of it:

    # one process (the reference)
    python tests/dist_scripts/train_recipe.py --base DIR --out OUT
    # 2 processes, ZeRO-3, the base partitioned while it loads
    torchrun --nproc_per_node 2 tests/dist_scripts/train_recipe.py --base DIR --out OUT \\
        --deepspeed recipes/accelerate/deepspeed/zero3.json

``--base DIR`` must hold ``tok/`` and ``model/`` (e.g. from `tests/helpers/tiny.py`). Every process writes to ``OUT``:

- ``rank{r}.json``: the world sizes, the Trainer's logged losses, and how the base looked right after
  ``from_pretrained`` (``load``: the input embedding's ``numel()``, ``ds_shape`` and ``ds_status``, and how many
  parameters were empty);
- ``logits_rank{r}.safetensors``: LM logits and FoNE digit logits on a fixed probe batch after training, computed by
  the DeepSpeed engine (which gathers the partitioned weights);
- rank 0 only: ``probe.safetensors``; every rank: ``final/`` (the saved adapter, written by `train`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="directory with tok/ and model/")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--deepspeed", default=None, help="DeepSpeed JSON file (none: one process, no DeepSpeed)")
    parser.add_argument("--ds-set", default="{}", help='JSON merged into zero_optimization, e.g. {"stage": 3}')
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--global-batch", type=int, default=4, help="examples per optimizer step, all ranks")
    parser.add_argument("--examples", type=int, default=16)
    return parser


def load_state(model) -> dict:
    """How the freshly loaded base looks: is it partitioned (empty parameters with ``ds_shape``)?"""
    weight = model.get_input_embeddings().weight
    params = list(model.parameters())
    return {
        "embedding_numel": weight.numel(),
        "embedding_ds_shape": list(weight.ds_shape) if hasattr(weight, "ds_shape") else None,
        "embedding_ds_status": str(getattr(weight, "ds_status", None)),
        "empty_params": sum(p.numel() == 0 for p in params),
        "params": len(params),
    }


def main(argv: list[str] | None = None) -> None:
    args = make_parser().parse_args(argv)
    import torch

    torch.set_num_threads(1)  # tiny matrices, several processes on few cores
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from train_tiny import dataset_rows

    import numadapter.app.commands as entry
    from numadapter.app.recipe import build_recipe
    from numadapter.integrations.launch import load_deepspeed_config
    from numadapter.training.sft import NumberSFTTrainer

    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    os.makedirs(args.out, exist_ok=True)
    data = os.path.join(args.out, f"data_rank{rank}.jsonl")  # one file per rank: no two processes write one file
    with open(data, "w", encoding="utf-8") as file:
        file.writelines(json.dumps(row) + "\n" for row in dataset_rows(args.examples))
    training = {
        "output_dir": os.path.join(args.out, "final"),
        "max_steps": args.steps,
        "per_device_train_batch_size": args.global_batch // world,
        "gradient_accumulation_steps": 1,
        "learning_rate": 5e-3,
        "lr_scheduler_type": "constant",
        "max_grad_norm": 1.0,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "disable_tqdm": True,
        "seed": 0,
        "data_seed": 0,
        "bf16": False,
        "dataloader_num_workers": 0,
        "max_length": 64,
    }
    if args.deepspeed:
        ds_config = load_deepspeed_config(args.deepspeed)
        ds_config.setdefault("zero_optimization", {}).update(json.loads(args.ds_set))
        training["deepspeed"] = ds_config
    recipe = build_recipe(
        {
            "model": {"name_or_path": os.path.join(args.base, "model"), "tokenizer": os.path.join(args.base, "tok"),
                      "dtype": "float32"},
            "data": {"train": data},
            "adapter": {"encoding": "fone", "int_digits": 4, "frac_digits": 2, "r": 4, "lora_alpha": 8,
                        "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"]},
            "training": training,
        }
    )  # fmt: skip

    record: dict = {}
    load_base_model, train = entry.load_base_model, NumberSFTTrainer.train

    def recording_load(settings, seq2seq):
        model = load_base_model(settings, seq2seq)
        record["load"] = load_state(model)
        return model

    def recording_train(self, *a, **k):
        record["trainer"] = self
        return train(self, *a, **k)

    entry.load_base_model, NumberSFTTrainer.train = recording_load, recording_train
    entry.train(recipe, print_fn=lambda text: None)

    from safetensors.torch import save_file

    trainer = record.pop("trainer")
    ntok = trainer.processing_class
    probe = ntok(
        ["Case 99: what is 12 plus 30? It is 42.", "Case 98: what is 7.5 plus 1?"], padding=True, return_tensors="pt"
    )
    probe = {k: v for k, v in probe.items() if isinstance(v, torch.Tensor)}
    engine = trainer.model_wrapped  # the DeepSpeed engine: its forward gathers ZeRO-3 parameters
    engine.eval()
    with torch.no_grad():
        out = engine(**probe, use_cache=False)
    logits = {k: getattr(out, k).float().contiguous() for k in ("logits", "number_logits")}
    save_file(logits, os.path.join(args.out, f"logits_rank{rank}.safetensors"))
    if rank == 0:
        save_file(probe, os.path.join(args.out, "probe.safetensors"))
    import torch.distributed as dist

    summary = {
        "accelerate_processes": trainer.accelerator.state.num_processes,
        "torch_world_size": dist.get_world_size() if dist.is_initialized() else 1,
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
