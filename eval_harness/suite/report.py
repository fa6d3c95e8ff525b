"""The suite's report: ``<out>/README.md`` (one table per family) and ``bars.png`` / ``curves.png``, from the JSONs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from eval_harness.suite.families import FAMILIES

HEADER = """# Number task suite: SmolLM2-135M-Instruct, one table per family

Written by `python -m eval_harness.suite report` from the JSON records beside it (`<family>/<arm>.json`); how to run
the suite, what each family asks and how it is scored: `eval_harness/suite/__init__.py`. Exact match: the last number
of the answer equals the reference's. MAE: mean absolute error of those numbers; MAPE: mean absolute percentage error
(the score of the regression family `miles_km`). Facts retained: the share of held-out base-known facts the trained
adapter still answers (`eval_harness.suite.facts`). Steps and seconds: optimizer steps and training seconds (scoring
excluded) the arm got within its budget. Equations right (families of whole worked solutions): the share of the
equations the held-out answers write that are right (`numadapter.evaluation.equation_score`).
"""


def _number(value: Any, pattern: str) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, pattern)


def _row(r: dict[str, Any], equations: bool = False, within: bool = False) -> str:
    """One arm's table row; with `equations` an "equations right" cell after the curve, with `within` (a regression
    family) the share of answers within 1% of the reference."""
    final = r["final"]
    curve = " / ".join(f"{p['exact_match']:.0%}" for p in r["curve"])
    budget = f"{r['seconds_budget']:g} s" if r.get("seconds_budget") else f"{r['steps']} steps"
    return (
        f"| {r['arm']} | {final['exact_match']:.1%} | {_number(final['mae'], '.3g')} | "
        f"{_number(final.get('mape'), '.2f')} | {_number(r.get('facts_retained'), '.0%')} | "
        f"{r.get('steps_done', final['step'])} | {final['seconds']:.0f} | {budget} | {curve} |"
        + (f" {_equations(r)} |" if equations else "")
        + (f" {_number(final.get('within_1pct'), '.0%')} |" if within else "")
    )


def _equations(r: dict[str, Any]) -> str:
    """``"93% (186 / 200)"``: the share of the answers' equations that are right, or ``-`` without a score."""
    if "equations_share" not in r:
        return "-"
    return f"{r['equations_share']:.0%} ({r['equations_right']} / {r['equations_written']})"


def load(out: Path) -> list[dict[str, Any]]:
    """Every arm record under ``<out>/<family>/`` (files with an ``arm`` and a ``curve``)."""
    records = [json.loads(p.read_text()) for p in sorted(out.glob("*/*.json"))]
    return [r for r in records if "arm" in r and "curve" in r]


def report(out: Path) -> str:
    """Writes ``<out>/README.md`` and the plots; returns the markdown."""
    records = load(out)
    lines = [HEADER]
    families = sorted({r["task"] for r in records}, key=lambda f: list(FAMILIES).index(f) if f in FAMILIES else 99)
    lines += overview(records, families, out)
    for name in families:
        rows = [r for r in records if r["task"] == name]
        by_error = name in FAMILIES and FAMILIES[name].scoring == "error"
        rows.sort(key=lambda r: (r["final"].get("mape") or math.inf) if by_error else -r["final"]["exact_match"])
        description = FAMILIES[name].description if name in FAMILIES else ""
        equations = any("equations_share" in r for r in rows)
        lines += [f"## {name}", "", description + (" (ranked by MAPE)" if by_error else ""), "",
                  "| arm | exact match | MAE | MAPE % | facts retained | steps | training s | budget | curve |"
                  + (" equations right |" if equations else "") + (" within 1% |" if by_error else ""),
                  "|---|---|---|---|---|---|---|---|---|" + ("---|" if equations else "")
                  + ("---|" if by_error else "")]  # fmt: skip
        lines += [_row(r, equations, by_error) for r in rows] + [""]
    text = "\n".join(lines)
    out.mkdir(parents=True, exist_ok=True)
    (out / "README.md").write_text(text)
    if records:
        _plots(records, families, out)
    return text


def overview(records: list[dict[str, Any]], families: list[str], out: Path) -> list[str]:
    """One row per family: the share of its answers FoNE's context head can form (``coverage.json``, written by
    ``python -m eval_harness.suite coverage``) and every arm's final score (exact match; MAPE for a regression
    family), the best in bold."""
    path = out / "coverage.json"
    coverage = json.loads(path.read_text()) if path.exists() else {}
    arms = sorted({r["arm"] for r in records})
    lines = ["## Overview", "", "| family | the context head can form (sums / with products / by pointer) | "
             + " | ".join(arms)
             + " |", "|---|---|" + "---|" * len(arms)]  # fmt: skip
    for name in families:
        by_error = name in FAMILIES and FAMILIES[name].scoring == "error"
        found = {r["arm"]: r["final"] for r in records if r["task"] == name}
        scores = {a: (found[a].get("mape") if by_error else found[a]["exact_match"]) for a in arms if a in found}
        valid = [v for v in scores.values() if v is not None and not math.isnan(v)]
        best = (min(valid) if by_error else max(valid)) if valid else None
        cells = []
        for arm in arms:
            value = scores.get(arm)
            text = "-" if value is None else (f"{value:.2f} MAPE" if by_error else f"{value:.1%}")
            cells.append(f"**{text}**" if value is not None and value == best and len(valid) > 1 else text)
        shares = [coverage.get(name, {}).get(key) for key in ("share", "share_with_products", "share_by_pointer")]
        formed = " / ".join(_number(share, ".0%") for share in shares if share is not None) or _number(None, ".0%")
        lines.append(f"| {name} | {formed} | " + " | ".join(cells) + " |")
    return lines + [""]


def _plots(records: list[dict[str, Any]], families: list[str], out: Path) -> None:
    """``bars.png``: the final score per family and arm; ``curves.png``: exact match against training seconds."""
    from eval_harness.report import pyplot

    plt = pyplot()

    arms = sorted({r["arm"] for r in records})
    fig, axes = plt.subplots(len(families), 1, figsize=(max(6, 1.2 * len(arms)), 2.2 * len(families)), squeeze=False)
    for axis, name in zip(axes[:, 0], families):
        by_error = name in FAMILIES and FAMILIES[name].scoring == "error"
        found = {r["arm"]: r["final"] for r in records if r["task"] == name}
        values = [found[a].get("mape", math.nan) if by_error else found[a]["exact_match"] for a in arms if a in found]
        axis.bar([a for a in arms if a in found], values)
        axis.set(title=name, ylabel="MAPE %" if by_error else "exact match")
        if not by_error:
            axis.set_ylim(0, 1)
    fig.tight_layout()
    fig.savefig(out / "bars.png", dpi=90)
    plt.close(fig)
    columns = min(4, len(families))
    rows = math.ceil(len(families) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4 * columns, 3 * rows), squeeze=False)
    for axis, name in zip(axes.flat, families):
        for r in (r for r in records if r["task"] == name):
            axis.plot([p["seconds"] for p in r["curve"]], [p["exact_match"] for p in r["curve"]], marker=".",
                      label=r["arm"])  # fmt: skip
        axis.set(title=name, xlabel="training seconds", ylabel="exact match", ylim=(0, 1))
        axis.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / "curves.png", dpi=90)
    plt.close(fig)
