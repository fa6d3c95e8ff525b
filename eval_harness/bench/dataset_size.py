"""Prepared-dataset size: numbers stored sparsely (one entry per number) vs densely (one row per token).

The data is the ``data_size`` experiment's (6-digit decimal addition, ``fone_decimal_add_6``, the train split of
seed 0) as the product path feeds it (`eval_harness.product.product_dataset`: ``prompt`` / ``completion``), prepared
with `numadapter.prepare_dataset` and the number tokenizer of each method (the from-scratch digits tokenizer, the
task's digit places). "sparse" is what `prepare_dataset` stores (`numadapter.schema`: ``number_positions`` ``[N]``,
``number_digits`` ``[N, P]`` int8, ...); "dense" is the same rows in numadapter 0.1.0's per-token form
(``num_mask``, ``num_digits`` ``[T, P]``, ``num_sign``, ``num_values``, ``number_group``, with the types `datasets`
infers for them, as 0.1.0 wrote them), rebuilt by the collator's own densification (`numadapter.schema.dense_rows`),
which gives both forms the same batches (``tests/numadapter/data/test_sparse_rows.py``).

Sizes: the bytes of the Arrow table (``Dataset.data.nbytes``), of ``Dataset.save_to_disk``, and of the number columns
alone (Arrow), per method, each with the dense / sparse ratio. Besides the numbers, ``completion_mask`` is stored as
int8 now (it was int64); ``input_ids`` are int32 in both.

Run: ``python -m eval_harness.bench.dataset_size [--examples 3200] [--methods fone,xval,digits_agg] [--json out]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from typing import Any

from eval_harness.bench.common import write_json

TASK = "fone_decimal_add_6"
DENSE_COLUMNS = ("num_mask", "num_digits", "num_sign", "num_values", "number_group")


def number_tokenizer(method_name: str, examples: list, workdir: str) -> Any:
    """The method's `NumberTokenizer` as the harness builds it from scratch (`eval_harness.runner`: digits
    tokenizer, the task's places, xVal's normalisation fitted on the training numbers)."""
    from eval_harness import metrics
    from eval_harness.arms import get_method
    from eval_harness.arms.encode import number_places, numbers_of
    from eval_harness.arms.models import _number_config, scratch_tokenizer
    from numadapter import NumberTokenizer

    method = get_method(method_name)
    values = [float(abs(metrics.target_value(text) or 0)) for text in numbers_of(examples)]
    config = _number_config(method, "scratch", number_places(examples), values, {}, {}, product=True)
    tokenizer = scratch_tokenizer(method.tokenizer, os.path.join(workdir, f"tokenizer-{method.tokenizer}"))
    return NumberTokenizer(tokenizer, config)


def dense_dataset(prepared: Any, places: int) -> Any:
    """`prepared` (sparse rows) in 0.1.0's dense per-token columns, types inferred by `datasets` as 0.1.0's were."""
    import datasets

    from numadapter.schema import SPAN_FIELD, SPARSE_FIELDS, dense_rows

    rows = []
    for i, example in enumerate(prepared):
        dense = dense_rows(example, "", len(example["input_ids"]), places, f"example {i}")
        kept = {key: value for key, value in example.items() if key not in (*SPARSE_FIELDS, SPAN_FIELD)}
        rows.append({**kept, **{key: dense[key] for key in DENSE_COLUMNS}})
    return datasets.Dataset.from_list(rows)


def sizes(dataset: Any) -> dict[str, Any]:
    """Arrow table bytes, ``save_to_disk`` bytes and the Arrow bytes of each column."""
    table = dataset.data.table
    with tempfile.TemporaryDirectory(prefix="dataset-size-") as path:
        dataset.save_to_disk(path)
        disk = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path) for f in files)
    columns = {name: table.column(name).nbytes for name in table.column_names}
    return {"arrow_bytes": table.nbytes, "disk_bytes": disk, "columns": columns}


def measure(method_name: str, examples: list, workdir: str) -> dict[str, Any]:
    """Both forms' sizes for one method."""
    from eval_harness.product import product_dataset
    from numadapter import prepare_dataset
    from numadapter.schema import SPAN_FIELD, SPARSE_FIELDS

    ntok = number_tokenizer(method_name, examples, workdir)
    prepared = prepare_dataset(product_dataset(examples), ntok)
    sparse, dense = sizes(prepared), sizes(dense_dataset(prepared, ntok.config.num_places))
    dense["number_bytes"] = sum(dense["columns"][name] for name in DENSE_COLUMNS)
    sparse["number_bytes"] = sum(sparse["columns"][name] for name in (*SPARSE_FIELDS, SPAN_FIELD))
    return {
        "method": method_name,
        "encoding": ntok.config.encoding,
        "places": ntok.config.num_places,
        "examples": len(prepared),
        "tokens": sum(len(ids) for ids in prepared["input_ids"]),
        "numbers": sum(len(p) for p in prepared["number_positions"]),
        "dense": dense,
        "sparse": sparse,
        "ratio_arrow": dense["arrow_bytes"] / sparse["arrow_bytes"],
        "ratio_disk": dense["disk_bytes"] / sparse["disk_bytes"],
        "ratio_numbers": dense["number_bytes"] / sparse["number_bytes"],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=3200, help="training examples of the task (data_size: 3200)")
    parser.add_argument("--methods", default="fone,xval,digits_agg", help="numadapter methods of eval_harness")
    parser.add_argument("--json", default=None, help="write the result here")
    args = parser.parse_args(argv)
    from eval_harness.tasks.registry import get_task

    examples = get_task(TASK).generate("train", args.examples, seed=0)
    with tempfile.TemporaryDirectory(prefix="dataset-size-") as workdir:
        runs = [measure(name, examples, workdir) for name in args.methods.split(",")]
    print(f"{TASK}, {args.examples} training examples, prepared by numadapter.prepare_dataset (prompt/completion)")
    print(f"{'method':<12} {'tokens':>7} {'numbers':>7} {'dense Arrow':>12} {'sparse Arrow':>12} {'ratio':>6} "
          f"{'dense disk':>11} {'sparse disk':>11} {'ratio':>6} {'number columns':>21} {'ratio':>6}")  # fmt: skip
    for run in runs:
        dense, sparse = run["dense"], run["sparse"]
        columns = f"{dense['number_bytes']:,} / {sparse['number_bytes']:,}"
        print(f"{run['method']:<12} {run['tokens']:>7} {run['numbers']:>7} {dense['arrow_bytes']:>12,} "
              f"{sparse['arrow_bytes']:>12,} {run['ratio_arrow']:>5.2f}x {dense['disk_bytes']:>11,} "
              f"{sparse['disk_bytes']:>11,} {run['ratio_disk']:>5.2f}x {columns:>21} "
              f"{run['ratio_numbers']:>5.2f}x")  # fmt: skip
    result = {"task": TASK, "examples": args.examples, "runs": runs}
    write_json(result, args.json)
    return result


if __name__ == "__main__":
    main()
