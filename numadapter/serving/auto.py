"""transformers' Auto classes and text-generation pipeline, taught to load a numadapter export.

A number export's ``config.json`` carries numadapter's ``model_type`` (``"numadapter-llama"``,
`numadapter.serving.marking`). In a process that imported numadapter, these are registered with transformers:

- ``AutoConfig``: one config class per supported family (`FAMILIES`), named by the marked model_type; it keeps every
  field of the file as an attribute (the base's sizes included);
- ``AutoModelForCausalLM`` / ``AutoModelForSeq2SeqLM``: a loader per family whose ``from_pretrained(DIR)`` returns
  what ``numadapter.load_exported(DIR)`` returns, the frozen numadapter model, whose ``model.generate`` and
  pipelines write the numbers (`numadapter.generation.hf`). So ``AutoModelForCausalLM.from_pretrained(DIR)`` gives
  the model numadapter serves, not the plain merged weights that would drop the numbers;
- ``pipeline("text-generation")``: its class becomes `numadapter.serving.text_generation.TextGenerationDispatch`,
  which builds transformers' own pipeline for every other model and the number pipeline for a numadapter model.

The registration (`register_configs`, `register_models`, `register_text_generation`) runs as soon as transformers'
auto config, auto model and pipeline modules are imported (`numadapter.integrations.import_hooks`), so it costs
nothing more than defining these classes.
"""

from __future__ import annotations

import os
from typing import Any

from transformers.configuration_utils import PreTrainedConfig

from numadapter.serving.marking import CLASS_PREFIX, marked_model_type

# the base model_type of each family numadapter supports (numadapter.tuner.patches.SUPPORTED_ARCHITECTURES) and its
# transformers class; T5 is the encoder-decoder
FAMILIES: dict[str, str] = {
    "llama": "LlamaForCausalLM",
    "granite": "GraniteForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "t5": "T5ForConditionalGeneration",
}
SEQ2SEQ = frozenset({"t5"})
# from_pretrained arguments that name where the files come from (a local directory is read as it is) or that
# transformers' Auto classes and pipelines add; anything else is refused by name
IGNORED = frozenset({
    "cache_dir", "force_download", "local_files_only", "proxies", "revision", "token", "trust_remote_code",
    "code_revision", "_commit_hash", "_from_auto", "_from_pipeline", "adapter_kwargs", "use_safetensors",
})  # fmt: skip


class NumberExportConfig(PreTrainedConfig):
    """The config of a marked export (``config.json`` as written, every field an attribute); one subclass per family,
    whose ``model_type`` is the marked one (`CONFIG_CLASSES`)."""

    model_type = "numadapter"


class NumberExportLoader:
    """``from_pretrained(DIR)`` of a marked export for transformers' Auto classes: `numadapter.load_exported`.

    Not a model class: transformers' Auto classes call ``from_pretrained`` of the class registered for the config,
    and this one returns the ``peft.PeftModel`` that `load_exported` builds (the merged base with the number modules
    attached), eval mode and frozen. One subclass per family (`LOADER_CLASSES`).
    """

    config_class: type[PreTrainedConfig] = NumberExportConfig

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike, *model_args: Any, **kwargs: Any) -> Any:
        """Loads the export in directory `pretrained_model_name_or_path` with `numadapter.load_exported`.

        Args:
            pretrained_model_name_or_path: a local export directory (for a Hub repository, download it first:
                ``huggingface_hub.snapshot_download(repo_id)``).
            **kwargs: ``dtype`` (or ``torch_dtype``; ``"auto"``: as saved), ``device_map`` and ``subfolder``; the
                hub and Auto-class arguments in `IGNORED`; ``config`` (the config AutoConfig read, not needed).

        Raises:
            ValueError: the path is not a directory.
            TypeError: positional model arguments, or keyword arguments `load_exported` has no use for.
        """
        from numadapter.export import load_exported

        path = os.path.join(os.fspath(pretrained_model_name_or_path), kwargs.pop("subfolder", None) or "")
        kwargs.pop("config", None)
        dtype = kwargs.pop("dtype", None)
        torch_dtype = kwargs.pop("torch_dtype", None)
        dtype = torch_dtype if dtype in (None, "auto") else dtype
        device_map = kwargs.pop("device_map", None)
        unused = sorted(key for key in kwargs if key not in IGNORED)
        if model_args or unused:
            raise TypeError(
                f"{cls.__name__}.from_pretrained loads a numadapter export with numadapter.load_exported, which "
                f"takes dtype and device_map only; got {len(model_args)} positional model arguments and {unused}. "
                "Drop them, or load the merged weights alone with numadapter.load_exported(DIR)[0].get_base_model()."
            )
        if not os.path.isdir(path):
            raise ValueError(
                f"{path!r} is not a directory: numadapter loads an export from a local directory. For a Hub "
                "repository, download it first (huggingface_hub.snapshot_download(repo_id)) and pass that directory."
            )
        model, _ = load_exported(path, dtype=None if dtype == "auto" else dtype, device_map=device_map)
        return model


def _config_class(family: str) -> type[NumberExportConfig]:
    name = f"{CLASS_PREFIX}{FAMILIES[family].split('For')[0]}Config"  # NumadapterLlamaConfig
    return type(name, (NumberExportConfig,), {"model_type": marked_model_type(family), "__module__": __name__})


CONFIG_CLASSES: dict[str, type[NumberExportConfig]] = {family: _config_class(family) for family in FAMILIES}
LOADER_CLASSES: dict[str, type[NumberExportLoader]] = {
    family: type(
        CLASS_PREFIX + architecture,  # NumadapterLlamaForCausalLM, as config.json's architectures
        (NumberExportLoader,),
        {"config_class": CONFIG_CLASSES[family], "__module__": __name__},
    )
    for family, architecture in FAMILIES.items()
}


def register_configs() -> None:
    """Registers each family's marked model_type with ``AutoConfig`` (again: no change)."""
    from transformers.models.auto.configuration_auto import AutoConfig

    for family, config_class in CONFIG_CLASSES.items():
        AutoConfig.register(marked_model_type(family), config_class, exist_ok=True)


def register_models() -> None:
    """Registers each family's loader with ``AutoModelForCausalLM`` (T5: ``AutoModelForSeq2SeqLM``)."""
    from transformers.models.auto.modeling_auto import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    for family, loader in LOADER_CLASSES.items():
        auto = AutoModelForSeq2SeqLM if family in SEQ2SEQ else AutoModelForCausalLM
        auto.register(CONFIG_CLASSES[family], loader, exist_ok=True)


TRANSFORMERS_TEXT_GENERATION = "transformers.pipelines.text_generation.TextGenerationPipeline"
TEXT_GENERATION = "numadapter.serving.text_generation.TextGenerationDispatch"


def register_text_generation() -> None:
    """Makes ``pipeline("text-generation")`` build `TEXT_GENERATION` (by dotted path, imported on use); a task
    another library has already replaced is left alone."""
    from transformers.pipelines import PIPELINE_REGISTRY

    task = PIPELINE_REGISTRY.supported_tasks.get("text-generation")
    if isinstance(task, dict) and task.get("impl") == TRANSFORMERS_TEXT_GENERATION:
        task["impl"] = TEXT_GENERATION
