"""Multi-process launch state: the same recipe trains with DDP, DeepSpeed ZeRO-2 or ZeRO-3 on GPUs and on CPU.

Call `prepare_distributed_state` once per process, *before* building the `TrainingArguments` / `SFTConfig`, and pass
what it returns into them::

    overrides = prepare_distributed_state(deepspeed_config)   # path, dict, or None (DDP / one process)
    args = SFTConfig(output_dir="out", per_device_train_batch_size=8, **overrides)

What it fixes. transformers 5 / accelerate 1.x pick the distributed backend from the device: with CUDA (or another
accelerator) a process started by ``torchrun`` / ``accelerate launch`` gets NCCL and everything works as documented.
Without one, a process started with ``LOCAL_RANK`` set

- under DDP, accelerate's state says "not distributed" unless the arguments say ``use_cpu=True`` (accelerate only
  enables its MULTI_CPU mode for CPU runs), so the model is not wrapped in DDP and the data is not sharded: every
  process trains its own copy. This function returns ``use_cpu=True, ddp_backend="gloo"``;
- under DeepSpeed is half-distributed: DeepSpeed initialises its process group (2 ranks) while accelerate's state
  keeps ``num_processes == 1``, so the data is *not* sharded (every rank trains on the same batches), the
  token-count loss scaling is off by the world size, and ``"auto"`` batch sizes fail DeepSpeed's consistency check.
  This function sets ``ACCELERATE_USE_DEEPSPEED=true``, creates accelerate's ``PartialState(backend="gloo")`` (which
  initialises DeepSpeed's communication over gloo and sees every rank) and returns
  ``accelerator_config={"use_configured_state": True}`` so the Trainer reuses that state.

On a machine with an accelerator it only validates the DeepSpeed config and returns ``{"deepspeed": config}``.

Launching: ``torchrun --nproc_per_node N script.py [--deepspeed FILE]`` and ``accelerate launch --config_file
recipes/accelerate/{ddp,zero2,zero3}.yaml script.py`` work on CPU and GPU alike (with accelerate the DeepSpeed file
comes from the YAML; it is read here from ``ACCELERATE_DEEPSPEED_CONFIG_FILE``). Never add ``--cpu`` to ``accelerate
launch``: it selects accelerate's one-process launcher and silently ignores ``--num_processes``. ``python script.py``
with a DeepSpeed config runs a one-process DeepSpeed job (`set_single_process_env`).

ZeRO-3 (docs/DESIGN.md, "ZeRO-3 safe"): parameters are partitioned outside their module's forward; with
`partition_at_load` (the default for ZeRO-3, accelerate's ``zero3_init_flag``) already while ``from_pretrained`` loads
the base, so no process ever holds the whole model (build the training arguments before loading; see
`partition_at_load`). Number code reads shapes and ties from DeepSpeed's ``ds_shape`` / ``ds_id`` and weights only
inside a forward (DeepSpeed gathers them, also across modules while the engine runs) or under `gathered_parameters`
(`numadapter.integrations.deepspeed_zero`); saving must run on every rank (``Trainer.save_model`` does), and the
DeepSpeed config must set ``zero_optimization.stage3_gather_16bit_weights_on_model_save = true``, otherwise the Trainer
saves the adapter from an empty state dict (only its DeepSpeed checkpoint holds the weights); `check_deepspeed_config`
refuses that. Merging LoRA into the base (``merge_and_unload``) is not supported by PEFT under ZeRO-3: export from the
saved adapter checkpoint in a normal process (load the base, ``PeftModel.from_pretrained``, merge).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from numadapter.integrations.deepspeed_zero import (
    gathered_parameters as gathered_parameters,  # re-exported: the same helper
)

__all__ = [
    "LaunchInfo",
    "launch_info",
    "load_deepspeed_config",
    "check_deepspeed_config",
    "prepare_distributed_state",
    "training_overrides",
    "gathered_parameters",
]

ZERO_STAGES = (0, 1, 2, 3)
SAVE_16BIT = "stage3_gather_16bit_weights_on_model_save"
DEEPSPEED_INSTALL = 'pip install "numadapter[deepspeed]" (deepspeed>=0.19,<0.20 and ninja; CPU runs also need g++)'


@dataclass(frozen=True)
class LaunchInfo:
    """How this process was started (read from the launcher's environment variables).

    Attributes:
        world_size: processes in the job (``WORLD_SIZE``; 1 when not launched by torchrun / accelerate).
        rank: this process's global rank (``RANK``).
        local_rank: rank on this machine (``LOCAL_RANK``), -1 when no launcher set it.
        has_accelerator: whether a GPU (or another non-CPU training device) is visible.
        deepspeed_config: the DeepSpeed config as a dict, or None (DDP / one process).
        backend: the communication backend to use: the one asked for, else ``"gloo"`` on CPU, else None (the
            launcher's default, NCCL on CUDA).
    """

    world_size: int
    rank: int
    local_rank: int
    has_accelerator: bool
    deepspeed_config: dict[str, Any] | None
    backend: str | None

    @property
    def launched(self) -> bool:
        """Whether a multi-process launcher (torchrun, accelerate launch, deepspeed) started this process."""
        return self.local_rank != -1

    @property
    def cpu_distributed(self) -> bool:
        """Whether this is a multi-process run without an accelerator (the case that needs fixing)."""
        return self.launched and not self.has_accelerator


def _env_int(environ: Mapping[str, str], name: str, default: int) -> int:
    value = environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name}={value!r} is not an integer; the launcher sets it.") from None


def has_accelerator() -> bool:
    """Whether a non-CPU training device (CUDA, XPU, NPU, ...) is available; MPS does not count (no multi-process)."""
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and accelerator.is_available():
        device = accelerator.current_accelerator()
        return device is not None and device.type != "mps"
    return torch.cuda.is_available()


def load_deepspeed_config(config: str | os.PathLike | Mapping[str, Any]) -> dict[str, Any]:
    """Reads a DeepSpeed config (a JSON file path or a dict) and validates it with `check_deepspeed_config`.

    Args:
        config: path to a DeepSpeed JSON file, or the config as a mapping.

    Returns:
        A new dict (the mapping is copied, never modified).
    """
    if isinstance(config, Mapping):
        data = json.loads(json.dumps(dict(config)))  # a deep copy that also proves it is JSON
    elif isinstance(config, (str, os.PathLike)):
        path = os.fspath(config)
        if not os.path.isfile(path):
            raise ValueError(
                f"DeepSpeed config file {path!r} does not exist: pass the path of a DeepSpeed JSON file (e.g. "
                "recipes/accelerate/deepspeed/zero3.json) or a dict."
            )
        with open(path, encoding="utf-8") as file:
            try:
                data = json.load(file)
            except json.JSONDecodeError as exc:
                raise ValueError(f"DeepSpeed config file {path!r} is not valid JSON: {exc}.") from None
    else:
        raise TypeError(f"`deepspeed_config` must be a path or a dict, got {type(config).__name__}.")
    if not isinstance(data, dict):
        raise ValueError(f"a DeepSpeed config must be a JSON object, got {type(data).__name__}.")
    check_deepspeed_config(data)
    return data


def check_deepspeed_config(config: Mapping[str, Any]) -> None:
    """Refuses DeepSpeed settings that break numadapter training or saving.

    - ``zero_optimization.stage`` must be 0, 1, 2 or 3;
    - ZeRO-3 needs ``stage3_gather_16bit_weights_on_model_save: true``: without it ``Trainer.save_model`` writes an
      adapter file without tensors (the parameters are partitioned) and only a DeepSpeed checkpoint holds them.

    Raises:
        ValueError: naming the setting, the value found and the fix.
    """
    zero = config.get("zero_optimization", {})
    if not isinstance(zero, Mapping):
        raise ValueError(f"`zero_optimization` must be a JSON object, got {zero!r}.")
    stage = zero.get("stage", 0)
    if stage not in ZERO_STAGES:
        raise ValueError(f"`zero_optimization.stage` must be one of {list(ZERO_STAGES)}, got {stage!r}.")
    if stage == 3 and zero.get(SAVE_16BIT) is not True:
        raise ValueError(
            f"ZeRO-3 needs `zero_optimization.{SAVE_16BIT}: true` (got {zero.get(SAVE_16BIT)!r}): without it the "
            "adapter is saved without its weights, because every rank only has its partition. Set it to true (the "
            "recipes in recipes/accelerate/deepspeed/ do)."
        )


def launch_info(
    deepspeed_config: str | os.PathLike | Mapping[str, Any] | None = None,
    backend: str | None = None,
    environ: Mapping[str, str] | None = None,
    accelerator: bool | None = None,
) -> LaunchInfo:
    """Reads how this process was launched; no side effects.

    Args:
        deepspeed_config: a DeepSpeed JSON path or dict. None: taken from ``ACCELERATE_DEEPSPEED_CONFIG_FILE`` when
            ``accelerate launch`` started the process with a DeepSpeed config (``ACCELERATE_USE_DEEPSPEED=true``).
        backend: the communication backend (``"gloo"``, ``"nccl"``, ...); None picks one (see `LaunchInfo`).
        environ: the environment to read (default ``os.environ``).
        accelerator: whether a GPU is available (default: `has_accelerator`).

    Returns:
        The `LaunchInfo`.
    """
    environ = os.environ if environ is None else environ
    accelerator = has_accelerator() if accelerator is None else bool(accelerator)
    if deepspeed_config is None and environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true":
        deepspeed_config = environ.get("ACCELERATE_DEEPSPEED_CONFIG_FILE") or None
    config = None if deepspeed_config is None else load_deepspeed_config(deepspeed_config)
    world_size = _env_int(environ, "WORLD_SIZE", 1)
    if world_size < 1:
        raise ValueError(f"environment variable WORLD_SIZE={world_size} must be >= 1.")
    if backend is not None and not isinstance(backend, str):
        raise TypeError(f"`backend` must be a string such as 'gloo' or 'nccl', got {type(backend).__name__}.")
    if backend is None and not accelerator:
        backend = "gloo"
    if backend == "nccl" and not accelerator:
        raise ValueError("backend='nccl' needs a CUDA GPU and none is visible: use backend='gloo' (or None) on CPU.")
    return LaunchInfo(
        world_size=world_size,
        rank=_env_int(environ, "RANK", 0),
        local_rank=_env_int(environ, "LOCAL_RANK", -1),
        has_accelerator=accelerator,
        deepspeed_config=config,
        backend=backend,
    )


def training_overrides(info: LaunchInfo) -> dict[str, Any]:
    """The `TrainingArguments` keyword arguments for a launch (pure; `prepare_distributed_state` applies the state).

    Args:
        info: from `launch_info`.

    Returns:
        ``{}`` for one process without DeepSpeed; ``{"deepspeed": config}`` with DeepSpeed; on CPU under a launcher
        additionally ``{"use_cpu": True, "ddp_backend": backend}`` (DDP) or ``{"accelerator_config":
        {"use_configured_state": True}}`` (DeepSpeed).
    """
    overrides: dict[str, Any] = {}
    if info.deepspeed_config is not None:
        overrides["deepspeed"] = info.deepspeed_config
    if info.cpu_distributed:
        if info.deepspeed_config is None:
            overrides.update(use_cpu=True, ddp_backend=info.backend)
        else:
            overrides["accelerator_config"] = {"use_configured_state": True}
    elif info.launched and info.backend is not None and info.deepspeed_config is None:
        overrides["ddp_backend"] = info.backend
    return overrides


def prepare_distributed_state(
    deepspeed_config: str | os.PathLike | Mapping[str, Any] | None = None, backend: str | None = None
) -> dict[str, Any]:
    """Sets up the process state so DDP / ZeRO-2 / ZeRO-3 run the same on CPU and GPU; returns argument overrides.

    Call it once per process before creating the `TrainingArguments` (or `SFTConfig`) and pass the returned
    dict into them (merge ``accelerator_config`` with your own if you set one). On CPU under DeepSpeed it sets
    ``ACCELERATE_USE_DEEPSPEED=true`` and creates accelerate's ``PartialState(backend=...)`` (DeepSpeed's process
    group over gloo); see the module docstring for why. A DeepSpeed run started without a launcher (``python
    script.py``) gets the environment of a one-process job first (`set_single_process_env`).

    Args:
        deepspeed_config: a DeepSpeed JSON path or dict (e.g. ``recipes/accelerate/deepspeed/zero3.json``); None:
            DDP or one process, or the config ``accelerate launch`` passes in ``ACCELERATE_DEEPSPEED_CONFIG_FILE``.
        backend: communication backend; None: ``"gloo"`` on CPU, the launcher's default (NCCL) on GPUs.

    Returns:
        `TrainingArguments` overrides (see `training_overrides`).

    Raises:
        ImportError: a DeepSpeed config was given and deepspeed is not installed (names the pip extra).
        ValueError: an invalid DeepSpeed config (`check_deepspeed_config`) or backend.
    """
    info = launch_info(deepspeed_config, backend)
    if info.deepspeed_config is not None:
        try:
            import deepspeed  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                f"a DeepSpeed config was given but deepspeed is not installed: {DEEPSPEED_INSTALL}."
            ) from exc
        if not info.launched:  # one process without a launcher: DeepSpeed still needs a process group of one
            set_single_process_env()
            info = launch_info(info.deepspeed_config, backend)
    if info.cpu_distributed and info.deepspeed_config is not None:
        from accelerate import PartialState

        os.environ["ACCELERATE_USE_DEEPSPEED"] = "true"
        state = PartialState(backend=info.backend)
        if state.num_processes != info.world_size:
            raise RuntimeError(
                f"accelerate's state has {state.num_processes} process(es) but WORLD_SIZE={info.world_size}: a "
                "PartialState was created before prepare_distributed_state; call it first in the script."
            )
    return training_overrides(info)


def set_single_process_env(environ: dict[str, str] | None = None) -> None:
    """Sets the variables a launcher would set for a job of one process (existing values are kept).

    DeepSpeed always initialises a process group; started without a launcher it looks for MPI instead. This gives it
    ``RANK=0``, ``LOCAL_RANK=0``, ``WORLD_SIZE=1``, ``LOCAL_WORLD_SIZE=1``, ``MASTER_ADDR=127.0.0.1`` and a free
    ``MASTER_PORT``.

    Args:
        environ: the environment to change (default ``os.environ``).
    """
    environ = os.environ if environ is None else environ
    for name, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_WORLD_SIZE", "1")):
        environ.setdefault(name, value)
    environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in environ:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            environ["MASTER_PORT"] = str(sock.getsockname()[1])


ZERO3_INIT_ENV = "ACCELERATE_DEEPSPEED_ZERO3_INIT"


def partition_at_load(overrides: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> bool:
    """Whether the base model should be loaded partitioned (``deepspeed.zero.Init`` inside ``from_pretrained``).

    The rule accelerate's ``DeepSpeedPlugin`` applies to ``zero3_init_flag``: with a ZeRO-3 config, yes, unless
    ``accelerate launch`` was given ``zero3_init_flag: false`` (it exports ``ACCELERATE_DEEPSPEED_ZERO3_INIT=false``).
    Under torchrun (no accelerate config) a ZeRO-3 DeepSpeed file means yes. To load partitioned, build the training
    arguments first and keep them alive while loading: their ``HfTrainerDeepSpeedConfig`` is what makes transformers'
    ``from_pretrained`` use ``zero.Init``. Otherwise load the base before the training arguments exist: every process
    then holds a full copy until DeepSpeed partitions it when training starts.

    Args:
        overrides: what `prepare_distributed_state` returned (its ``"deepspeed"`` entry is the config).
        environ: the environment to read (default ``os.environ``).

    Returns:
        True for ZeRO-3 with the init flag on.
    """
    environ = os.environ if environ is None else environ
    config = overrides.get("deepspeed")
    if not isinstance(config, Mapping) or config.get("zero_optimization", {}).get("stage", 0) != 3:
        return False
    flag = environ.get(ZERO3_INIT_ENV, "true").strip().lower()
    if flag not in ("true", "false", "1", "0", "yes", "no"):
        raise ValueError(f"environment variable {ZERO3_INIT_ENV}={flag!r} must be true or false (accelerate sets it).")
    return flag in ("true", "1", "yes")


def zero3_enabled() -> bool:
    """Whether the current process runs DeepSpeed ZeRO-3 (set once the TrainingArguments hold a ZeRO-3 config)."""
    from transformers.integrations import is_deepspeed_zero3_enabled

    return bool(is_deepspeed_zero3_enabled())
