"""Trainer checkpoints without pickles: optimizer, scheduler, scaler and RNG state as safetensors + JSON.

docs/DESIGN.md, "Safe to load". A `transformers.Trainer` checkpoint holds, next to the adapter weights
(``adapter_model.safetensors``, written by ``PeftModel.save_pretrained``), five pickles: ``training_args.bin``
(``torch.save`` of the whole `TrainingArguments` object), ``optimizer.pt``, ``scheduler.pt``, ``scaler.pt`` and
``rng_state[_<rank>].pth``. `SafeCheckpointMixin` (used by both numadapter trainers) writes these instead:

- ``training_args.json``: ``TrainingArguments.to_json_string()`` (nothing reads the arguments back on resume);
- ``<name>.json`` + ``<name>.safetensors`` for ``optimizer``, ``scheduler``, ``scaler``, ``rng_state[_<rank>]``:
  the state dict's structure in JSON and its tensors in safetensors (`save_state` / `load_state`), loaded back on
  resume by ``json.load`` and ``safetensors.torch.load_file`` only. A checkpoint written by a plain Trainer
  (``optimizer.pt``, ...) still resumes: those files are read by transformers' own code, with
  ``torch.load(weights_only=True)``.

Checkpoints are written atomically and checked before resuming (`numadapter.training.checkpoint_integrity`).

Exceptions, where the state belongs to another library's format and transformers' own save/load runs unchanged:
DeepSpeed (``model_wrapped.save_checkpoint``: DeepSpeed's ``global_step*/`` files, and ``scheduler.pt`` for a
non-DeepSpeed scheduler), FSDP (torch.distributed.checkpoint), SageMaker model parallel, and TPU / NPU / HPU / MLU /
MUSA RNG state; ``push_to_hub`` from checkpoints and Ray Tune checkpoints also save ``training_args.bin``.

The JSON encoding (`encode`) is lossless for what optimizer/scheduler/scaler/RNG state dicts hold: None, bool, int,
float (non-finite ones too), str, lists, tuples, dicts with str or int keys, tensors (any safetensors dtype, stored
by reference into the safetensors file) and numpy arrays (small ones, such as numpy's RNG key, stored inline).
Anything else raises a `TypeError` naming where it was found.
"""

from __future__ import annotations

import json
import math
import os
import random
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from transformers.trainer import TRAINING_ARGS_NAME
from transformers.training_args import ParallelMode

from numadapter.training.checkpoint_integrity import AtomicCheckpointMixin

FORMAT = "numadapter-state/1"
TRAINING_ARGS_JSON = "training_args.json"


# -- the codec --------------------------------------------------------------------------------------------------------
def encode(value: Any, tensors: dict[str, torch.Tensor], path: str = "state") -> Any:
    """`value` as JSON-ready data; its tensors are added to `tensors` (``t0``, ``t1``, ...) and referenced by name.

    Raises:
        TypeError: a value of a type the encoding does not cover (the message names its `path`).
    """
    if isinstance(value, (np.ndarray, np.generic)):  # before float: np.float64 is a float subclass
        array = np.asarray(value)
        if array.dtype.kind not in "biuf":
            raise TypeError(
                f"{path} is a numpy array of dtype {array.dtype}: only bool, int and float arrays are saved."
            )
        flat = [encode(item, tensors, path) for item in array.ravel().tolist()]  # Python numbers; inf / nan marked
        return {"__ndarray__": flat, "dtype": array.dtype.str, "shape": list(array.shape)}
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if isinstance(value, torch.Tensor):
        name = f"t{len(tensors)}"
        tensor = value.detach().to("cpu")
        if not tensor.is_contiguous() or tensor.untyped_storage().nbytes() != tensor.numel() * tensor.element_size():
            tensor = tensor.clone(memory_format=torch.contiguous_format)  # a view: safetensors stores whole storages
        tensors[name] = tensor
        return {"__tensor__": name}
    if isinstance(value, tuple):
        return {"__tuple__": [encode(item, tensors, f"{path}[{i}]") for i, item in enumerate(value)]}
    if isinstance(value, list):
        return [encode(item, tensors, f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        if all(isinstance(key, str) and not key.startswith("__") for key in value):
            return {key: encode(item, tensors, f"{path}[{key!r}]") for key, item in value.items()}
        pairs = []
        for key, item in value.items():
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise TypeError(
                    f"{path} has a key {key!r} of type {type(key).__name__}: only str and int keys are saved."
                )
            pairs.append([key, encode(item, tensors, f"{path}[{key!r}]")])
        return {"__dict__": pairs}
    raise TypeError(
        f"{path} is of type {type(value).__name__}, which numadapter's checkpoint state (safetensors + JSON) cannot "
        "hold: use an optimizer / scheduler whose state dict holds tensors, numbers, strings, lists and dicts, or set "
        "save_only_model=True in the training arguments (the checkpoint then holds the adapter only)."
    )


def decode(data: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """The inverse of `encode`."""
    if isinstance(data, list):
        return [decode(item, tensors) for item in data]
    if not isinstance(data, dict):
        return data
    if "__tensor__" in data:
        return tensors[data["__tensor__"]]
    if "__float__" in data:
        return float(data["__float__"])
    if "__tuple__" in data:
        return tuple(decode(item, tensors) for item in data["__tuple__"])
    if "__ndarray__" in data:
        flat = [decode(item, tensors) for item in data["__ndarray__"]]
        array = np.array(flat, dtype=np.dtype(data["dtype"])).reshape(data["shape"])
        return array[()] if array.ndim == 0 else array
    if "__dict__" in data:
        return {key: decode(item, tensors) for key, item in data["__dict__"]}
    return {key: decode(item, tensors) for key, item in data.items()}


def state_paths(directory: str, name: str) -> tuple[str, str]:
    """``(<name>.json, <name>.safetensors)`` in `directory`."""
    return os.path.join(directory, f"{name}.json"), os.path.join(directory, f"{name}.safetensors")


def has_state(directory: str, name: str) -> bool:
    return os.path.isfile(state_paths(directory, name)[0])


def save_state(state: Any, directory: str, name: str) -> None:
    """Writes `state` as ``<name>.json`` (structure) + ``<name>.safetensors`` (tensors, when it holds any)."""
    tensors: dict[str, torch.Tensor] = {}
    tree = encode(state, tensors, name)
    json_path, tensor_path = state_paths(directory, name)
    os.makedirs(directory, exist_ok=True)
    if tensors:
        seen: set[int] = set()
        for key, tensor in tensors.items():  # safetensors refuses tensors that share memory: store copies
            pointer = tensor.untyped_storage().data_ptr()
            if pointer in seen and tensor.numel() > 0:
                tensors[key] = tensor.clone()
            seen.add(pointer)
        save_file(tensors, tensor_path, metadata={"format": FORMAT})
    with open(json_path, "w", encoding="utf-8") as file:
        json.dump({"format": FORMAT, "tensors": bool(tensors), "state": tree}, file, allow_nan=False)


def load_state(directory: str, name: str) -> Any:
    """Reads what `save_state` wrote (tensors on the CPU)."""
    json_path, tensor_path = state_paths(directory, name)
    with open(json_path, encoding="utf-8") as file:
        data = json.load(file)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{json_path} is not a numadapter checkpoint state file (expected format {FORMAT!r}).")
    tensors = load_file(tensor_path, device="cpu") if data["tensors"] else {}
    return decode(data["state"], tensors)


# -- the trainer side ----------------------------------------------------------------------------------------------
def _other_rng_devices() -> bool:
    """Whether an accelerator whose RNG state transformers saves (besides CUDA) is present."""
    from transformers.utils import (
        is_torch_hpu_available,
        is_torch_mlu_available,
        is_torch_musa_available,
        is_torch_npu_available,
        is_torch_xla_available,
    )

    checks = (is_torch_xla_available, is_torch_npu_available, is_torch_hpu_available, is_torch_mlu_available)
    return any(check() for check in (*checks, is_torch_musa_available))


class _SafeStateMixin:
    """Overrides `transformers.Trainer`'s checkpoint writers and readers (see the module docstring).

    The overridden methods are the Trainer's own (transformers 5.x): ``_save``, ``_save_optimizer_and_scheduler``,
    ``_save_scaler``, ``_save_rng_state`` and their ``_load_*`` counterparts; each falls back to the Trainer's method
    where another format owns the state.
    """

    def _own_optimizer_format(self) -> bool:
        from transformers.utils import is_sagemaker_mp_enabled, is_torch_xla_available

        return not (
            self.is_deepspeed_enabled or self.is_fsdp_enabled or is_torch_xla_available() or is_sagemaker_mp_enabled()
        )

    def _rng_name(self) -> str:
        return "rng_state" if self.args.world_size <= 1 else f"rng_state_{self.args.process_index}"

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        super()._save(output_dir, state_dict)
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        if self.args.should_save:
            pickled = os.path.join(output_dir, TRAINING_ARGS_NAME)
            if os.path.isfile(pickled):
                os.remove(pickled)  # torch.save(self.args): a pickle of the whole object
            with open(os.path.join(output_dir, TRAINING_ARGS_JSON), "w", encoding="utf-8") as file:
                file.write(self.args.to_json_string())

    def _save_optimizer_and_scheduler(self, output_dir: str) -> None:
        if not self._own_optimizer_format():
            return super()._save_optimizer_and_scheduler(output_dir)
        if self.args.should_save:
            save_state(self.optimizer.state_dict(), output_dir, "optimizer")
            save_state(self.lr_scheduler.state_dict(), output_dir, "scheduler")

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        if checkpoint is None or not self._own_optimizer_format() or not has_state(checkpoint, "optimizer"):
            return super()._load_optimizer_and_scheduler(checkpoint)  # also a plain Trainer's optimizer.pt
        if not has_state(checkpoint, "scheduler"):
            raise FileNotFoundError(
                f"{checkpoint} holds optimizer.json but no scheduler.json: the checkpoint is partial."
            )
        self.optimizer.load_state_dict(load_state(checkpoint, "optimizer"))
        self.lr_scheduler.load_state_dict(load_state(checkpoint, "scheduler"))

    def _save_scaler(self, output_dir: str) -> None:
        from transformers.utils import is_torch_xla_available

        scaler = getattr(self.accelerator, "scaler", None)
        if scaler is None or is_torch_xla_available():
            return super()._save_scaler(output_dir)
        if self.args.should_save:
            save_state(scaler.state_dict(), output_dir, "scaler")

    def _load_scaler(self, checkpoint: str | None) -> None:
        if checkpoint is None or not has_state(checkpoint, "scaler"):
            return super()._load_scaler(checkpoint)
        self.accelerator.scaler.load_state_dict(load_state(checkpoint, "scaler"))

    def _save_rng_state(self, output_dir: str) -> None:
        if _other_rng_devices():
            return super()._save_rng_state(output_dir)
        states = {"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.random.get_rng_state()}
        if torch.cuda.is_available():
            distributed = self.args.parallel_mode == ParallelMode.DISTRIBUTED
            states["cuda"] = (
                torch.cuda.random.get_rng_state_all() if distributed else torch.cuda.random.get_rng_state()
            )
        save_state(states, output_dir, self._rng_name())

    def _load_rng_state(self, checkpoint: str | None) -> None:
        if checkpoint is None or not has_state(checkpoint, self._rng_name()):
            return super()._load_rng_state(checkpoint)
        from transformers.trainer_pt_utils import set_rng_state_for_device

        states = load_state(checkpoint, self._rng_name())
        random.setstate(states["python"])
        np.random.set_state(states["numpy"])
        torch.random.set_rng_state(states["cpu"])
        if torch.cuda.is_available() and "cuda" in states:
            distributed = self.args.parallel_mode == ParallelMode.DISTRIBUTED
            set_rng_state_for_device("CUDA", torch.cuda, states, distributed)


class SafeCheckpointMixin(AtomicCheckpointMixin, _SafeStateMixin):
    """Checkpoints in safetensors + JSON (`_SafeStateMixin`), written atomically and checked before resuming
    (`numadapter.training.checkpoint_integrity.AtomicCheckpointMixin`, first in the MRO so that it redirects every
    writer).

    Mix in before the Trainer class.
    """
