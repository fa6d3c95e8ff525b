"""Trainer checkpoints that are whole or absent: atomic writing, and a completeness check before resuming.

`transformers.Trainer` writes ``checkpoint-N`` in place, file by file. A run killed during a save left a partial
directory with the highest step, which ``resume_from_checkpoint=True`` picked and then failed on with a
``SafetensorError`` / ``FileNotFoundError`` / ``JSONDecodeError`` that did not say the checkpoint was incomplete.

`AtomicCheckpointMixin` (a base of `numadapter.training.safe_checkpoint.SafeCheckpointMixin`, so of both numadapter
trainers):

- writes each checkpoint into a hidden staging directory ``.checkpoint-N.partial-*`` beside it (the Trainer's own
  save methods run unchanged, their output directory redirected), lists every file it holds with its size in
  ``numadapter_checkpoint.json`` and renames it to ``checkpoint-N``; the names the Trainer searches
  (``checkpoint-<digits>``) never show a partial checkpoint. A checkpoint of the same step that already exists is
  replaced whole. The Trainer's rotation (``save_total_limit``) and best checkpoint (``load_best_model_at_end``) are
  applied to the renamed directory.
- in multi-process runs (DDP, DeepSpeed ZeRO, one or several processes) process 0 creates the staging directory and
  sends its name to the others, every process writes its part into it (its RNG state; under DeepSpeed its
  ``global_step*/`` optimizer partition), and after a barrier the main process writes the file list and renames it;
  a second barrier keeps every process until the checkpoint is in place. A process killed during the save leaves
  only the hidden staging directory. With ``save_on_each_node`` (a storage per node) each node's main process
  creates and renames its own copy. FSDP keeps the Trainer's in-place writing (not tested here);
- before resuming, checks the checkpoint (`checkpoint_problems`) on every process and combines what they found, so
  that every process takes the same decision: ``resume_from_checkpoint=True`` takes the newest checkpoint that is
  complete for every process and warns about each newer incomplete one it skips; a path to an incomplete
  checkpoint is a `ValueError` that names what is missing or damaged and the last complete checkpoint;
- after each checkpoint is in place, deletes the staging directories that killed saves left behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import warnings
import zipfile
from collections.abc import Callable
from typing import Any

from numadapter.export_files import file_listing, replace_directory, safetensors_problem

PARTIAL = ".partial-"
MANIFEST = "numadapter_checkpoint.json"
MANIFEST_FORMAT = "numadapter-checkpoint/1"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
_STAGING = re.compile(r"^\.checkpoint-\d+" + re.escape(PARTIAL))
ADAPTER_FILES = ("adapter_model.safetensors", "model.safetensors", "adapter_model.bin", "pytorch_model.bin")


def remove_stale_staging(run_dir: str) -> list[str]:
    """Deletes the staging directories (``.checkpoint-N.partial-*``) left in `run_dir` by saves that were killed.

    Called by the main process right after a checkpoint was renamed into place: every process has passed the barrier
    after writing, so no staging directory of this run is still being written. Other hidden entries are kept.

    Returns:
        The names removed.
    """
    removed = []
    for name in sorted(os.listdir(run_dir)):
        if _STAGING.match(name) and os.path.isdir(os.path.join(run_dir, name)):
            shutil.rmtree(os.path.join(run_dir, name), ignore_errors=True)
            removed.append(name)
    return removed


def write_manifest(directory: str, world_size: int) -> None:
    """Lists every file under `directory` with its byte size in ``numadapter_checkpoint.json`` (written last)."""
    files = file_listing(directory, every_size=True)
    files.pop(MANIFEST, None)
    with open(os.path.join(directory, MANIFEST), "w", encoding="utf-8") as handle:
        json.dump({"format": MANIFEST_FORMAT, "world_size": world_size, "files": files}, handle, indent=1)


def _manifest_problems(path: str) -> list[str]:
    """Files of the manifest that are missing or have another size now (nothing when there is no valid manifest)."""
    try:
        with open(os.path.join(path, MANIFEST), encoding="utf-8") as handle:
            manifest = json.load(handle)
    except (OSError, ValueError, UnicodeDecodeError):
        return []  # no manifest (a plain Trainer's checkpoint), or a damaged one: reported as invalid JSON
    problems = []
    for name, size in (manifest.get("files") or {}).items():
        full = os.path.join(path, *name.split("/"))
        if not os.path.isfile(full):
            problems.append(f"{name} is missing (listed in {MANIFEST})")
        elif size is not None and os.path.getsize(full) != size:
            problems.append(f"{name} is {os.path.getsize(full)} bytes long, the save wrote {size}")
    return problems


def _torch_archive_problem(path: str) -> str | None:
    """Why `path` (a ``torch.save`` file) is not whole: empty, or a zip archive without its central directory."""
    with open(path, "rb") as handle:
        head = handle.read(4)
    if not head:
        return "it is empty"
    if head == b"PK\x03\x04" and not zipfile.is_zipfile(path):  # torch.save's zip format, cut short
        return "it is a truncated torch.save archive"
    return None


def deepspeed_problems(path: str, *, required: bool, rank: int | None = None) -> list[str]:
    """DeepSpeed's part of a checkpoint: ``latest`` names a ``global_step*/`` directory holding model states, this
    process's optimizer partition (ZeRO, when `rank` is given) and whole ``torch.save`` archives.

    Args:
        required: whether the checkpoint must hold DeepSpeed state (a DeepSpeed run resuming with its optimizer).
        rank: this process's rank in a multi-process run, or None.
    """
    latest = os.path.join(path, "latest")
    tags = sorted(n for n in os.listdir(path) if n.startswith("global_step") and os.path.isdir(os.path.join(path, n)))
    if not os.path.isfile(latest):
        if required or tags:
            return ["DeepSpeed's `latest` file is missing (DeepSpeed writes it after every process's state)"]
        return []
    with open(latest, encoding="utf-8") as handle:
        tag = handle.read().strip()
    if tag not in tags:
        return [f"DeepSpeed's `latest` names {tag}/, which is missing"]
    names = os.listdir(os.path.join(path, tag))
    problems = []
    if not any(name.endswith("model_states.pt") for name in names):
        problems.append(f"{tag}/ holds no model states (*model_states.pt)")
    partitions = [name for name in names if name.endswith("optim_states.pt")]
    if rank is not None and partitions and not any(f"zero_pp_rank_{rank}_" in name for name in partitions):
        problems.append(f"{tag}/ holds no optimizer partition of process {rank} (zero_pp_rank_{rank}_*optim_states)")
    for name in sorted(names):
        if name.endswith(".pt"):
            problem = _torch_archive_problem(os.path.join(path, tag, name))
            if problem is not None:
                problems.append(f"{tag}/{name} is damaged: {problem}")
    return problems


def checkpoint_problems(
    path: str, *, need_optimizer: bool = True, deepspeed: bool = False, rank: int | None = None
) -> list[str]:
    """What makes the checkpoint at `path` unusable for resuming (empty when it is complete).

    Checked: ``trainer_state.json`` present, the model or adapter weights present, the optimizer state present
    (``optimizer.json`` or a plain Trainer's ``optimizer.pt``, unless `need_optimizer` is False), every JSON file
    parses, every safetensors file is whole, every file listed in ``numadapter_checkpoint.json`` is there with its
    size, and DeepSpeed's part (`deepspeed_problems`; required when `deepspeed`, with this process's optimizer
    partition when `rank` is given).
    """
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
    problems += _manifest_problems(path)
    problems += deepspeed_problems(path, required=deepspeed, rank=rank)
    return list(dict.fromkeys(problems))


def checkpoints(run_dir: str) -> list[str]:
    """The ``checkpoint-N`` directories of `run_dir`, newest (highest N) first."""
    if not os.path.isdir(run_dir):
        return []
    return sorted_checkpoints(run_dir, os.listdir(run_dir))


def sorted_checkpoints(run_dir: str, names: list[str]) -> list[str]:
    """The ``checkpoint-N`` names among `names`, as paths in `run_dir`, newest (highest N) first."""
    found = {(int(m.group(1)), name) for name in names if (m := _CHECKPOINT.match(name))}
    return [os.path.join(run_dir, name) for _, name in sorted(found, reverse=True)]


def last_complete_checkpoint(
    paths: list[str], problems_of: Callable[[str], list[str]]
) -> tuple[str | None, dict[str, list[str]]]:
    """``(first complete checkpoint of `paths` or None, {earlier incomplete checkpoint: its problems})``."""
    skipped: dict[str, list[str]] = {}
    for path in paths:
        problems = problems_of(path)
        if not problems:
            return path, skipped
        skipped[path] = problems
    return None, skipped


class AtomicCheckpointMixin:
    """Atomic checkpoint writing and checked resuming for a `transformers.Trainer` (see the module docstring)."""

    _redirect: tuple[str, str] | None = None

    # -- the processes ------------------------------------------------------------------------------------------
    def _distributed(self) -> bool:
        """Whether several processes take part (a torch.distributed process group of more than one)."""
        import torch.distributed as dist

        return self.args.world_size > 1 and dist.is_available() and dist.is_initialized()

    def _everyone(self, value: Any) -> list[Any]:
        """`value` of every process, by rank (``[value]`` in one process)."""
        if not self._distributed():
            return [value]
        import torch.distributed as dist

        values: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(values, value)
        return values

    def _atomic_checkpoints(self) -> bool:
        from transformers.utils import is_sagemaker_mp_enabled, is_torch_xla_available

        if self.is_fsdp_enabled or is_torch_xla_available() or is_sagemaker_mp_enabled():
            return False
        return self.args.world_size == 1 or self._distributed()

    # -- writing ------------------------------------------------------------------------------------------------
    def _redirected(self, path: str | None) -> str | None:
        """`path` inside the staging directory while a checkpoint is being written, else `path`."""
        if self._redirect is None or path is None:
            return path
        final, staging = self._redirect
        path = os.fspath(path)
        if path == final or path.startswith(final + os.sep):
            return staging + path[len(final) :]
        return path

    def _staging_directory(self, run_dir: str, final: str) -> str:
        """A new, empty staging directory for `final` in `run_dir`, the same on every process."""
        name: list[str | None] = [None]
        if self.args.process_index == 0:
            os.makedirs(run_dir, exist_ok=True)
            prefix = f".{os.path.basename(final)}{PARTIAL}"
            name[0] = os.path.basename(tempfile.mkdtemp(prefix=prefix, dir=run_dir))
        if self._distributed():
            import torch.distributed as dist

            dist.broadcast_object_list(name, src=0)
        staging = os.path.join(run_dir, name[0])
        if self.args.should_save:  # also each node's main process with save_on_each_node (a storage per node)
            os.makedirs(staging, exist_ok=True)
        self.accelerator.wait_for_everyone()  # it exists before anyone writes into it
        return staging

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        if not self._atomic_checkpoints():
            return super()._save_checkpoint(model, trial)
        from transformers.trainer import TRAINER_STATE_NAME
        from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

        run_dir = self._get_output_dir(trial=trial)
        final = os.path.join(run_dir, f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
        staging = self._staging_directory(run_dir, final)
        state = self.state
        save_state_json = state.save_to_json
        state.save_to_json = lambda path: save_state_json(self._redirected(path))
        self._redirect = (final, staging)
        try:
            super()._save_checkpoint(model, trial)
        except BaseException:
            if not self._distributed():  # (other processes may still be writing into it)
                shutil.rmtree(staging, ignore_errors=True)
            raise
        finally:
            self._redirect = None
            del state.save_to_json  # the instance attribute: the class's method again
        self.accelerator.wait_for_everyone()  # every process has written its part
        if state.best_global_step == state.global_step:  # the Trainer looked for it before it existed
            state.best_model_checkpoint = final
        if self.args.should_save:
            if state.best_global_step == state.global_step:
                state.save_to_json(os.path.join(staging, TRAINER_STATE_NAME))
            write_manifest(staging, self.args.world_size)
            replace_directory(staging, final)
            remove_stale_staging(run_dir)  # those of saves killed earlier (a torn checkpoint is never resumed from)
            rotate_checkpoints(
                output_dir=run_dir,
                save_total_limit=self.args.save_total_limit,
                best_model_checkpoint=state.best_model_checkpoint,
                use_mtime=True,
            )
        elif not self._distributed():
            shutil.rmtree(staging, ignore_errors=True)
        self.accelerator.wait_for_everyone()  # no process goes on before the checkpoint is in place

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

    # -- resuming -----------------------------------------------------------------------------------------------
    def _agreed_problems(self, path: str) -> list[str]:
        """`checkpoint_problems` of `path` on every process, combined (the same list on every process)."""
        multi = self.args.world_size > 1
        problems = checkpoint_problems(
            path,
            need_optimizer=not (self.args.save_only_model or self.is_deepspeed_enabled or self.is_fsdp_enabled),
            deepspeed=self.is_deepspeed_enabled and not self.args.save_only_model,
            rank=self.args.process_index if multi else None,
        )
        everyone = self._everyone(problems)
        combined = []  # a problem that only some processes see is named with the process
        for rank, found in enumerate(everyone):
            shared = [all(problem in other for other in everyone) for problem in found]
            combined += [p if common else f"{p} (process {rank})" for p, common in zip(found, shared)]
        return list(dict.fromkeys(combined))

    def _agreed_last_complete(self, run_dir: str) -> tuple[str | None, dict[str, list[str]]]:
        """The newest checkpoint of `run_dir` complete on every process, and the newer incomplete ones."""
        listed = self._everyone(sorted(os.listdir(run_dir)) if os.path.isdir(run_dir) else [])
        paths = sorted_checkpoints(run_dir, sorted({name for names in listed for name in names}))
        return last_complete_checkpoint(paths, self._agreed_problems)

    def train(
        self,
        resume_from_checkpoint: str | bool | None = None,
        trial: Any = None,
        ignore_keys_for_eval: list[str] | None = None,
        **kwargs: Any,
    ):
        """`Trainer.train`, with `resume_from_checkpoint` checked (see the module docstring)."""
        if resume_from_checkpoint is True:
            run_dir = self.args.output_dir
            found, skipped = self._agreed_last_complete(run_dir)
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
            problems = self._agreed_problems(path)
            if problems:
                found, _ = self._agreed_last_complete(os.path.dirname(os.path.abspath(path)))
                raise ValueError(
                    f"the checkpoint {path} is incomplete (a save that did not finish): {'; '.join(problems)}. Resume "
                    f"from the last complete checkpoint ({found or 'none in that directory'}) or pass "
                    "resume_from_checkpoint=True, which picks it."
                )
        kwargs["ignore_keys_for_eval"] = ignore_keys_for_eval
        return super().train(resume_from_checkpoint=resume_from_checkpoint, trial=trial, **kwargs)
