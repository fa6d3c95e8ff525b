"""Reports from result files: one markdown file with a table per experiment, and PNG accuracy plots.

`build_report(results_dir)` reads every ``*.json`` result under `results_dir` (written by `eval_harness.runner`)
and writes ``report.md`` plus, per experiment, ``<experiment>_accuracy_vs_train_size.png`` when it has several
training sizes, ``<experiment>_accuracy_vs_model_size.png`` when it has several model sizes, and, when its runs
validated every few steps (``step_curve``), a table of those points and ``<experiment>_curve.png`` (validation exact
match against steps and against training minutes).

Time ratios (the FoNE paper's Table 1) are computed only between runs trained in lockstep (same group, see
`eval_harness.runner`): for each epoch, method time / reference time of the same epoch, then the median over
epochs, so both sides of every ratio were measured under the same machine load. The reference is ``fone`` when
present. Load averages (1 minute) during the epochs are printed next to the timings.

Several seeds (`eval_harness.presets.Experiment.seeds`): runs that differ only in the seed are summarised by
`aggregate` as mean +- sample standard deviation (n - 1 in the denominator) over the seeds of every metric of every
test split, in a table above the per-seed rows; the plots show the mean with the standard deviation as error bars.
Tasks with several test splits (e.g. NTL's interpolation "test" and "test_extrapolation") get a row per split.

Runs of the product train path (``train_path="product"``, `eval_harness.product`) are labelled ``method (product)``
and kept apart from the harness loop's runs of the same method (cells, lockstep groups, plot series), so one
results directory can hold both side by side.

Plots need matplotlib (``pip install -c constraints.txt matplotlib``); without it the markdown is still written
and the missing plots are named in it.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eval_harness.records import RESULT_SCHEMA

REFERENCE = "fone"
METRICS = ("exact_match", "mae", "r2", "mape", "cer")
# (column title, digits, scale) of each metric in the tables
METRIC_COLUMNS = {
    "exact_match": ("EM %", 2, 100.0),
    "mae": ("MAE", 4, 1.0),
    "r2": ("R^2", 4, 1.0),
    "mape": ("MAPE %", 3, 1.0),
    "cer": ("CER %", 2, 1.0),
}


def pyplot() -> Any:
    """matplotlib's ``pyplot`` on the Agg backend (the reports only write PNG files; no display needed). Raises
    ImportError without matplotlib, which a report skips its plots for."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def load_results(results_dir: str | Path) -> list[dict[str, Any]]:
    """Every result dict under `results_dir` (recursively), sorted by experiment, model, training size, method."""
    out = []
    for path in sorted(Path(results_dir).rglob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(data, dict) and data.get("schema") == RESULT_SCHEMA:
            data["_path"] = str(path)
            out.append(data)
    return sorted(out, key=_sort_key)


def run_label(r: dict[str, Any]) -> str:
    """The method's name, with `` (product)`` for a run of the product train path."""
    return r["method"] + (" (product)" if r.get("train_path") == "product" else "")


def _sort_key(r: dict[str, Any]) -> tuple:
    c = r["config"]
    return (r["experiment"], c.get("model_size") or 0, c["train_size"], run_label(r), r["seed"])


def _fmt(value: Any, digits: int = 2, scale: float = 1.0) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value * scale:,.{digits}f}"


def _metric(r: dict[str, Any], name: str, split: str = "test") -> float | None:
    metrics = r["metrics"] if split == "test" else r.get("extra_splits", {}).get(split, {}).get("metrics", {})
    value = metrics.get(name, {}).get("value")
    return None if value is None or not math.isfinite(float(value)) else float(value)


def _splits(results: Sequence[dict[str, Any]]) -> list[str]:
    """The split "test", then every extra test split of `results` in first-appearance order."""
    out = ["test"]
    for r in results:
        out += [split for split in r.get("extra_splits", {}) if split not in out]
    return out


def _split_label(split: str, splits: Sequence[str]) -> str:
    return "test (interpolation)" if split == "test" and "test_extrapolation" in splits else split


def _mean_std(values: Sequence[float]) -> dict[str, Any]:
    """``{"mean", "std", "n"}`` of `values` (std: sample standard deviation, None below 2 values)."""
    if not values:
        return {"mean": None, "std": None, "n": 0}
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else None,
        "n": len(values),
    }


def _cell_key(r: dict[str, Any]) -> tuple:
    c = r["config"]
    return (r["experiment"], r["regime"], c.get("model_size"), c.get("base"), c["train_size"], run_label(r))


def aggregate(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean and standard deviation over seeds of every metric of every test split, per table cell.

    A cell is one (experiment, regime, model size, base, training size, method): runs in it differ only in the
    seed. Values that are missing or not finite (e.g. R^2 of constant targets) are left out of that metric's mean
    and counted out of its ``n``.

    Args:
        results: result dicts (`load_results`).

    Returns:
        One dict per cell, in first-appearance order: ``experiment``, ``method``, ``train_size``, ``model_size``,
        ``regime``, ``seeds`` (sorted), ``params`` (total parameters of the first run),
        ``metrics`` (``{split: {metric: {"mean", "std", "n"}}}``, splits "test" then the extra ones), and
        ``train_s`` (``{"mean", "std", "n"}`` of the training seconds).
    """
    cells: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        cells[_cell_key(r)].append(r)
    out = []
    for members in cells.values():
        first = members[0]
        metrics = {}
        for split in _splits(members):
            metrics[split] = {}
            for name in METRICS:
                values = [v for r in members if (v := _metric(r, name, split)) is not None]
                metrics[split][name] = _mean_std(values)
        out.append(
            {
                "experiment": first["experiment"],
                "method": run_label(first),
                "train_size": first["config"]["train_size"],
                "model_size": first["config"].get("model_size"),
                "regime": first["regime"],
                "seeds": sorted(r["seed"] for r in members),
                "params": first["model"]["params"]["total"] if "model" in first else None,
                "metrics": metrics,
                "train_s": _mean_std([float(r["timing"]["train_s"]) for r in members if "timing" in r]),
            }
        )
    return out


def _fmt_mean_std(stats: dict[str, Any], digits: int, scale: float) -> str:
    text = _fmt(stats["mean"], digits, scale)
    if stats["std"] is not None:
        text += " ± " + _fmt(stats["std"], digits, scale)
    return text


def _model_label(r: dict[str, Any]) -> str:
    if r["regime"] == "adapter":
        return "LoRA on base"
    params = r["model"]["params"]["total"]
    return f"{r['config']['model_size']} ({params / 1e6:.2f}M)"


def _aggregate_table(cells: list[dict[str, Any]]) -> list[str]:
    """Markdown rows of mean ± std over seeds, one row per cell and test split."""
    names = [METRIC_COLUMNS[m][0] for m in METRICS]
    header = "| method | train size | model (params) | split | seeds | " + " | ".join(names) + " | train s |"
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for cell in cells:
        if cell["regime"] == "adapter":
            model = "LoRA on base"
        else:
            model = f"{cell['model_size']} ({(cell['params'] or 0) / 1e6:.2f}M)"
        splits = list(cell["metrics"])
        for split, metrics in cell["metrics"].items():
            row = [cell["method"], f"{cell['train_size']:,}", model, _split_label(split, splits)]
            row.append(", ".join(str(seed) for seed in cell["seeds"]))
            row += [_fmt_mean_std(metrics[m], METRIC_COLUMNS[m][1], METRIC_COLUMNS[m][2]) for m in METRICS]
            row.append(_fmt_mean_std(cell["train_s"], 1, 1.0))
            lines.append("| " + " | ".join(row) + " |")
    return lines


def _splits_table(results: list[dict[str, Any]]) -> list[str]:
    """Markdown rows of every metric per run and test split (tables whose task has several test splits)."""
    names = [METRIC_COLUMNS[m][0] for m in METRICS]
    header = "| method | train size | model (params) | seed | split | n | " + " | ".join(names) + " |"
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    splits = _splits(results)
    for r in results:
        for split in splits:
            if split == "test":
                n = r["data"]["n_test"]
            elif split in r.get("extra_splits", {}):
                n = r["extra_splits"][split]["n_test"]
            else:
                continue
            row = [run_label(r), f"{r['config']['train_size']:,}", _model_label(r), str(r["seed"])]
            row += [_split_label(split, splits), f"{n:,}"]
            row += [_fmt(_metric(r, m, split), METRIC_COLUMNS[m][1], METRIC_COLUMNS[m][2]) for m in METRICS]
            lines.append("| " + " | ".join(row) + " |")
    return lines


def _group_key(r: dict[str, Any]) -> tuple:
    c = r["config"]
    return (r["experiment"], c.get("model_size"), c.get("base"), c["train_size"], r["seed"], r.get("train_path"))


def paired_ratios(results: Sequence[dict[str, Any]], reference: str = REFERENCE) -> dict[str, dict[str, float]]:
    """Per method of one lockstep group: median over epochs of (epoch time / reference epoch time), test-time ratio.

    Returns:
        ``{method: {"epoch_ratio": ..., "test_ratio": ...}}``; empty without the reference method.
    """
    by_method = {run_label(r): r for r in results}
    ref = by_method.get(reference)
    if ref is None:
        return {}
    out = {}
    for name, r in by_method.items():
        if reference not in r["timing"].get("lockstep_with", []):
            continue
        pairs = [a / b for a, b in zip(r["timing"]["epoch_s"], ref["timing"]["epoch_s"]) if b > 0]
        out[name] = {
            "epoch_ratio": statistics.median(pairs) if pairs else math.nan,
            "test_ratio": r["timing"]["test_s"] / ref["timing"]["test_s"] if ref["timing"]["test_s"] > 0 else math.nan,
        }
    return out


HEADER = (
    "| method | train size | model (params) | seed | EM % | MAE | R^2 | MAPE % | CER % | tokens/number "
    "| max-number tokens | seq len | epoch s (median) | train s | train ex/s | test s | test ex/s "
    "| epoch time / FoNE | test time / FoNE |"
)


def _table(results: list[dict[str, Any]]) -> list[str]:
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        groups[_group_key(r)].append(r)
    lines = [HEADER, "|" + "---|" * (HEADER.count("|") - 1)]
    for members in groups.values():
        ratios = paired_ratios(members)
        for r in members:
            t, d = r["timing"], r["data"]
            ratio = ratios.get(run_label(r), {})
            lines.append(
                "| "
                + " | ".join(
                    [
                        run_label(r),
                        f"{r['config']['train_size']:,}",
                        _model_label(r),
                        str(r["seed"]),
                        _fmt(_metric(r, "exact_match"), 2, 100.0),
                        _fmt(_metric(r, "mae"), 4),
                        _fmt(_metric(r, "r2"), 4),
                        _fmt(_metric(r, "mape"), 3),
                        _fmt(_metric(r, "cer"), 2),
                        _fmt(d["tokens_per_number"], 2),
                        str(d["tokens_max_number"]),
                        _fmt(d["seq_len_mean"], 1),
                        _fmt(t["epoch_s_median"], 2),
                        _fmt(t["train_s"], 1),
                        _fmt(t["train_examples_per_s"], 0),
                        _fmt(t["test_s"], 2),
                        _fmt(t["test_examples_per_s"], 0),
                        _fmt(ratio.get("epoch_ratio"), 2) + ("x" if ratio else ""),
                        _fmt(ratio.get("test_ratio"), 2) + ("x" if ratio else ""),
                    ]
                )
                + " |"
            )
    return lines


def _setup_line(results: list[dict[str, Any]]) -> str:
    r = results[0]
    c, env = r["config"], r["environment"]
    loads = [x for res in results for x in res["timing"].get("load_avg_per_epoch", [])]
    load = f"{min(loads):.2f}-{max(loads):.2f}" if loads else "n/a"
    lrs = sorted({f"{run_label(res)}={res['config']['lr']:g}" for res in results})
    lr_text = f"{c['lr']:g}" if len({res["config"]["lr"] for res in results}) == 1 else ", ".join(lrs)
    seeds = sorted({res["seed"] for res in results})
    seed_text = f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {', '.join(map(str, seeds))}"
    extra = _splits(results)[1:]
    extra_text = f" per split (splits: test, {', '.join(extra)})" if extra else ""
    threads = sorted({res["environment"]["torch_threads"] for res in results})
    thread_text = f"{threads[0]} torch thread{'s' if threads[0] != 1 else ''}"
    if len(threads) > 1:  # runs made with different settings: each result's `environment` has its own
        thread_text = f"{' or '.join(map(str, threads))} torch threads (per run: its `environment`)"
    head = sorted({run_label(res) for res in results if res["data"].get("train_format") == "head"})
    format_text = (
        f" Trained on the prompts alone, the head at the last prompt position on the answer (the FoNE paper's format, "
        f"seq len = prompt): {', '.join(head)}; the other methods on prompt + answer + eos."
        if head
        else ""
    )
    budget = f"{c['epochs']} epochs"
    if any(res["config"].get("max_steps") for res in results):  # exact step budgets (RunSpec.max_steps)
        steps = sorted({f"{run_label(res)} {res['config'].get('max_steps')}" for res in results})
        budget = f"optimizer steps per run: {', '.join(steps)}"
    return (
        f"task `{r['task']}`, regime {r['regime']}, {budget}, batch {c['batch_size']}, lr {lr_text} "
        f"({c['schedule']}, warmup {c['warmup']:g}), weight decay {c['weight_decay']:g}, {seed_text}, "
        f"{r['data']['n_test']:,} test examples{extra_text}; device {env['device']} ({env.get('device_name', '')}), "
        f"{thread_text}, load average (1 min) during epochs {load}; "
        f"prediction: {'; '.join(sorted({run_label(res) + ': ' + res['prediction_path'] for res in results}))}."
        f"{format_text}"
    )


def _plot(results: list[dict[str, Any]], axis: str, path: Path, title: str) -> bool:
    try:
        plt = pyplot()
    except ImportError:
        return False
    series: dict[tuple, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        c = r["config"]
        if axis == "train_size":
            key, x = (run_label(r), c.get("model_size")), c["train_size"]
        else:
            key, x = (run_label(r), c["train_size"]), r["model"]["params"]["total"] / 1e6
        em = _metric(r, "exact_match")
        if em is not None:
            series[key][x].append(100.0 * em)  # one value per seed
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    for (method, other), by_x in sorted(series.items(), key=lambda kv: str(kv[0])):
        xs = sorted(by_x)
        stats = [_mean_std(by_x[x]) for x in xs]
        label = f"{method} (model {other})" if axis == "train_size" else f"{method} (n={other:,})"
        if any(st["std"] is not None for st in stats):
            errors = [st["std"] or 0.0 for st in stats]
            seeds = max(st["n"] for st in stats)
            ax.errorbar(xs, [st["mean"] for st in stats], yerr=errors, marker="o", capsize=3,
                        label=f"{label}, mean ± std of {seeds} seeds")  # fmt: skip
        else:
            ax.plot(xs, [st["mean"] for st in stats], marker="o", label=label)
    if axis == "train_size":
        ax.set_xscale("log", base=2)
        ax.set_xlabel("training examples")
    else:
        ax.set_xlabel("parameters (M)")
    ax.set_ylabel("exact match on test (%)")
    ax.set_ylim(-2, 102)
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def _step_curve_table(results: list[dict[str, Any]]) -> list[str]:
    """Validation exact match (%) by optimizer step (`RunSpec.eval_every_steps`), a row per run; the last column is
    the training seconds at the last point."""
    curved = [r for r in results if r.get("step_curve")]
    steps = sorted({p["step"] for r in curved for p in r["step_curve"]})
    lines = ["| run | " + " | ".join(f"step {s}" for s in steps) + " | train s |",
             "|---|" + "---|" * (len(steps) + 1)]  # fmt: skip
    for r in curved:
        at = {p["step"]: p for p in r["step_curve"]}
        cells = [_fmt(at[s]["valid_exact_match"], 1, 100.0) if s in at else "" for s in steps]
        lines.append(f"| {run_label(r)} | " + " | ".join(cells) + f" | {_fmt(r['step_curve'][-1]['train_s'], 0)} |")
    return lines


def _plot_step_curve(results: list[dict[str, Any]], path: Path, title: str) -> bool:
    """Validation exact match against optimizer steps and against training seconds, one line per run."""
    try:
        plt = pyplot()
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.8), dpi=120, sharey=True)
    for r in sorted((r for r in results if r.get("step_curve")), key=run_label):
        points = r["step_curve"]
        ems = [100.0 * (p["valid_exact_match"] or 0.0) for p in points]
        label = f"{run_label(r)} (seed {r['seed']})"
        axes[0].plot([p["step"] for p in points], ems, marker="o", markersize=3, label=label)
        axes[1].plot([p["train_s"] / 60 for p in points], ems, marker="o", markersize=3, label=label)
    axes[0].set_xlabel("optimizer steps")
    axes[1].set_xlabel("training minutes (validation excluded)")
    axes[0].set_ylabel("validation exact match (%)")
    for ax in axes:
        ax.set_ylim(-2, 102)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def build_report(results_dir: str | Path, out: str | Path | None = None) -> Path:
    """Writes ``report.md`` (and the PNG plots next to it) for every result under `results_dir`.

    Args:
        results_dir: where the runner wrote its result files.
        out: the markdown path (default ``<results_dir>/report.md``).

    Returns:
        The markdown path.

    Raises:
        ValueError: no result files under `results_dir`.
    """
    results = load_results(results_dir)
    if not results:
        raise ValueError(f"no result files under {str(results_dir)!r}: run `python -m eval_harness run` first.")
    out = Path(out) if out is not None else Path(results_dir) / "report.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    by_experiment: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        by_experiment[r["experiment"]].append(r)
    presets = sorted({r["preset"] for r in results})
    lines = [f"# eval_harness results ({', '.join(presets)})", ""]
    lines.append(
        "EM: exact match; MAE / R^2 / MAPE on the predicted values; CER on canonical number texts; tokens/number: "
        "mean tokens per number of the test data written alone (FoNE Table 1 counts the largest number: "
        "max-number tokens); seq len: mean training sequence length (bos and eos included). Time ratios: median "
        "over epochs of the per-epoch ratio between methods trained in lockstep (same machine conditions)."
    )
    for name, members in by_experiment.items():
        lines += ["", f"## {name}", "", _setup_line(members), ""]
        seeds = sorted({r["seed"] for r in members})
        if len(seeds) > 1:
            lines += [f"Mean ± standard deviation over seeds {', '.join(map(str, seeds))} (sample std):", ""]
            lines += _aggregate_table(aggregate(members)) + ["", "Per seed:", ""]
        lines += _table(members)
        if len(_splits(members)) > 1:
            lines += ["", "Every test split, per seed:", ""] + _splits_table(members)
        if any(r.get("step_curve") for r in members):
            lines += ["", "Validation exact match (%) during training, by optimizer step:", ""]
            lines += _step_curve_table(members)
            png = out.parent / f"{name}_curve.png"
            if _plot_step_curve(members, png, f"{name}: validation exact match during training"):
                lines += ["", f"![{name}: validation curve]({png.name})"]
            else:
                lines += ["", f"(plot {png.name} not written: matplotlib is not installed)"]
        for axis, label in (("train_size", "training-data size"), ("model_size", "model size")):
            values = {
                r["config"]["train_size"] if axis == "train_size" else r["config"].get("model_size") for r in members
            }
            if len(values) < 2:
                continue
            png = out.parent / f"{name}_accuracy_vs_{axis}.png"
            if _plot(members, axis, png, f"{name}: exact match vs {label}"):
                lines += ["", f"![{name}: accuracy vs {label}]({png.name})"]
            else:
                lines += ["", f"(plot {png.name} not written: matplotlib is not installed)"]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


__all__ = ["aggregate", "build_report", "load_results", "paired_ratios", "run_label"]
