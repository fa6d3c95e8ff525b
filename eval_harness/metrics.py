"""Metrics of the four papers, computed on exact numbers.

- `exact_match`: accuracy on the exact numeric answer (FoNE Sec. 4.1, NTL Table 1, digit-aggregation Sec. 5):
  both sides are parsed as exact decimals, so "579.120" == "579.12" == "5.7912e2"; a prediction with no number
  is wrong; a target that is not a number falls back to string comparison (e.g. a label "yes").
  ``round_to`` rounds predictions first (FoNE: "as xVal predicts floating point numbers, predictions are
  rounded to calculate accuracy"): an int number of decimals or "target" (as many decimals as each target has
  as written), with ROUND_HALF_UP.
- `string_exact_match`: the stripped texts are equal ("579.120" != "579.12").
- `mae`: mean |y_hat - y|.
- `r2`: 1 - sum (y - y_hat)^2 / sum (y - mean(y))^2 (FoNE Appendix I; xVal Tables 2-3).
- `mape`: 100 * mean |y_hat - y| / |y|, in percent (NTL Table 5 reports "error percentages"). Examples whose
  target is 0 are undefined for MAPE: they are left out and counted in ``n_excluded``.
- `cer`: character error rate (digit-aggregation paper Sec. 5): Levenshtein distance between the predicted
  number's text and the target text, as a percentage of the target's length, averaged over examples (so it can
  exceed 100). A prediction without a number counts as the empty string (CER 100 for that example).
- `tokens_per_number`: mean tokenised length of number strings (FoNE Sec. 4.2 token counts).

Numeric metrics (mae, r2, mape) are computed over the examples whose prediction contains a number; the others are
counted in ``MetricResult.n_unparsed`` and never silently dropped from the report. When no example can be scored
the value is NaN. Differences are taken exactly (`Decimal`) and averaged in float64.

Reading the predicted number from generated text (`parse_number`): by default the FIRST number, because the
tasks ask for the answer right after the prompt and a model that keeps generating ("579.123\\n12+7=...") puts
the answer first; pass ``which="last"`` for chain-of-thought style outputs ("... so the answer is 42").
A number is: optional sign (-, +, U+2212) not preceded by a digit/letter (so in "12-5" the numbers are 12 and
5), ASCII digits optionally grouped by commas in threes ("1,234,567"), an optional fraction (".5" and "3."
both read, the trailing point in "3." is not part of the number), an optional exponent ("1.5e3"). Digits glued
to letters ("x2", "abc123") are not numbers. Predictions may also be int, float (via ``repr``; NaN/inf count as
unparsed) or `Decimal`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from decimal import MAX_EMAX, MIN_EMIN, ROUND_HALF_UP, Context, Decimal, DivisionByZero, InvalidOperation, localcontext
from typing import Literal

_NUMBER_RE = re.compile(
    r"""
    (?<![\w.])                                    # not glued to a word, a number or a point
    (?P<sign>[-+\u2212])?
    (?:
        (?P<int>[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])|[0-9]+)(?:\.(?P<frac>[0-9]+))?
      | \.(?P<frac_only>[0-9]+)
    )
    (?:[eE](?P<exp>[-+]?[0-9]+))?
    """,
    re.VERBOSE,
)
# Exact differences for any realistic number (only the final average is float64). An absurd exponent such as
# "1e99999999999" overflows to Infinity (a wrong, infinitely far prediction) instead of raising.
_EXACT = Context(prec=1000, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[InvalidOperation, DivisionByZero])

Number = str | int | float | Decimal


@dataclass(frozen=True)
class ParsedNumber:
    """A number found in text: its surface `text`, exact `value`, and character span [start, end)."""

    text: str
    value: Decimal
    start: int
    end: int


def _from_match(m: re.Match[str]) -> ParsedNumber:
    int_part = (m.group("int") or "0").replace(",", "")
    frac = m.group("frac") or m.group("frac_only") or ""
    value = Decimal(f"{int_part}.{frac}" if frac else int_part)
    if m.group("exp"):
        value = value.scaleb(int(m.group("exp")), _EXACT)
    if m.group("sign") in ("-", "\u2212"):
        value = -value
    return ParsedNumber(m.group(0), value, m.start(), m.end())


def parse_number(text: str, which: Literal["first", "last"] = "first") -> ParsedNumber | None:
    """The first (or last) number in `text`, or None when there is none (see the module docstring)."""
    if not isinstance(text, str):
        raise TypeError(f"parse_number expects a str, got {type(text).__name__} {text!r}.")
    if which not in ("first", "last"):
        raise ValueError(f"`which` must be 'first' or 'last', got {which!r}.")
    if which == "first":
        m = _NUMBER_RE.search(text)
        return _from_match(m) if m else None
    matches = list(_NUMBER_RE.finditer(text))
    return _from_match(matches[-1]) if matches else None


def _non_string_value(x: Number) -> Decimal | None:
    if isinstance(x, bool):
        raise TypeError(f"a bool is not a number prediction/target, got {x!r}.")
    if isinstance(x, int):
        return Decimal(x)
    if isinstance(x, float):
        return Decimal(repr(x)) if math.isfinite(x) else None
    if isinstance(x, Decimal):
        return x if x.is_finite() else None
    raise TypeError(f"expected str, int, float or Decimal, got {type(x).__name__} {x!r}.")


def prediction_value(prediction: Number, which: Literal["first", "last"] = "first") -> Decimal | None:
    """The exact value of a prediction (generated text or a number), or None when it holds no number."""
    if isinstance(prediction, str):
        parsed = parse_number(prediction, which)
        return parsed.value if parsed else None
    return _non_string_value(prediction)


def target_value(target: Number) -> Decimal | None:
    """The exact value of a target when the WHOLE stripped text is one number ("19", "-6.78"), else None."""
    if isinstance(target, str):
        m = _NUMBER_RE.fullmatch(target.strip())
        return _from_match(m).value if m else None
    return _non_string_value(target)


@dataclass(frozen=True)
class MetricResult:
    """A metric value with its bookkeeping; every example is in exactly one of scored / unparsed / excluded.

    Attributes:
        name: metric name.
        value: the metric (NaN when nothing could be scored).
        n_total: number of examples.
        n_scored: examples that entered the value (for exact_match: all of them).
        n_unparsed: predictions that contain no number (wrong for exact_match; left out of mae/r2/mape).
        n_excluded: examples left out for another documented reason (MAPE: target 0).
    """

    name: str
    value: float
    n_total: int
    n_scored: int
    n_unparsed: int
    n_excluded: int = 0

    def as_dict(self) -> dict[str, float | int | str]:
        return asdict(self)


def _check_lengths(name: str, predictions: Sequence, targets: Sequence) -> None:
    if len(predictions) != len(targets):
        raise ValueError(
            f"{name}: got {len(predictions)} predictions for {len(targets)} targets; pass one prediction per target."
        )
    if not targets:
        raise ValueError(f"{name}: got no examples; pass at least one (prediction, target) pair.")


def _numeric_targets(name: str, targets: Sequence[Number]) -> list[Decimal]:
    values = []
    for i, t in enumerate(targets):
        v = target_value(t)
        if v is None:
            raise ValueError(
                f"{name}: target {i} ({t!r}) is not a number; {name} needs numeric targets. "
                f"Use exact_match or string_exact_match for non-numeric answers."
            )
        values.append(v)
    return values


def _decimals(d: Decimal) -> int:
    exponent = d.as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


def exact_match(
    predictions: Sequence[Number],
    targets: Sequence[Number],
    *,
    which: Literal["first", "last"] = "first",
    round_to: int | Literal["target"] | None = None,
) -> MetricResult:
    """Fraction of predictions whose number equals the target exactly (see the module docstring).

    Args:
        predictions: generated texts or numbers.
        targets: answer texts or numbers.
        which: which number of a generated text is the prediction.
        round_to: round predictions to this many decimals, or to each target's decimals ("target"); None: no
            rounding.
    """
    _check_lengths("exact_match", predictions, targets)
    if round_to is not None and round_to != "target" and (isinstance(round_to, bool) or not isinstance(round_to, int)):
        raise ValueError(f"`round_to` must be None, an int number of decimals or 'target', got {round_to!r}.")
    correct = unparsed = 0
    for p, t in zip(predictions, targets):
        tv = target_value(t)
        if tv is None:  # non-numeric target: compare texts
            correct += str(p).strip() == str(t).strip()
            continue
        pv = prediction_value(p, which)
        if pv is None:
            unparsed += 1
            continue
        if round_to is not None:
            places = _decimals(tv) if round_to == "target" else round_to
            try:
                pv = pv.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP, context=_EXACT)
            except ArithmeticError:  # infinite or more than 1000 digits: cannot equal a target
                continue
        correct += pv == tv
    n = len(targets)
    return MetricResult("exact_match", correct / n, n, n, unparsed)


def string_exact_match(predictions: Sequence[str], targets: Sequence[str]) -> MetricResult:
    """Fraction of predictions whose stripped text equals the stripped target text."""
    _check_lengths("string_exact_match", predictions, targets)
    correct = sum(str(p).strip() == str(t).strip() for p, t in zip(predictions, targets))
    n = len(targets)
    return MetricResult("string_exact_match", correct / n, n, n, 0)


def _pairs(
    name: str, predictions: Sequence[Number], targets: Sequence[Number], which: Literal["first", "last"]
) -> tuple[list[tuple[Decimal, Decimal]], int, list[Decimal]]:
    """(prediction, target) value pairs with a parseable prediction, the number of unparsed predictions, and
    all target values."""
    _check_lengths(name, predictions, targets)
    target_values = _numeric_targets(name, targets)
    pairs, unparsed = [], 0
    for p, tv in zip(predictions, target_values):
        pv = prediction_value(p, which)
        if pv is None:
            unparsed += 1
        else:
            pairs.append((pv, tv))
    return pairs, unparsed, target_values


def mae(
    predictions: Sequence[Number], targets: Sequence[Number], *, which: Literal["first", "last"] = "first"
) -> MetricResult:
    """Mean absolute error over the predictions that contain a number."""
    pairs, unparsed, _ = _pairs("mae", predictions, targets, which)
    errors = [float(_EXACT.abs(_EXACT.subtract(pv, tv))) for pv, tv in pairs]
    value = math.fsum(errors) / len(errors) if errors else math.nan
    return MetricResult("mae", value, len(targets), len(pairs), unparsed)


def r2(
    predictions: Sequence[Number], targets: Sequence[Number], *, which: Literal["first", "last"] = "first"
) -> MetricResult:
    """Coefficient of determination R^2 over the predictions that contain a number (the mean is that of their
    targets). NaN when fewer than 2 are scored or their targets do not vary.

    Raises:
        ValueError: all targets are equal (R^2 is undefined; report MAE instead).
    """
    pairs, unparsed, all_targets = _pairs("r2", predictions, targets, which)
    if all(t == all_targets[0] for t in all_targets):
        raise ValueError(
            f"r2: all {len(targets)} targets equal {all_targets[0]}, so R^2 is undefined (zero variance). "
            f"Evaluate on targets that vary, or use mae."
        )
    value = math.nan
    if len(pairs) >= 2:
        with localcontext(_EXACT):
            mean = sum((tv for _, tv in pairs), Decimal(0)) / len(pairs)
            residuals = [float(pv - tv) for pv, tv in pairs]
            deviations = [float(tv - mean) for _, tv in pairs]
        ss_res = math.fsum(r * r for r in residuals)  # r * r overflows to inf; r ** 2 would raise
        ss_tot = math.fsum(d * d for d in deviations)
        if ss_tot > 0:
            value = 1.0 - ss_res / ss_tot
    return MetricResult("r2", value, len(targets), len(pairs), unparsed)


def mape(
    predictions: Sequence[Number], targets: Sequence[Number], *, which: Literal["first", "last"] = "first"
) -> MetricResult:
    """Mean absolute percentage error in percent; zero targets are excluded and counted in ``n_excluded``."""
    _check_lengths("mape", predictions, targets)
    target_values = _numeric_targets("mape", targets)
    ratios, unparsed, excluded = [], 0, 0
    for p, tv in zip(predictions, target_values):
        if tv == 0:
            excluded += 1
            continue
        pv = prediction_value(p, which)
        if pv is None:
            unparsed += 1
            continue
        ratios.append(float(_EXACT.divide(_EXACT.abs(_EXACT.subtract(pv, tv)), _EXACT.abs(tv))))
    value = 100.0 * math.fsum(ratios) / len(ratios) if ratios else math.nan
    return MetricResult("mape", value, len(targets), len(ratios), unparsed, excluded)


def levenshtein(a: str, b: str) -> int:
    """Minimum number of single-character insertions, deletions and substitutions turning `a` into `b`."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def cer(
    predictions: Sequence[Number], targets: Sequence[str], *, which: Literal["first", "last"] = "first"
) -> MetricResult:
    """Character error rate in percent (see the module docstring).

    Raises:
        ValueError: an empty target (its length is the denominator).
    """
    _check_lengths("cer", predictions, targets)
    rates, unparsed = [], 0
    for i, (p, t) in enumerate(zip(predictions, targets)):
        reference = str(t).strip()
        if not reference:
            raise ValueError(f"cer: target {i} is empty ({t!r}); CER divides by the target length.")
        if isinstance(p, str):
            parsed = parse_number(p, which)
            hypothesis = parsed.text if parsed else ""
        else:
            value = _non_string_value(p)
            hypothesis = "" if value is None else (repr(p) if isinstance(p, float) else str(p))
        unparsed += hypothesis == ""
        rates.append(100.0 * levenshtein(hypothesis, reference) / len(reference))
    return MetricResult("cer", math.fsum(rates) / len(rates), len(targets), len(targets), unparsed)


def tokens_per_number(numbers: Iterable[str], tokenize: Callable[[str], Sequence | Mapping]) -> float:
    """Mean number of tokens `tokenize` uses per number string.

    Args:
        numbers: number strings as they appear in the data, e.g. ["12345.6789", "7"].
        tokenize: text -> token ids/pieces, or -> a mapping with "input_ids" (a Hugging Face tokenizer call).
            Exclude special tokens, e.g. ``lambda s: tok.encode(s, add_special_tokens=False)``; note that
            SentencePiece tokenizers may add a word-start piece to a number tokenised on its own.

    Raises:
        ValueError: no numbers were given.
    """
    counts = []
    for number in numbers:
        tokens = tokenize(number)
        if isinstance(tokens, Mapping):
            tokens = tokens["input_ids"]
        counts.append(len(tokens))
    if not counts:
        raise ValueError("tokens_per_number: got no numbers; pass at least one number string.")
    return math.fsum(counts) / len(counts)


METRICS: dict[str, Callable[..., MetricResult]] = {
    "exact_match": exact_match,
    "string_exact_match": string_exact_match,
    "mae": mae,
    "r2": r2,
    "mape": mape,
    "cer": cer,
}


def compute_metrics(
    names: Iterable[str], predictions: Sequence[Number], targets: Sequence[Number]
) -> dict[str, MetricResult]:
    """Several metrics at once, e.g. ``compute_metrics(task.metrics, generated_texts, [e.target for e in ex])``.

    Raises:
        ValueError: an unknown metric name (the message lists the valid ones).
    """
    out = {}
    for name in names:
        if name not in METRICS:
            raise ValueError(f"Unknown metric {name!r}; valid metrics: {sorted(METRICS)}.")
        out[name] = METRICS[name](predictions, targets)
    return out


__all__ = [
    "METRICS",
    "MetricResult",
    "ParsedNumber",
    "cer",
    "compute_metrics",
    "exact_match",
    "levenshtein",
    "mae",
    "mape",
    "parse_number",
    "prediction_value",
    "r2",
    "string_exact_match",
    "target_value",
    "tokens_per_number",
]
