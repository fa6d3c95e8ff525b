"""The parts of a result file that do not depend on training: metrics, data statistics, samples, environment.

`eval_harness.runner` assembles one result per run from these; `write_json` writes it as strict JSON (`clean`),
as `eval_harness.bench` writes its ``bench.json``.
"""

from __future__ import annotations

import json
import math
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from eval_harness import metrics as M
from eval_harness.arms.encode import numbers_of
from eval_harness.arms.models import Built
from eval_harness.arms.predict import Predictions
from eval_harness.tasks.base import Example, canonical_number

RESULT_SCHEMA = "eval_harness.result/1"
SAMPLES = 8  # sample predictions per split in a result
MAX_ERRORS = 50  # wrong predictions kept per split (the first ones, in test order)


def number_stats(built: Built, examples: Sequence[Example]) -> dict[str, Any]:
    """Tokens per number of `examples` under the method's codec, and the largest number with its token count."""
    numbers = numbers_of(examples)
    largest = max(numbers, key=lambda text: M.target_value(text) or 0)
    return {
        "tokens_per_number": M.tokens_per_number(numbers, built.codec.number_tokens),
        "max_number": largest,
        "tokens_max_number": len(built.codec.number_tokens(largest)),
    }


def split_metrics(predictions: Predictions, examples: Sequence[Example]) -> dict[str, dict[str, Any]]:
    """Exact match, MAE, R^2, MAPE and CER of one split (a metric that cannot be computed records its error)."""
    targets = [e.target for e in examples]
    out: dict[str, dict[str, Any]] = {}
    out["exact_match"] = M.exact_match(predictions.texts, targets).as_dict()
    for name, fn in (("mae", M.mae), ("r2", M.r2), ("mape", M.mape)):
        try:
            out[name] = fn(predictions.values, targets).as_dict()
        except ValueError as err:  # e.g. R^2 of constant targets, non-numeric targets
            out[name] = {"name": name, "value": math.nan, "error": str(err)}
    # CER on canonical number texts: digit errors, not formatting ("419.15" vs "419.150" is no error).
    canonical_predictions = []
    for text in predictions.texts:
        parsed = M.parse_number(text)
        if parsed is None:
            canonical_predictions.append("")
        elif -64 <= parsed.value.adjusted() <= 64:
            canonical_predictions.append(canonical_number(parsed.value))
        else:  # e.g. "5e999999": its canonical text would have a million digits; its surface form is the error
            canonical_predictions.append(parsed.text)
    canonical_targets = [canonical_number(v) if (v := M.target_value(t)) is not None else t for t in targets]
    out["cer"] = M.cer(canonical_predictions, canonical_targets).as_dict()
    return out


def environment(device: str) -> dict[str, Any]:
    """Versions, platform, threads, device name and git commit, for the result file."""
    import peft
    import transformers

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "device": device,
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        env["device_name"] = torch.cuda.get_device_name(torch.device(device))
    else:
        env["device_name"] = platform.processor() or platform.machine()
    return {**env, **git_commit()}


def git_commit() -> dict[str, str]:
    """``{"git_commit": <hash>}`` of the checkout this package runs from, ``{}`` where it has no ``.git`` directory
    to read (the result files and the benchmarks' ``bench.json`` record which code made them)."""
    try:
        head = Path(__file__).resolve().parents[1] / ".git" / "HEAD"
        ref = head.read_text().strip()
        return {"git_commit": (head.parent / ref[5:]).read_text().strip() if ref.startswith("ref: ") else ref}
    except OSError:
        return {}


def samples(examples: Sequence[Example], preds: Predictions) -> list[dict[str, str]]:
    """The first `SAMPLES` examples with their predictions."""
    pairs = zip(examples[:SAMPLES], preds.texts[:SAMPLES])
    return [{"prompt": e.prompt, "target": e.target, "prediction": p} for e, p in pairs]


def clean(value: Any) -> Any:
    """JSON-safe copy: non-finite floats become None (strict JSON has no NaN), tuples lists, objects dicts."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [clean(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    if hasattr(value, "__dict__"):
        return clean(vars(value))
    return str(value)


def write_json(path: Path, value: Any) -> None:
    """Writes `value` to `path` as strict JSON (`clean`), indented by 2, with a final newline: the one writer of the
    runner's result files and the benchmarks' ``bench.json``."""
    path.write_text(json.dumps(clean(value), indent=2, allow_nan=False) + "\n", encoding="utf-8")


def errors(examples: Sequence[Example], preds: Predictions, limit: int = MAX_ERRORS) -> list[dict[str, str]]:
    """The first `limit` examples whose prediction is not an exact match (`eval_harness.metrics.exact_match`)."""
    wrong = []
    for example, text in zip(examples, preds.texts):
        if M.exact_match([text], [example.target]).value < 1.0:
            wrong.append({"prompt": example.prompt, "target": example.target, "prediction": text})
            if len(wrong) == limit:
                break
    return wrong


__all__ = [
    "RESULT_SCHEMA", "clean", "environment", "errors", "git_commit", "number_stats", "samples", "split_metrics",
    "write_json",
]  # fmt: skip
