"""Recipes: one YAML file mapped onto the dataclasses of the Python API (docs/DESIGN.md, "Conventions").

A recipe has up to six sections; each maps onto one dataclass, and every key must be a field of it:

| section    | dataclass                                                                                     |
|------------|-----------------------------------------------------------------------------------------------|
| `model`    | `ModelSettings`: base model (local directory or hub id), dtype, 4-bit (QLoRA) loading          |
| `data`     | `DataSettings`: local JSONL / CSV / Parquet files, a hub dataset, or the built-in synthetic task |
| `adapter`  | `numadapter.config.NumberAdapterConfig`: LoRA plus the number settings                          |
| `training` | ``trl.SFTConfig`` (causal LMs) or ``transformers.Seq2SeqTrainingArguments`` (``adapter.task_type: |
|            | SEQ_2_SEQ_LM``, T5)                                                                           |
| `eval`     | `EvalSettings`: generation-based evaluation (``numadapter eval``)                              |
| `export`   | `ExportSettings`: merged export after training                                                |

Overrides ``section.key=value`` are applied on top of the file; the value is parsed as YAML 1.2 (``8``, ``2e-4``,
``true``, ``null``, ``[q_proj, v_proj]``; only true / false are booleans, so ``no`` stays a string). An unknown
section or key raises `RecipeError` (a `ValueError`) listing the valid ones.
Relative paths in a recipe (data files, a DeepSpeed JSON) are relative to the directory the command runs in, as with
``accelerate launch``: run from the repository root.

The training section is kept as validated keyword arguments and built by `Recipe.training_args` at run time, because
a DeepSpeed launch must set up its process state (`numadapter.integrations.launch.prepare_distributed_state`) before
the training arguments exist. `validate_recipe` checks it by building the arguments without the device-dependent
settings (``bf16``, ``fp16``, ``tf32``, ``deepspeed``, ``use_cpu``), which are type-checked and, for ``deepspeed``,
validated with `numadapter.integrations.launch.load_deepspeed_config`. ``numadapter validate`` then runs
`numadapter.app.commands.check_runnable`, what ``train`` checks on this machine, device settings included.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from numadapter.config import NumberAdapterConfig
from numadapter.integrations.command_line import parse_setting
from numadapter.methods.registry import known_methods, unknown_encoding_message

SECTIONS = ("model", "data", "adapter", "training", "eval", "export")
DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16")
DATA_EXTENSIONS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}
SYNTHETIC_PREFIX = "synthetic:"
SYNTHETIC_TASKS = ("addition",)
DEVICE_KEYS = ("bf16", "fp16", "tf32", "deepspeed", "use_cpu")
TASK_TYPES = ("CAUSAL_LM", "SEQ_2_SEQ_LM")


class RecipeError(ValueError):
    """A recipe that cannot be used: unknown section or key, wrong type or value (the message says what to change)."""


def _choice(section: str, name: str, value: Any, choices: Sequence[Any]) -> None:
    if value not in choices:
        raise RecipeError(f"`{section}.{name}` must be one of {list(choices)}, got {value!r}.")


def _positive(section: str, name: str, value: Any, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RecipeError(f"`{section}.{name}` must be a positive integer{' or null' if allow_none else ''}, "
                         f"got {value!r}.")  # fmt: skip


def yaml_loader() -> type:
    """A safe YAML loader with YAML 1.2 scalars: only true/false are booleans (``no`` stays the string "no", as
    ``save_strategy: no`` means), and ``2e-4`` is a float."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    bool_tag, float_tag = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:float"
    Loader.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != bool_tag]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    Loader.add_implicit_resolver(bool_tag, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
    Loader.add_implicit_resolver(
        float_tag, re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789")
    )
    return Loader


def load_yaml(text: str) -> Any:
    """Parses YAML text with `yaml_loader`."""
    import yaml

    return yaml.load(text, Loader=yaml_loader())  # noqa: S506 (a SafeLoader subclass)


@dataclass
class ModelSettings:
    """The `model` section: which base model and how to load it.

    Attributes:
        name_or_path (`str`): local directory or hub id of the base model (Llama, Granite, T5 families). A path
            ending in ``.gguf`` is read as its directory plus `gguf_file`.
        tokenizer (`str | None`, defaults to None): tokenizer directory or hub id (None: `name_or_path`).
        dtype (`str`, defaults to `"auto"`): weight dtype, one of `"auto"` (as saved), `"float32"`, `"bfloat16"`,
            `"float16"`. bf16 halves memory against float32 on GPUs that support it.
        load_in_4bit (`bool`, defaults to False): QLoRA: load the base in 4-bit NF4 (needs bitsandbytes). About 4x
            less base memory than bf16; slower steps. The number modules and [NUM] rows stay float32.
        bnb_4bit_compute_dtype (`str`, defaults to `"bfloat16"`): dtype the 4-bit layers compute in.
        bnb_4bit_quant_storage (`str | None`, defaults to None): storage dtype of the packed 4-bit weights; under
            DeepSpeed ZeRO-3 it must equal `dtype` (see `numadapter.integrations.qlora`).
        attn_implementation (`str | None`, defaults to None): `"eager"`, `"sdpa"`, `"flash_attention_2"`, ...
            (None: transformers' default).
        revision (`str | None`, defaults to None): hub revision of the model.
        gguf_file (`str | None`, defaults to None): a GGUF file inside the `name_or_path` directory (a directory that
            holds only GGUF files has no ``config.json`` and needs it). It is converted once to float32
            (`numadapter.convert_gguf`, cached) and the model and tokenizer load from the converted directory.
    """

    name_or_path: str = field(metadata={"help": "Local directory or hub id of the base model."})
    tokenizer: str | None = field(default=None, metadata={"help": "Tokenizer directory / hub id (None: the model's)."})
    dtype: str = field(default="auto", metadata={"help": "Weight dtype.", "choices": list(DTYPE_CHOICES)})
    load_in_4bit: bool = field(default=False, metadata={"help": "QLoRA: load the base in 4-bit NF4."})
    bnb_4bit_compute_dtype: str = field(default="bfloat16", metadata={"help": "Compute dtype of 4-bit layers."})
    bnb_4bit_quant_storage: str | None = field(default=None, metadata={"help": "Storage dtype of 4-bit weights."})
    attn_implementation: str | None = field(default=None, metadata={"help": "Attention implementation."})
    revision: str | None = field(default=None, metadata={"help": "Hub revision of the model."})
    gguf_file: str | None = field(default=None, metadata={"help": "A GGUF file in the name_or_path directory."})

    def __post_init__(self) -> None:
        if not isinstance(self.name_or_path, str) or not self.name_or_path:
            raise RecipeError(f"`model.name_or_path` must be a directory or hub id, got {self.name_or_path!r}.")
        if self.name_or_path.lower().endswith(".gguf"):  # a GGUF file: its directory + model.gguf_file
            if self.gguf_file is not None:
                raise RecipeError(
                    f"`model.name_or_path` is the GGUF file {self.name_or_path!r} and `model.gguf_file` is set too "
                    f"({self.gguf_file!r}): set model.name_or_path to the directory and model.gguf_file to the file."
                )
            folder, self.gguf_file = os.path.split(self.name_or_path)
            self.name_or_path = folder or "."
        gguf = self.gguf_file
        if gguf is not None and not (isinstance(gguf, str) and gguf.lower().endswith(".gguf")):
            raise RecipeError(f"`model.gguf_file` must be the name of a .gguf file, got {self.gguf_file!r}.")
        _choice("model", "dtype", self.dtype, DTYPE_CHOICES)
        _choice("model", "bnb_4bit_compute_dtype", self.bnb_4bit_compute_dtype, DTYPE_CHOICES[1:])
        if self.bnb_4bit_quant_storage is not None:
            _choice("model", "bnb_4bit_quant_storage", self.bnb_4bit_quant_storage, ("uint8", *DTYPE_CHOICES[1:]))


@dataclass
class DataSettings:
    """The `data` section: where the training and evaluation examples come from.

    Each source is a local file (``.jsonl``, ``.json``, ``.csv``, ``.parquet``; a glob such as ``data/*.jsonl``
    works), a local directory (saved with ``Dataset.save_to_disk``, or a folder of such files), a hub dataset name
    (when the network allows), or ``synthetic:addition`` (numadapter's built-in addition task, generated locally,
    see `numadapter.data.arithmetic.addition_examples`). Examples have ``prompt`` + ``completion`` strings (the
    completion is trained and evaluated), a ``text`` column, or chat ``messages``; T5 needs ``prompt`` +
    ``completion``.

    Attributes:
        train (`str`): the training source.
        eval (`str | None`, defaults to None): the evaluation source (None: `train` with `eval_split`, if set).
        train_split (`str`, defaults to `"train"`): split of a hub dataset / directory used for training.
        eval_split (`str | None`, defaults to None): split used for evaluation.
        subset (`str | None`, defaults to None): hub dataset configuration name.
        max_train_examples (`int | None`, defaults to None): keep the first N training examples.
        max_eval_examples (`int | None`, defaults to None): keep the first N evaluation examples.
        synthetic_examples (`int`, defaults to 20000): size of a synthetic training set.
        synthetic_eval_examples (`int`, defaults to 200): size of a synthetic evaluation set (disjoint seed).
        synthetic_min_digits (`int`, defaults to 3): fewest digits of a synthetic operand.
        synthetic_max_digits (`int`, defaults to 4): most digits of a synthetic operand.
        max_source_length (`int | None`, defaults to None): T5 only: truncate sources (numbers are dropped whole).
        max_target_length (`int | None`, defaults to None): T5 only: truncate targets.
        seed (`int`, defaults to 0): seed of the synthetic data.
    """

    train: str = field(metadata={"help": "Training source: file, directory, hub name or synthetic:addition."})
    eval: str | None = field(default=None, metadata={"help": "Evaluation source (None: train + eval_split)."})
    train_split: str = field(default="train", metadata={"help": "Split used for training."})
    eval_split: str | None = field(default=None, metadata={"help": "Split used for evaluation."})
    subset: str | None = field(default=None, metadata={"help": "Hub dataset configuration name."})
    max_train_examples: int | None = field(default=None, metadata={"help": "Keep the first N training examples."})
    max_eval_examples: int | None = field(default=None, metadata={"help": "Keep the first N evaluation examples."})
    synthetic_examples: int = field(default=20000, metadata={"help": "Size of a synthetic training set."})
    synthetic_eval_examples: int = field(default=200, metadata={"help": "Size of a synthetic evaluation set."})
    synthetic_min_digits: int = field(default=3, metadata={"help": "Fewest digits of a synthetic operand."})
    synthetic_max_digits: int = field(default=4, metadata={"help": "Most digits of a synthetic operand."})
    max_source_length: int | None = field(default=None, metadata={"help": "T5: truncate sources to N tokens."})
    max_target_length: int | None = field(default=None, metadata={"help": "T5: truncate targets to N tokens."})
    seed: int = field(default=0, metadata={"help": "Seed of the synthetic data."})

    def __post_init__(self) -> None:
        for name in ("train", "eval"):
            source = getattr(self, name)
            if source is None and name == "eval":
                continue
            if not isinstance(source, str) or not source:
                raise RecipeError(f"`data.{name}` must be a file, directory, hub name or 'synthetic:<task>', got "
                                 f"{source!r}.")  # fmt: skip
            if source.startswith(SYNTHETIC_PREFIX):
                _choice("data", name, source.removeprefix(SYNTHETIC_PREFIX), SYNTHETIC_TASKS)
        for name in ("max_train_examples", "max_eval_examples", "max_source_length", "max_target_length"):
            _positive("data", name, getattr(self, name))
        for name in ("synthetic_examples", "synthetic_eval_examples", "synthetic_min_digits", "synthetic_max_digits"):
            _positive("data", name, getattr(self, name), allow_none=False)
        if self.synthetic_min_digits > self.synthetic_max_digits:
            raise RecipeError(
                f"`data.synthetic_min_digits` ({self.synthetic_min_digits}) must be <= `data.synthetic_max_digits` "
                f"({self.synthetic_max_digits})."
            )


@dataclass
class EvalSettings:
    """The `eval` section: generation-based evaluation of the answers' numbers (``numadapter eval``).

    Attributes:
        max_new_tokens (`int`, defaults to 32): tokens generated per prompt. Higher: longer answers, slower.
        batch_size (`int`, defaults to 32): prompts per generation batch. Higher: faster, more memory.
        max_examples (`int | None`, defaults to 200): evaluate the first N examples (None: all).
        output_file (`str | None`, defaults to None): where to write the metrics as JSON (None:
            ``<training.output_dir>/eval_results.json``).
    """

    max_new_tokens: int = field(default=32, metadata={"help": "Tokens generated per prompt."})
    batch_size: int = field(default=32, metadata={"help": "Prompts per generation batch."})
    max_examples: int | None = field(default=200, metadata={"help": "Evaluate the first N examples (None: all)."})
    output_file: str | None = field(default=None, metadata={"help": "Metrics JSON path."})

    def __post_init__(self) -> None:
        for name in ("max_new_tokens", "batch_size"):
            _positive("eval", name, getattr(self, name), allow_none=False)
        _positive("eval", "max_examples", self.max_examples)


@dataclass
class ExportSettings:
    """The `export` section: write a merged, self-contained model after training (`numadapter.export`).

    Attributes:
        out_dir (`str | None`, defaults to None): the export directory (None: no export after training).
        dtype (`str | None`, defaults to None): dtype of the merged weights (None: the model's).
    """

    out_dir: str | None = field(default=None, metadata={"help": "Export directory (None: no export)."})
    dtype: str | None = field(default=None, metadata={"help": "Dtype of the merged weights."})

    def __post_init__(self) -> None:
        if self.dtype is not None:
            _choice("export", "dtype", self.dtype, DTYPE_CHOICES[1:])


SETTINGS_CLASSES: dict[str, type] = {
    "model": ModelSettings,
    "data": DataSettings,
    "eval": EvalSettings,
    "export": ExportSettings,
}


def training_class(task_type: str | None) -> type:
    """``trl.SFTConfig`` for causal LMs, ``transformers.Seq2SeqTrainingArguments`` for ``SEQ_2_SEQ_LM``."""
    if task_type == "SEQ_2_SEQ_LM":
        from transformers import Seq2SeqTrainingArguments

        return Seq2SeqTrainingArguments
    from trl import SFTConfig

    return SFTConfig


def init_fields(cls: type) -> list[str]:
    """The constructor fields of a dataclass, in declaration order."""
    return [f.name for f in dataclasses.fields(cls) if f.init]


def _unknown_key(section: str, key: str, valid: Sequence[str], cls: type) -> RecipeError:
    close = difflib.get_close_matches(key, valid, n=3)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return RecipeError(
        f"unknown key `{section}.{key}` (the `{section}` section maps onto {cls.__name__}).{hint} Valid keys: "
        f"{', '.join(sorted(valid))}."
    )


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # unresolvable annotations: no type check for this class
        return {}


def _coerce(value: Any, hint: Any) -> tuple[bool, Any]:
    """Whether `value` fits the annotation `hint` (shallow), and the value (a numeric string becomes a float)."""
    if hint is Any or hint is None:
        return True, value
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            ok, coerced = _coerce(value, arg)
            if ok:
                return True, coerced
        return False, value
    if origin is typing.Literal:
        return value in typing.get_args(hint), value
    if origin is not None:
        hint = origin
    if hint is type(None):
        return value is None, value
    if hint is bool:
        return isinstance(value, bool), value
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return True, float(value)
        if isinstance(value, str):  # YAML 1.1 reads "2e-4" as a string
            try:
                return True, float(value)
            except ValueError:
                return False, value
        return False, value
    if hint is str:
        return isinstance(value, str), value
    if hint in (list, tuple, set, Sequence):
        return isinstance(value, (list, tuple)), value
    if hint in (dict, Mapping):
        return isinstance(value, dict), value
    if isinstance(hint, type) and issubclass(hint, Enum):
        return isinstance(value, hint) or value in [member.value for member in hint], value
    return True, value  # another class (torch.dtype, ...): left to the dataclass itself


def check_section(section: str, values: Mapping[str, Any], cls: type) -> dict[str, Any]:
    """Checks the keys of one section against `cls`'s fields and their types; returns the (coerced) values.

    Raises:
        RecipeError: an unknown key (listing the valid ones) or a value of the wrong type.
    """
    if not isinstance(values, Mapping):
        raise RecipeError(f"the `{section}` section must be a mapping of keys to values, got {values!r}.")
    valid = init_fields(cls)
    hints = _hints(cls)
    out = {}
    for key, value in values.items():
        if key not in valid:
            raise _unknown_key(section, str(key), valid, cls)
        ok, coerced = _coerce(value, hints.get(key, Any))
        if not ok:
            raise RecipeError(
                f"`{section}.{key}` must be {_describe(hints[key])}, got {value!r} ({type(value).__name__})."
            )
        out[key] = coerced
    return out


def _describe(hint: Any) -> str:
    if typing.get_origin(hint) is typing.Literal:
        return f"one of {list(typing.get_args(hint))}"
    text = getattr(hint, "__name__", None) if typing.get_origin(hint) is None else None
    return f"of type {text or str(hint).replace('typing.', '')}"


@dataclass
class Recipe:
    """A loaded recipe: the settings dataclasses, the adapter config and the training keyword arguments.

    Attributes:
        model, data, eval, export: the settings dataclasses.
        adapter: the `NumberAdapterConfig` (validated; `numadapter.get_peft_model` binds it to the tokenizer).
        training: keyword arguments of `training_class` (validated; built by `training_args`).
        source: the YAML file it came from (None when built from a dict).
    """

    model: ModelSettings
    data: DataSettings
    adapter: NumberAdapterConfig
    training: dict[str, Any]
    eval: EvalSettings = field(default_factory=EvalSettings)
    export: ExportSettings = field(default_factory=ExportSettings)
    source: str | None = None

    @property
    def seq2seq(self) -> bool:
        """Whether this recipe trains an encoder-decoder (T5) model (``adapter.task_type: SEQ_2_SEQ_LM``)."""
        return self.adapter.task_type == "SEQ_2_SEQ_LM"

    @property
    def output_dir(self) -> str:
        """``training.output_dir`` (where the adapter and checkpoints go)."""
        return self.training.get("output_dir") or "trainer_output"

    def training_args(self, **overrides: Any) -> Any:
        """Builds the ``SFTConfig`` / ``Seq2SeqTrainingArguments`` from `training` plus `overrides`.

        Args:
            **overrides: extra keyword arguments (e.g. from
            `numadapter.integrations.launch.prepare_distributed_state`).
        """
        cls = training_class(self.adapter.task_type)
        kwargs = {**self.training, **overrides}
        try:
            return cls(**kwargs)
        except (ValueError, TypeError) as exc:
            where = f" in {self.source}" if self.source else ""
            raise RecipeError(f"the `training` section{where} is not valid for {cls.__name__}: {exc}") from exc


def parse_overrides(overrides: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``["training.max_steps=5", "adapter.r=8"]`` -> ``{"training": {"max_steps": 5}, "adapter": {"r": 8}}``.

    Values are parsed as YAML (`load_yaml`; an empty value is None) by
    `numadapter.integrations.command_line.parse_setting`. Raises `RecipeError` for a malformed override or an unknown
    section.
    """
    out: dict[str, dict[str, Any]] = {}
    form, example = f"section.key=value with section one of {list(SECTIONS)}", "training.max_steps=10"
    for item in overrides:
        key, value = parse_setting(
            item, _override_value, flag="override", form=form, example=example, error=RecipeError
        )
        section, dot, name = key.partition(".")
        if not dot or not name:
            raise RecipeError(f"override {item!r} must look like {form}, e.g. {example}.")
        if section not in SECTIONS:
            raise RecipeError(f"override {item!r}: unknown section {section!r}; sections: {list(SECTIONS)}.")
        if "." in name:
            raise RecipeError(
                f"override {item!r}: nested keys are not supported; give the whole value, e.g. "
                f"{section}.{name.split('.')[0]}={{key: value}}."
            )
        out.setdefault(section, {})[name] = value
    return out


def _override_value(raw: str) -> Any:
    return load_yaml(raw) if raw.strip() else None


def build_recipe(data: Mapping[str, Any], source: str | None = None) -> Recipe:
    """Builds a `Recipe` from the parsed YAML mapping (see the module docstring)."""
    if not isinstance(data, Mapping):
        raise RecipeError(f"a recipe must be a mapping of sections {list(SECTIONS)}, got {type(data).__name__}.")
    unknown = [key for key in data if key not in SECTIONS]
    if unknown:
        raise RecipeError(f"unknown recipe section(s) {unknown}; valid sections: {list(SECTIONS)}.")
    for required in ("model", "data", "adapter", "training"):
        if not data.get(required):
            raise RecipeError(f"the recipe{f' {source}' if source else ''} has no `{required}` section.")
    settings = {name: cls(**check_section(name, data.get(name) or {}, cls)) for name, cls in SETTINGS_CLASSES.items()}
    adapter_values = check_section("adapter", data["adapter"], NumberAdapterConfig)
    task_type = adapter_values.setdefault("task_type", "CAUSAL_LM")
    _choice("adapter", "task_type", task_type, TASK_TYPES)
    encoding = adapter_values.get("encoding", NumberAdapterConfig.encoding)
    if encoding not in known_methods():  # built-in or registered (numadapter.methods.register_method, CLI --import)
        raise RecipeError(unknown_encoding_message(encoding, field="adapter.encoding"))
    adapter = NumberAdapterConfig(**adapter_values)
    training = check_section("training", data["training"], training_class(task_type))
    return Recipe(adapter=adapter, training=training, source=source, **settings)


def load_recipe(path: str | os.PathLike, overrides: Sequence[str] = ()) -> Recipe:
    """Reads a recipe YAML file, applies ``section.key=value`` overrides and validates the sections.

    Args:
        path: the YAML file.
        overrides: ``section.key=value`` strings (values parsed as YAML).

    Returns:
        The `Recipe`.

    Raises:
        FileNotFoundError: no such file.
        RecipeError (a ValueError): a malformed file, an unknown section or key (the message lists the valid
            ones), a bad value.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"recipe file {path!r} does not exist (see recipes/ for examples).")
    with open(path, encoding="utf-8") as file:
        data = load_yaml(file.read()) or {}
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: a recipe must be a mapping of sections {list(SECTIONS)}.")
    for section, values in parse_overrides(overrides).items():
        current = data.get(section) or {}
        if not isinstance(current, dict):
            raise RecipeError(f"{path}: the `{section}` section must be a mapping, got {current!r}.")
        data[section] = {**current, **values}
    try:
        return build_recipe(data, source=path)
    except (ValueError, TypeError) as exc:
        raise RecipeError(f"{path}: {exc}") from exc


def validate_recipe(path: str | os.PathLike, overrides: Sequence[str] = ()) -> Recipe:
    """`load_recipe` plus a trial build of the training arguments on this machine (see the module docstring).

    Raises:
        RecipeError: anything `load_recipe` refuses, invalid training arguments, or an invalid DeepSpeed config.
    """
    recipe = load_recipe(path, overrides)
    training = dict(recipe.training)
    deepspeed = training.get("deepspeed")
    if deepspeed is not None:
        from numadapter.integrations.launch import load_deepspeed_config

        try:
            load_deepspeed_config(deepspeed)
        except (ValueError, TypeError) as exc:
            raise RecipeError(f"{recipe.source}: `training.deepspeed`: {exc}") from exc
    neutral = {"bf16": False, "fp16": False, "tf32": None, "deepspeed": None, "use_cpu": True}
    recipe.training_args(**{key: value for key, value in neutral.items() if key in init_fields(
        training_class(recipe.adapter.task_type))})  # fmt: skip
    return recipe
