"""Trainer checkpoints that are whole or absent: atomic writing, and a completeness check before resuming.

`transformers.Trainer` writes ``checkpoint-N`` in place, file by file. A run killed during a save left a partial
directory with the highest step, which ``resume_from_checkpoint=True`` picked and then failed on with a
``SafetensorError`` / ``FileNotFoundError`` / ``JSONDecodeError`` that did not say the checkpoint was incomplete.

`AtomicCheckpointMixin` (a base of `numadapter.safe_checkpoint.SafeCheckpointMixin`, so of both numadapter trainers):

- writes each checkpoint into a hidden staging directory ``.checkpoint-N.partial-*`` beside it (the Trainer's own
  save methods run unchanged, their output directory redirected) and renames it to ``checkpoint-N`` once every file
  is written; the names the Trainer searches (``checkpoint-<digits>``) never show a partial checkpoint. A checkpoint
  of the same step that already exists is replaced whole. The Trainer's rotation (``save_total_limit``) and best
  checkpoint (``load_best_model_at_end``) are applied to the renamed directory. In multi-process runs (DDP,
  DeepSpeed, FSDP) every process writes into the checkpoint, so the Trainer's in-place writing is kept there;
- before resuming, checks the checkpoint (`checkpoint_problems`): ``resume_from_checkpoint=True`` takes the newest
  *complete* ``checkpoint-N`` and warns about each newer incomplete one it skips; a path to an incomplete checkpoint
  is a `ValueError` that names what is missing or damaged and the last complete checkpoint.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import warnings
from typing import Any

PARTIAL = ".partial-"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
ADAPTER_FILES = ("adapter_model.safetensors", "model.safetensors", "adapter_model.bin", "pytorch_model.bin")


def checkpoint_problems(path: str, *, need_optimizer: bool = True) -> list[str]:
    """What makes the checkpoint at `path` unusable for resuming (empty when it is complete).

    Checked: ``trainer_state.json`` present, the model or adapter weights present, the optimizer state present
    (``optimizer.json`` or a plain Trainer's ``optimizer.pt``, unless `need_optimizer` is False), every JSON file
    parses and every safetensors file is whole.
    """
    from numadapter.export_files import safetensors_problem

    if not os.path.isdir(path):
        return [f"{path} is not a directory"]
    names = set(os.listdir(path))
    problems = []
    if "trainer_state.json" not in names:
        problems.append("trainer_state.json is missing (it is written last: the save did not finish)")
    if not names & set(ADAPTER_FILES):
        problems.append(f"no weights file ({ADAPTER_FILES[0]})")
    if need_optimizer and not names & {"optimizer.json", "optimizer.pt"}:
        problems.append("no optimizer state (optimizer.json)")
    for name in sorted(names):
        full = os.path.join(path, name)
        if name.endswith(".json"):
            try:
                with open(full, encoding="utf-8") as handle:
                    json.load(handle)
            except (ValueError, UnicodeDecodeError) as exc:
                problems.append(f"{name} is not valid JSON ({exc})")
        elif name.endswith(".safetensors"):
            problem = safetensors_problem(full)
            if problem is not None:
                problems.append(f"{name} is damaged: {problem}")
    return problems


def checkpoints(run_dir: str) -> list[str]:
    """The ``checkpoint-N`` directories of `run_dir`, newest (highest N) first."""
    if not os.path.isdir(run_dir):
        return []
    found = [(int(m.group(1)), name) for name in os.listdir(run_dir) if (m := _CHECKPOINT.match(name))]
    return [os.path.join(run_dir, name) for _, name in sorted(found, reverse=True)]


def last_complete_checkpoint(run_dir: str, *, need_optimizer: bool = True) -> tuple[str | None, dict[str, list[str]]]:
    """``(newest complete checkpoint or None, {newer incomplete checkpoint: its problems})``."""
    skipped: dict[str, list[str]] = {}
    for path in checkpoints(run_dir):
        problems = checkpoint_problems(path, need_optimizer=need_optimizer)
        if not problems:
            return path, skipped
        skipped[path] = problems
    return None, skipped


def _replace_directory(staging: str, final: str) -> None:
    """Moves `staging` to `final`, replacing a directory already there (two renames, then the removal)."""
    old = None
    if os.path.isdir(final):
        old = tempfile.mkdtemp(prefix=f".{os.path.basename(final)}.old-", dir=os.path.dirname(final))
        os.rename(final, os.path.join(old, "previous"))
    os.rename(staging, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


class AtomicCheckpointMixin:
    """Atomic checkpoint writing and checked resuming for a `transformers.Trainer` (see the module docstring)."""

    _redirect: tuple[str, str] | None = None

    def _atomic_checkpoints(self) -> bool:
        args = self.args
        return args.world_size == 1 and not (self.is_deepspeed_enabled or self.is_fsdp_enabled)

    def _redirected(self, path: str | None) -> str | None:
        """`path` inside the staging directory while a checkpoint is being written, else `path`."""
        if self._redirect is None or path is None:
            return path
        final, staging = self._redirect
        path = os.fspath(path)
        if path == final or path.startswith(final + os.sep):
            return staging + path[len(final) :]
        return path

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        if not self._atomic_checkpoints():
            return super()._save_checkpoint(model, trial)
        from transformers.trainer import TRAINER_STATE_NAME
        from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

        run_dir = self._get_output_dir(trial=trial)
        final = os.path.join(run_dir, f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
        os.makedirs(run_dir, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=f".{os.path.basename(final)}{PARTIAL}", dir=run_dir)
        state = self.state
        save_state_json = state.save_to_json
        state.save_to_json = lambda path: save_state_json(self._redirected(path))
        self._redirect = (final, staging)
        try:
            super()._save_checkpoint(model, trial)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        finally:
            self._redirect = None
            del state.save_to_json  # the instance attribute: the class's method again
        if self.args.should_save:
            if state.best_global_step == state.global_step:  # the Trainer looked for it before it existed
                state.best_model_checkpoint = final
                state.save_to_json(os.path.join(staging, TRAINER_STATE_NAME))
            _replace_directory(staging, final)
            rotate_checkpoints(
                output_dir=run_dir,
                save_total_limit=self.args.save_total_limit,
                best_model_checkpoint=state.best_model_checkpoint,
                use_mtime=True,
            )
        else:
            shutil.rmtree(staging, ignore_errors=True)

    # the Trainer's writers, redirected into the staging directory while a checkpoint is written
    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        return super().save_model(self._redirected(output_dir), _internal_call)

    def _save_optimizer_and_scheduler(self, output_dir: str) -> None:
        return super()._save_optimizer_and_scheduler(self._redirected(output_dir))

    def _save_scaler(self, output_dir: str) -> None:
        return super()._save_scaler(self._redirected(output_dir))

    def _save_rng_state(self, output_dir: str) -> None:
        return super()._save_rng_state(self._redirected(output_dir))

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        return super()._push_from_checkpoint(self._redirected(checkpoint_folder))

    def train(
        self,
        resume_from_checkpoint: str | bool | None = None,
        trial: Any = None,
        ignore_keys_for_eval: list[str] | None = None,
        **kwargs: Any,
    ):
        """`Trainer.train`, with `resume_from_checkpoint` checked (see the module docstring)."""
        need_optimizer = not (self.args.save_only_model or self.is_deepspeed_enabled or self.is_fsdp_enabled)
        if resume_from_checkpoint is True:
            run_dir = self.args.output_dir
            found, skipped = last_complete_checkpoint(run_dir, need_optimizer=need_optimizer)
            for path, problems in skipped.items():
                warnings.warn(
                    f"skipping the incomplete checkpoint {path} ({'; '.join(problems)}): resuming from "
                    f"{found or 'nothing'}. Delete it once the run has saved a newer one.",
                    stacklevel=2,
                )
            if found is None and skipped:
                raise ValueError(
                    f"no complete checkpoint in {run_dir}: {', '.join(skipped)} are incomplete (a save that did not "
                    "finish). Start without resume_from_checkpoint, or pass a complete checkpoint directory."
                )
            resume_from_checkpoint = found if found is not None else resume_from_checkpoint
        elif isinstance(resume_from_checkpoint, (str, os.PathLike)):
            path = os.fspath(resume_from_checkpoint)
            problems = checkpoint_problems(path, need_optimizer=need_optimizer)
            if problems:
                run_dir = os.path.dirname(os.path.abspath(path))
                found, _ = last_complete_checkpoint(run_dir, need_optimizer=need_optimizer)
                raise ValueError(
                    f"the checkpoint {path} is incomplete (a save that did not finish): {'; '.join(problems)}. Resume "
                    f"from the last complete checkpoint ({found or 'none in that directory'}) or pass "
                    "resume_from_checkpoint=True, which picks it."
                )
        kwargs["ignore_keys_for_eval"] = ignore_keys_for_eval
        return super().train(resume_from_checkpoint=resume_from_checkpoint, trial=trial, **kwargs)
