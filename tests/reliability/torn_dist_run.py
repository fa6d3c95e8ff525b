"""A tiny 2-process NumberSFTTrainer run with checkpoints (DDP or DeepSpeed ZeRO over gloo), killed during a save or
resumed. Run by ``tests/reliability/test_torn_dist_checkpoints.py``::

    python -m torch.distributed.run --nproc_per_node 2 torn_dist_run.py --base DIR --out OUT \
        [--deepspeed FILE [--ds-set JSON]] (--kill POINT | --resume)

``--base DIR`` holds ``tok/`` and ``model/`` (from `tests/helpers/tiny.py`). The run trains `MAX_STEPS` steps with a
global batch of 4 and a checkpoint every `SAVE_STEPS` steps into ``OUT/run``. With ``--kill POINT`` one process kills
itself with SIGKILL while checkpoint-`KILL_STEP` is being written (torchrun then stops the other one), at POINT:

- ``rng``: process 1, when it starts writing its RNG state (process 0 has written the adapter and the optimizer);
- ``deepspeed``: process 1, when DeepSpeed starts writing its optimizer partition (``zero_pp_rank_1_*``);
- ``rename``: process 0, when the finished checkpoint is about to be moved into place.

Before dying it writes ``OUT/killed-rank<r>.txt``. With ``--resume`` the run continues from
``resume_from_checkpoint=True``. Each process writes ``OUT/<tag>-rank<r>.json`` (tag ``killed`` or ``resumed``): the
step it started from, the logged losses by step and the warnings train() gave; process 0 writes
``OUT/<tag>-params.safetensors``, every trainable tensor (gathered whole under ZeRO-3) at the end of step
`KILL_STEP`, before that step's checkpoint is written.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import warnings

MAX_STEPS, SAVE_STEPS, KILL_STEP = 4, 2, 4
KILL_POINTS = ("rng", "deepspeed", "rename")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="directory with tok/ and model/")
    parser.add_argument("--out", required=True, help="output directory (the run's checkpoints go to OUT/run)")
    parser.add_argument("--deepspeed", default=None, help="DeepSpeed JSON file (none: DDP)")
    parser.add_argument("--ds-set", default="{}", help="JSON merged into zero_optimization")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--kill", choices=KILL_POINTS, help="where one process kills itself during checkpoint-4")
    mode.add_argument("--resume", action="store_true", help="resume_from_checkpoint=True")
    return parser


def _die(out: str, rank: int, point: str) -> None:
    with open(os.path.join(out, f"killed-rank{rank}.txt"), "w", encoding="utf-8") as file:
        file.write(point)
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _arm(point: str, out: str, rank: int, run) -> None:
    """Makes this process kill itself at `point` of writing checkpoint-`KILL_STEP` (see the module docstring)."""

    def now() -> bool:
        return run.state.global_step == KILL_STEP

    if point == "rng" and rank == 1:
        import numadapter.training.safe_checkpoint as safe

        save_state = safe.save_state

        def dying_save_state(state, directory, name):
            if name.startswith("rng_state") and now():
                # the point is "process 0 has written its RNG state": wait for it, or the launcher's teardown after
                # this kill can stop process 0 first (seen once in a full suite run)
                deadline = time.monotonic() + 60
                while not os.path.isfile(os.path.join(directory, "rng_state_0.json")) and time.monotonic() < deadline:
                    time.sleep(0.05)
                _die(out, rank, point)
            return save_state(state, directory, name)

        safe.save_state = dying_save_state
    elif point == "deepspeed" and rank == 1:
        from deepspeed.runtime.checkpoint_engine.torch_checkpoint_engine import TorchCheckpointEngine

        save = TorchCheckpointEngine.save

        def dying_save(self, state_dict, path):
            if "zero_pp_rank_1" in os.path.basename(path) and "optim_states" in path and now():
                _die(out, rank, point)
            return save(self, state_dict, path)

        TorchCheckpointEngine.save = dying_save
    elif point == "rename" and rank == 0:
        rename = os.rename

        def dying_rename(source, target):
            if os.path.basename(os.fspath(target)) == f"checkpoint-{KILL_STEP}" and now():
                _die(out, rank, point)
            return rename(source, target)

        os.rename = dying_rename


def main(argv: list[str] | None = None) -> None:
    args = make_parser().parse_args(argv)
    import torch

    torch.set_num_threads(1)
    from numadapter.integrations.launch import gathered_parameters, load_deepspeed_config, prepare_distributed_state

    ds_config = None
    if args.deepspeed:
        ds_config = load_deepspeed_config(args.deepspeed)
        ds_config.setdefault("zero_optimization", {}).update(json.loads(args.ds_set))
    overrides = prepare_distributed_state(ds_config)  # before the training arguments

    import datasets
    from safetensors.torch import save_file
    from train_tiny import dataset_rows
    from transformers import AutoTokenizer, LlamaForCausalLM, TrainerCallback
    from trl import SFTConfig

    from numadapter import NumberAdapterConfig, NumberSFTTrainer, NumberTokenizer, get_peft_model

    datasets.disable_progress_bars()
    torch.manual_seed(0)  # the same initial adapter on every process
    tokenizer = AutoTokenizer.from_pretrained(os.path.join(args.base, "tok"))
    base = LlamaForCausalLM.from_pretrained(os.path.join(args.base, "model"), dtype=torch.float32)
    config = NumberAdapterConfig(int_digits=4, frac_digits=2, r=4, lora_alpha=8, lora_dropout=0.0,
                                 target_modules=["q_proj", "v_proj"])  # fmt: skip
    model = get_peft_model(base, config, tokenizer=tokenizer)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    sft = SFTConfig(output_dir=os.path.join(args.out, "run"), max_steps=MAX_STEPS, save_steps=SAVE_STEPS,
                    save_strategy="steps", per_device_train_batch_size=4 // world, logging_steps=1, report_to=[],
                    disable_tqdm=True, seed=0, data_seed=0, learning_rate=1e-2, lr_scheduler_type="linear",
                    max_grad_norm=1.0, bf16=False, fp16=False, dataloader_num_workers=0, **overrides)  # fmt: skip
    rank, tag = sft.process_index, "resumed" if args.resume else "killed"

    class Record(TrainerCallback):
        """Writes this process's summary at every log (a killed run keeps what it logged) and at the end."""

        start: int | None = None
        caught: list = []

        def dump(self, state) -> None:
            summary = {
                "start": self.start,
                "losses": {h["step"]: h["loss"] for h in state.log_history if "loss" in h},
                "warnings": [str(w.message) for w in self.caught if "checkpoint" in str(w.message)],
                "world_size": sft.world_size,
            }
            with open(os.path.join(args.out, f"{tag}-rank{rank}.json"), "w", encoding="utf-8") as file:
                json.dump(summary, file)

        def on_train_begin(self, _args, state, control, **kwargs):
            self.start = state.global_step  # loaded from the checkpoint's trainer_state.json when resuming

        def on_log(self, _args, state, control, **kwargs):
            self.dump(state)

        def on_step_end(self, _args, state, control, model=None, **kwargs):
            if state.global_step != KILL_STEP:
                return
            named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
            with gathered_parameters([p for _, p in named]):  # every process: a collective under ZeRO-3
                params = {n: p.detach().clone().float().contiguous() for n, p in named}
            if rank == 0:
                save_file(params, os.path.join(args.out, f"{tag}-params.safetensors"))

    record = Record()
    trainer = NumberSFTTrainer(model=model, args=sft, train_dataset=datasets.Dataset.from_list(dataset_rows(16)),
                               processing_class=NumberTokenizer(tokenizer, config), callbacks=[record])  # fmt: skip
    os.makedirs(args.out, exist_ok=True)
    if args.kill:
        _arm(args.kill, args.out, rank, trainer)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        record.caught = caught
        trainer.train(resume_from_checkpoint=True if args.resume else None)
    record.dump(trainer.state)


if __name__ == "__main__":
    from numadapter.app.cli import close_process_group

    try:
        main()
    finally:
        close_process_group()
