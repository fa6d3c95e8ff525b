"""The generation gates of the head swept on a trained adapter (``python -m eval_harness.suite run --gate-sweep``).

After training, the held-out prompts are answered once per setting of the gates that decide, at generation, whether
the head writes a number or the LM writes it in digits (``fone_head_min_confidence``, ``fone_head_digit_check``,
``fone_expression_check``): exact match, mean absolute error, how many answers the head wrote and the equations the
answers write (`numadapter.evaluation.equation_score`), so one training run measures every gate. The settings are put
on the adapter's config for the sweep and put back after it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any


def _switch(text: str) -> bool:
    """``"true"`` / ``"false"`` (or 1 / 0, any case) -> a bool; anything else is refused."""
    value = text.strip().lower()
    if value not in ("true", "false", "1", "0"):
        raise ValueError(f"{text!r} is no switch: write true or false")
    return value in ("true", "1")


GATES = {"fone_head_min_confidence": float, "fone_head_digit_check": int, "fone_expression_check": _switch}
# a field a setting does not name: the library's default
DEFAULTS = {"fone_head_min_confidence": 0.0, "fone_head_digit_check": 0, "fone_expression_check": True}


def parse_settings(text: str) -> list[dict[str, Any]]:
    """``"fone_head_digit_check=0;fone_head_digit_check=2,fone_head_min_confidence=0.5"`` -> one dict per setting
    (``;`` between settings, ``,`` between the fields of one; every field not named at its default, `DEFAULTS`; each
    field read by `numadapter.integrations.command_line.parse_settings` with its reader in `GATES`)."""
    from numadapter.integrations import command_line

    settings = []
    for part in (p.strip() for p in text.split(";")):
        if part:
            fields = command_line.parse_settings(
                part.split(","), GATES, flag="--gate-sweep", form="gate=number", example="fone_head_digit_check=2",
                error=argparse.ArgumentTypeError,
            )  # fmt: skip
            settings.append({**DEFAULTS, **fields})
    return settings


def _configs(model: Any, ntok: Any) -> list[Any]:
    """Every config object generation may read a gate from: the adapter's (PEFT's) and the tokenizer's."""
    found = [ntok.config, *getattr(model, "peft_config", {}).values()]
    return [c for i, c in enumerate(found) if all(c is not other for other in found[:i])]


def sweep(
    prompts: Sequence[str], references: Sequence[str], max_new_tokens: int, settings: Sequence[dict[str, Any]]
) -> Callable[[Any, Any], dict[str, Any]]:
    """``after(model, ntok) -> {"gate_sweep": [...]}``: per setting, the metrics of `prompts` against `references`
    (`numadapter.evaluation.answer_metrics`), how many answers the head wrote, and every answer with the
    confidences of the numbers the head wrote (to see which wrong answers it was sure of)."""
    from numadapter import generate
    from numadapter.evaluation import answer_metrics, equation_score

    def after(model: Any, ntok: Any) -> dict[str, Any]:
        configs = _configs(model, ntok)
        before = [{name: getattr(c, name, DEFAULTS[name]) for name in GATES} for c in configs]
        points = []
        model.eval()
        try:
            for setting in settings:
                for config in configs:
                    for name, value in setting.items():
                        setattr(config, name, value)
                out = generate(model, ntok, list(prompts), max_new_tokens=max_new_tokens, return_dict=True)
                completions = list(out.completions)
                metrics = answer_metrics(completions, references)
                by_head = sum(any(c is not None for c in row) for row in out.confidences)
                answers = [{"completion": c, "reference": r, "confidences": conf}
                           for c, r, conf in zip(completions, references, out.confidences)]  # fmt: skip
                point = {"exact_match": metrics["exact_match"], "mae": metrics["mae"], "answered": metrics["answered"],
                         "head_written": by_head, **equation_score(completions), "answers": answers}  # fmt: skip
                points.append({**setting, **point})
                print(f"{setting}: exact {metrics['exact_match']:.1%}, MAE {metrics['mae']:.1f}, {by_head} answers "
                      f"by the head, equations {point['equations_right']}/{point['equations_written']} right",
                      flush=True)  # fmt: skip
        finally:
            for config, values in zip(configs, before):
                for name, value in values.items():
                    setattr(config, name, value)
        return {"gate_sweep": points}

    return after
