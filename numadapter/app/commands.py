"""The entry points behind ``numadapter train | eval | export``: recipe -> model, data, trainer, metrics, export.

Everything heavy (torch, transformers, trl, datasets) is imported inside the functions, so ``numadapter --help`` and
importing this module stay fast.

- `load_base_model` / `load_tokenizer`: the base model from a local directory or a hub id (dtype, 4-bit QLoRA);
  `resolve_model` first turns a ``model.gguf_file`` into the directory it converts to (once, cached).
- `check_runnable`: what `train` checks before it loads anything (model sources, GGUF files, DeepSpeed, precision
  on this machine, local data files); `validate` (``numadapter validate``) runs the same function, so the two agree.
- `load_data`: ``datasets`` from local JSONL / CSV / Parquet files, a directory, a hub name, or the synthetic task.
- `train`: recipe -> ``numadapter.get_peft_model`` -> `NumberSFTTrainer` / `NumberSeq2SeqTrainer` (with DeepSpeed
  state from `numadapter.integrations.launch.prepare_distributed_state`) -> saved adapter (+ `NumberTokenizer`) ->
  optional merged export (not under ZeRO-3, where the offline command is printed instead). Under ZeRO-3 the base is
  loaded partitioned (``zero.Init``) unless accelerate's ``zero3_init_flag`` is false (`launch.partition_at_load`)
  or the base is a T5 with an LM head of its own (v1.1 / Flan-T5; transformers would tie it to the embedding).
- `evaluate`: generation on the evaluation set with `numadapter.generate`, scored by `numadapter.evaluation`
  (`answer_metrics`: exact match and mean absolute error of the last number of each answer against the reference's).
- `export`: `numadapter.export.export_checkpoint` (offline merge of a saved adapter).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

from numadapter.app.hub import check_model_sources, model_sources
from numadapter.app.recipe import (
    DATA_EXTENSIONS,
    SYNTHETIC_PREFIX,
    DataSettings,
    ModelSettings,
    Recipe,
    RecipeError,
    validate_recipe,
)
from numadapter.evaluation import AnswerMetrics, generate_answers


def resolve_model(settings: ModelSettings) -> ModelSettings:
    """`settings` with a ``gguf_file`` replaced by the float32 directory it converts to (`numadapter.convert_gguf`:
    converted once, then reused from the cache); other settings are returned as they are."""
    if settings.gguf_file is None:
        return settings
    from numadapter.checkpoints import convert_gguf

    directory = convert_gguf(os.path.join(settings.name_or_path, settings.gguf_file))
    return dataclasses.replace(settings, name_or_path=directory, gguf_file=None)


def load_tokenizer(settings: ModelSettings) -> Any:
    """The base tokenizer (``AutoTokenizer``) of `settings` (``tokenizer``, else ``name_or_path``)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(settings.tokenizer or settings.name_or_path, revision=settings.revision)


def load_base_model(settings: ModelSettings, seq2seq: bool) -> Any:
    """The base model of `settings`: float / bf16 / fp16, or 4-bit NF4 prepared for QLoRA.

    Args:
        settings: the `model` section.
        seq2seq: load with ``AutoModelForSeq2SeqLM`` (T5) instead of ``AutoModelForCausalLM``.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    from numadapter.checkpoints import resolve_dtype

    auto = AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM
    dtype = resolve_dtype(settings.dtype, "model.dtype")
    kwargs: dict[str, Any] = {"dtype": dtype or "auto", "revision": settings.revision}
    if settings.attn_implementation is not None:
        kwargs["attn_implementation"] = settings.attn_implementation
    if not settings.load_in_4bit:
        return auto.from_pretrained(settings.name_or_path, **kwargs)
    from numadapter.integrations.qlora import prepare_qlora_model, qlora_config

    storage = settings.bnb_4bit_quant_storage
    kwargs["quantization_config"] = qlora_config(
        resolve_dtype(settings.bnb_4bit_compute_dtype, "model.bnb_4bit_compute_dtype"),
        quant_storage=None if storage in (None, "uint8") else resolve_dtype(storage, "model.bnb_4bit_quant_storage"),
    )
    if not torch.cuda.is_available():
        kwargs["device_map"] = "cpu"
    return prepare_qlora_model(auto.from_pretrained(settings.name_or_path, **kwargs), gradient_checkpointing=False)


def check_data_file(source: str) -> None:
    """Raises `FileNotFoundError` for a local data file (by its extension, not a glob) that does not exist."""
    extension = os.path.splitext(source)[1].lower()
    if extension in DATA_EXTENSIONS and not any(ch in source for ch in "*?[") and not os.path.isfile(source):
        raise FileNotFoundError(f"data file {source!r} does not exist (paths are relative to {os.getcwd()!r}).")


def _load_source(source: str, split: str, subset: str | None) -> Any:
    import datasets

    extension = os.path.splitext(source)[1].lower()
    if extension in DATA_EXTENSIONS:
        check_data_file(source)
        return datasets.load_dataset(DATA_EXTENSIONS[extension], data_files=source, split="train")
    if os.path.isdir(source):
        if os.path.isfile(os.path.join(source, "state.json")) or os.path.isfile(
            os.path.join(source, "dataset_dict.json")
        ):
            loaded = datasets.load_from_disk(source)
            return loaded[split] if isinstance(loaded, datasets.DatasetDict) else loaded
        return datasets.load_dataset(source, subset, split=split)
    try:
        return datasets.load_dataset(source, subset, split=split)
    except Exception as exc:
        raise RecipeError(
            f"could not load the dataset {source!r} (split {split!r}): {type(exc).__name__}: {exc}. Give a local "
            f"file ({', '.join(DATA_EXTENSIONS)}), a directory, or a hub name (needs the network)."
        ) from exc


def load_data(settings: DataSettings, split: str) -> Any:
    """The training (``split="train"``) or evaluation (``"eval"``) dataset of `settings`, or None (no eval set).

    Args:
        settings: the `data` section.
        split: ``"train"`` or ``"eval"``.

    Returns:
        A ``datasets.Dataset`` or None.
    """
    import datasets

    if split not in ("train", "eval"):
        raise ValueError(f"`split` must be 'train' or 'eval', got {split!r}.")
    if split == "train":
        source, which, limit = settings.train, settings.train_split, settings.max_train_examples
    else:
        source = settings.eval if settings.eval is not None else (settings.train if settings.eval_split else None)
        which, limit = settings.eval_split or "train", settings.max_eval_examples
        if source is None:
            return None
    if source.startswith(SYNTHETIC_PREFIX):
        from numadapter.data.arithmetic import addition_examples

        count = settings.synthetic_examples if split == "train" else settings.synthetic_eval_examples
        seed = settings.seed if split == "train" else settings.seed + 1_000_003
        rows = addition_examples(count, settings.synthetic_min_digits, settings.synthetic_max_digits, seed)
        dataset = datasets.Dataset.from_list(rows)
    else:
        dataset = _load_source(source, which, settings.subset)
    if limit is not None and len(dataset) > limit:
        dataset = dataset.select(range(limit))
    return dataset


def _prompts_and_references(dataset: Any) -> tuple[list[str], list[str]]:
    columns = set(dataset.column_names)
    if not {"prompt", "completion"} <= columns:
        raise RecipeError(
            f"evaluation needs `prompt` + `completion` string columns (the answer to check is the completion's last "
            f"number), got columns {sorted(columns)}."
        )
    return list(dataset["prompt"]), list(dataset["completion"])


def _check_precision(training: dict[str, Any], launch: dict[str, Any]) -> None:
    """Refuses the precision settings this machine cannot train with, on the tests the training arguments apply."""
    from transformers.utils import is_torch_bf16_gpu_available, is_torch_tf32_available, is_torch_xla_available

    use_cpu = bool(training.get("use_cpu") or launch.get("use_cpu"))  # a CPU launch (DDP over gloo) sets use_cpu
    for key in ("bf16", "bf16_full_eval"):
        if training.get(key) and not use_cpu and not is_torch_bf16_gpu_available() and not is_torch_xla_available():
            raise RecipeError(
                f"`training.{key}=true` needs a GPU with bf16 (Ampere or newer), and this machine has none: on a "
                f"CPU-only machine set training.{key}=false training.use_cpu=true (or check a recipe meant for "
                "another machine with `numadapter validate --portable`)."
            )
    if training.get("tf32") and not is_torch_tf32_available():
        raise RecipeError(
            "`training.tf32=true` needs an Ampere or newer GPU, and this machine has none: set training.tf32=null."
        )


def check_runnable(recipe: Recipe) -> None:
    """What `train` checks before it loads anything, on this machine; ``numadapter validate`` runs it too.

    In order: the model sources (`numadapter.app.hub.check_model_sources`: local directories, ``model.gguf_file``,
    hub ids cached or reachable), the DeepSpeed config and package (``training.deepspeed`` or accelerate's), the
    precision settings (``bf16`` needs a bf16 GPU unless ``use_cpu``; ``tf32`` an Ampere GPU), and the local data
    files. Nothing is loaded or converted and no process state is created.

    Raises:
        RecipeError: a model source, DeepSpeed or precision setting this machine cannot run (names the key).
        FileNotFoundError: a local data file that does not exist.
    """
    import importlib.util

    from numadapter.integrations.launch import DEEPSPEED_INSTALL, launch_info, training_overrides

    check_model_sources(model_sources(recipe.model), recipe.model.revision)
    try:
        info = launch_info(recipe.training.get("deepspeed"))
    except (ValueError, TypeError) as exc:
        raise RecipeError(f"`training.deepspeed`: {exc}") from exc
    if info.deepspeed_config is not None and importlib.util.find_spec("deepspeed") is None:
        raise RecipeError(f"`training.deepspeed` is set but deepspeed is not installed: {DEEPSPEED_INSTALL}.")
    _check_precision(recipe.training, training_overrides(info))
    data = recipe.data
    for source in (data.train, data.eval):
        if source is not None and not source.startswith(SYNTHETIC_PREFIX):
            check_data_file(source)


def validate(path: str | os.PathLike, overrides: Sequence[str] = (), portable: bool = False) -> Recipe:
    """``numadapter validate``: `validate_recipe` (keys, types, values, training arguments, DeepSpeed JSON), then,
    unless `portable`, `check_runnable`: everything `train` checks on this machine before it loads the model.

    Args:
        path: the recipe YAML file.
        overrides: ``section.key=value`` strings.
        portable: skip the checks of this machine (for a recipe meant for another one: a GPU, a hub id).
    """
    recipe = validate_recipe(path, overrides)
    if not portable:
        check_runnable(recipe)
    return recipe


def _untied_t5(settings: ModelSettings) -> bool:
    """Whether the base is a T5 whose checkpoint has an LM head of its own (read from its config only)."""
    from transformers import AutoConfig

    from numadapter.tuner.patches import expects_untied_head

    return expects_untied_head(AutoConfig.from_pretrained(settings.name_or_path, revision=settings.revision))


def _is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def train(recipe: Recipe, print_fn: Callable[[str], None] = print) -> dict[str, Any]:
    """Trains the recipe's adapter, saves it (and the `NumberTokenizer`) to ``training.output_dir``, optionally
    evaluates and exports it.

    Returns:
        ``{"output_dir", "train_metrics", "eval_metrics" (or None), "export_dir" (or None)}``.
    """
    from transformers import set_seed

    from numadapter.integrations.launch import partition_at_load, prepare_distributed_state, zero3_enabled
    from numadapter.mapping import get_peft_model
    from numadapter.tokenization.tokenizer import NumberTokenizer
    from numadapter.training.seq2seq import NumberSeq2SeqTrainer
    from numadapter.training.sft import NumberSFTTrainer

    check_runnable(recipe)
    training = dict(recipe.training)
    deepspeed = training.pop("deepspeed", None)
    overrides = prepare_distributed_state(deepspeed)
    run = Recipe(**{**recipe.__dict__, "model": resolve_model(recipe.model), "training": training})
    tokenizer = load_tokenizer(run.model)
    # ZeRO-3 with the init flag (accelerate's zero3_init_flag; always under torchrun): the training arguments come
    # first and stay alive while loading, so from_pretrained partitions the base as it loads (zero.Init) and no
    # process holds the whole model. Otherwise the base is loaded first: a full copy per process, which DeepSpeed
    # partitions when training starts.
    partitioned = partition_at_load(overrides)
    if partitioned and recipe.seq2seq and _untied_t5(run.model):
        partitioned = False  # transformers would tie its own LM head to the embedding (patches.check_partitioned_head)
        if _is_main_process():
            print_fn(
                "Loading the T5 base whole in every process, not ZeRO-3 partitioned: its LM head has weights of its "
                "own, which transformers ties to the embedding when loading under zero.Init. DeepSpeed partitions "
                "it when training starts."
            )
    base = None if partitioned else load_base_model(run.model, recipe.seq2seq)
    args = run.training_args(**overrides)
    if base is None:
        base = load_base_model(run.model, recipe.seq2seq)
    set_seed(args.seed)  # the same initial adapter in every process and every run
    config = recipe.adapter
    model = get_peft_model(base, config, tokenizer=tokenizer)
    ntok = NumberTokenizer(tokenizer, config)
    if _is_main_process():
        model.print_trainable_parameters()
    train_data = load_data(recipe.data, "train")
    eval_data = load_data(recipe.data, "eval")
    if recipe.seq2seq:
        trainer = NumberSeq2SeqTrainer(
            model=model, args=args, train_dataset=train_data, eval_dataset=eval_data, processing_class=ntok,
            max_length=recipe.data.max_source_length, max_target_length=recipe.data.max_target_length,
        )  # fmt: skip
    else:
        trainer = NumberSFTTrainer(
            model=model, args=args, train_dataset=train_data, eval_dataset=eval_data, processing_class=ntok
        )
    result = trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
    trainer.save_model(args.output_dir)
    eval_metrics = None
    if eval_data is not None and _is_main_process() and not zero3_enabled():
        eval_metrics = _evaluate_model(trainer.model, ntok, eval_data, recipe, print_fn)
    export_dir = None
    if recipe.export.out_dir is not None:
        if zero3_enabled() and _is_main_process():
            print_fn(
                "Not exporting: PEFT cannot merge LoRA into ZeRO-3 partitioned weights. Export offline:\n"
                f"  numadapter export --adapter {args.output_dir} --base {run.model.name_or_path} "
                f"--out {recipe.export.out_dir}"
            )
        elif not zero3_enabled() and _is_main_process():
            from numadapter.export import export_merged

            export_dir = export_merged(trainer.model, ntok, recipe.export.out_dir, dtype=recipe.export.dtype)
            print_fn(f"Exported the merged model to {export_dir}")
    return {
        "output_dir": args.output_dir,
        "train_metrics": dict(result.metrics),
        "eval_metrics": eval_metrics,
        "export_dir": export_dir,
    }


def _evaluate_model(model: Any, ntok: Any, dataset: Any, recipe: Recipe, print_fn) -> dict[str, Any]:
    settings = recipe.eval
    if settings.max_examples is not None and len(dataset) > settings.max_examples:
        dataset = dataset.select(range(settings.max_examples))
    prompts, references = _prompts_and_references(dataset)
    metric = AnswerMetrics(settings.max_new_tokens, settings.batch_size)
    predictions = generate_answers(model, ntok, prompts, metric.max_new_tokens, metric.batch_size)
    metrics = metric(SimpleNamespace(texts=predictions, references=references))
    print_fn(
        f"eval: {metrics['examples']} examples, exact match {metrics['exact_match']:.1%}, mean absolute error "
        f"{metrics['mae']:.6g} ({metrics['answered']} answered with a number)"
    )
    path = settings.output_file or os.path.join(recipe.output_dir, "eval_results.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    samples = [{"prompt": p, "reference": r, "prediction": g} for p, r, g in zip(prompts, references, predictions)]
    with open(path, "w", encoding="utf-8") as file:
        json.dump({"metrics": metrics, "samples": samples[:50]}, file, indent=2)
    print_fn(f"metrics written to {path}")
    return metrics


def evaluate(
    recipe: Recipe,
    adapter: str | None = None,
    exported: str | None = None,
    print_fn: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Evaluates an adapter (default: ``training.output_dir``) or an exported model on the recipe's eval data.

    Args:
        recipe: the recipe (its `data`, `eval` and `model` sections are used).
        adapter: a saved adapter directory (None: ``training.output_dir``), loaded onto ``model.name_or_path``.
        exported: an export directory (`numadapter.export.export_merged`); used instead of the adapter.

    Returns:
        The metrics of `answer_metrics`.
    """
    dataset = load_data(recipe.data, "eval")
    if dataset is None:
        raise RecipeError(
            "the recipe has no evaluation data: set data.eval (a file, directory, hub name or synthetic:addition) "
            "or data.eval_split."
        )
    if exported is not None:
        from numadapter.export import load_exported

        model, ntok = load_exported(exported)
    else:
        from peft import PeftModel

        from numadapter.tokenization.tokenizer import CONFIG_NAME, NumberTokenizer
        from numadapter.tuner.registration import register

        register(force=True)
        check_model_sources(model_sources(recipe.model)[:1], recipe.model.revision)
        adapter = adapter or recipe.output_dir
        if not os.path.isfile(os.path.join(adapter, CONFIG_NAME)):
            raise FileNotFoundError(
                f"no {CONFIG_NAME} in {adapter!r}: pass the directory numadapter train saved the adapter to "
                "(--adapter DIR), or an export (--exported DIR)."
            )
        ntok = NumberTokenizer.from_pretrained(adapter)
        base = load_base_model(resolve_model(recipe.model), recipe.seq2seq)
        model = PeftModel.from_pretrained(base, adapter)
    return _evaluate_model(model, ntok, dataset, recipe, print_fn)


def export(
    adapter: str,
    out: str,
    base: str | None = None,
    tokenizer: str | None = None,
    dtype: str | None = None,
    print_fn: Callable[[str], None] = print,
) -> str:
    """`numadapter.export.export_checkpoint` with a message; returns the export directory."""
    from numadapter.export import export_checkpoint

    path = export_checkpoint(adapter, out, base=base, tokenizer=tokenizer, dtype=dtype)
    print_fn(f"Exported the merged model to {path} (load it with numadapter.export.load_exported({path!r})).")
    return path
