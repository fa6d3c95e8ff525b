"""Tokens per number and per table on numeric tables: digit-wise vs Llama-3-style subword vs FoNE / xVal.

The FoNE paper (Zhou et al., Sec. 4, "data efficiency") reports that a table of WikiTableQuestions takes 149.25 tokens
on average with FoNE against 329.7 with a digit-wise tokenizer (ratio 2.21). WikiTableQuestions is not available
offline, so this benchmark counts tokens on a seeded corpus of generated numeric tables (`make_tables`):

- each table is a markdown table: a header row of column names, a ``|---|`` separator row, then 3-8 data rows;
- it has 3-6 columns; the first is a ``Year`` (1950-2029) or an ``ID`` (1-999) column, the others are distinct
  named columns drawn per table, each of one kind, as in financial or statistics tables: ``count`` (integer
  0-9999), ``amount`` (thousands separators, 2 decimals, 1.00-9,999,999.99), ``change`` (signed, 1 decimal,
  -99.9-99.9), ``ratio`` (0.000-0.999), ``price`` (2 decimals, 0.01-999.99), ``big`` (integer 10000-99999999);
- every data cell holds exactly one number as `numadapter.find_numbers` reads it (header cells are words).

Three schemes count the tokens of the same tables (no special tokens):

- ``digits``: the digit-wise tokenizer of the harness (`numadapter.testing.toy` "digits": one token per digit);
- ``subword``: the harness's Llama-3-style subword tokenizer (Llama 3's split regex, digit runs cut left to right
  into groups of up to 3, every group one token: "2019" -> "201" "9");
- ``fone``: `NumberTokenizer` (``encoding="fone"``) over the digits tokenizer: one ``[NUM]`` per number (xVal
  tokenizes identically). With the default ``sign_policy="text"`` a minus sign stays a text token before ``[NUM]``.

Reported (means over the tables): whole-table tokens, the tokens of the numbers alone (each number's surface form
encoded on its own, as FoNE Table 1 counts them, summed per table) and tokens per number, with the ratios
``digits / fone`` and ``subword / fone``. The headline is the whole-table ratio digits / fone, the paper's measure
(its 149.25 tokens per table cannot be numbers alone, one [NUM] each, so they include the text); the corpus is not
WikiTableQuestions, so the paper's 2.21 is a reference, not a target. With the digits base the text between numbers
tokenizes identically under ``digits`` and ``fone``, so the whole-table difference equals the number-token
difference. Counting is deterministic: no timing here. Every table is checked to get exactly one ``[NUM]`` per
number found by `find_numbers`.

Run: ``python -m eval_harness.bench.table_tokens [--tables 200] [--seed 0] [--sign-policy text] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
from typing import Any

from eval_harness.bench.common import write_json

SCHEMES = ("digits", "subword", "fone")
PAPER_RATIO = 329.7 / 149.25  # FoNE paper, Sec. 4: digit-wise vs FoNE tokens per WikiTableQuestions table
COLUMN_NAMES = {
    "count": ("Units", "Orders", "Visitors", "Staff", "Cases", "Votes"),
    "amount": ("Revenue", "Cost", "Budget", "Assets", "Sales", "Debt"),
    "change": ("Change", "Growth", "Delta", "Return"),
    "ratio": ("Share", "Rate", "Ratio", "Yield"),
    "price": ("Price", "Fee", "Average", "Score"),
    "big": ("Population", "Volume", "Area", "Traffic"),
}
_COLUMNS = [(kind, name) for kind, names in COLUMN_NAMES.items() for name in names]


def _cell(kind: str, rng: random.Random) -> str:
    if kind == "year":
        return str(rng.randrange(1950, 2030))
    if kind == "id":
        return str(rng.randrange(1, 1000))
    if kind == "count":
        return str(rng.randrange(0, 10_000))
    if kind == "amount":  # exact integer arithmetic, no float rounding
        cents = rng.randrange(100, 10**9)
        return f"{cents // 100:,}.{cents % 100:02d}"
    if kind == "change":
        tenths = rng.randrange(-999, 1000)
        return f"{'-' if tenths < 0 else ''}{abs(tenths) // 10}.{abs(tenths) % 10}"
    if kind == "ratio":
        return f"0.{rng.randrange(0, 1000):03d}"
    if kind == "price":
        cents = rng.randrange(1, 100_000)
        return f"{cents // 100}.{cents % 100:02d}"
    return str(rng.randrange(10_000, 10**8))  # big


def make_tables(n_tables: int = 200, seed: int = 0) -> list[str]:
    """`n_tables` markdown tables of numbers (see the module docstring), deterministic for a given `seed`.

    Args:
        n_tables: how many tables.
        seed: seeds `random.Random`.

    Returns:
        The tables as text, rows joined by newlines.
    """
    if isinstance(n_tables, bool) or not isinstance(n_tables, int) or n_tables < 1:
        raise ValueError(f"`n_tables` must be a positive integer, got {n_tables!r}: pass e.g. --tables 200.")
    rng = random.Random(seed)
    tables = []
    for _ in range(n_tables):
        first = rng.choice(("year", "id"))
        columns = rng.sample(_COLUMNS, rng.randrange(2, 6))  # distinct names; kinds may repeat
        kinds = [first] + [kind for kind, _ in columns]
        header = ["Year" if first == "year" else "ID"] + [name for _, name in columns]
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for _ in range(rng.randrange(3, 9)):
            lines.append("| " + " | ".join(_cell(kind, rng) for kind in kinds) + " |")
        tables.append("\n".join(lines))
    return tables


def table_places(tables: list[str]) -> tuple[int, int]:
    """``(int_digits, frac_digits)``: the fewest digit places that hold every number of `tables` exactly."""
    from numadapter import find_numbers

    spans = [span for table in tables for span in find_numbers(table)]
    return max([1] + [len(s.exact.int_digits) for s in spans]), max([0] + [len(s.exact.frac_digits) for s in spans])


def build_encoders(workdir: str, sign_policy: str = "text", places: tuple[int, int] = (8, 4)) -> dict[str, Any]:
    """The three encoders (callables like a tokenizer), the FoNE one a `NumberTokenizer` over the digits tokenizer."""
    from eval_harness.arms.models import scratch_tokenizer
    from numadapter import NumberAdapterConfig, NumberTokenizer

    digits = scratch_tokenizer("digits", f"{workdir}/digits")
    subword = scratch_tokenizer("subword", f"{workdir}/subword")
    config = NumberAdapterConfig(
        encoding="fone",
        int_digits=places[0],
        frac_digits=places[1],
        sign_policy=sign_policy,
        out_of_range="text",
        fone_numbers="all",  # one [NUM] per number: what the table counts
    )
    base = scratch_tokenizer("digits", f"{workdir}/fone")  # its own copy: NumberTokenizer adds [NUM] to it
    for tokenizer in (digits, subword, base):
        tokenizer.model_max_length = 10**6  # counting only: no "longer than the maximum" warnings on big tables
    return {"digits": digits, "subword": subword, "fone": NumberTokenizer(base, config)}


def count_tokens(tables: list[str], encoders: dict[str, Any]) -> dict[str, Any]:
    """Per-table token counts of every scheme.

    Args:
        tables: table texts.
        encoders: scheme name -> tokenizer-like callable (``"fone"`` must be a `NumberTokenizer`).

    Returns:
        ``{"numbers": [per table], "table": {scheme: [per table]}, "number": {scheme: [per table]}}``: the count
        of numbers, the whole-table tokens and the tokens of the numbers encoded one by one.

    Raises:
        ValueError: a table whose ``[NUM]`` count differs from its number count (a number out of the range of
            ``int_digits`` / ``frac_digits`` stays text).
    """
    from numadapter import find_numbers

    fone = encoders["fone"]
    out: dict[str, Any] = {"numbers": [], "table": {s: [] for s in encoders}, "number": {s: [] for s in encoders}}
    for index, table in enumerate(tables):
        spans = find_numbers(table)
        out["numbers"].append(len(spans))
        for scheme, encoder in encoders.items():
            ids = encoder(table, add_special_tokens=False)["input_ids"]
            out["table"][scheme].append(len(ids))
            if scheme == "fone" and ids.count(fone.num_token_id) != len(spans):
                cfg = fone.config
                raise ValueError(
                    f"Table {index}: NumberTokenizer produced {ids.count(fone.num_token_id)} {cfg.num_token} tokens "
                    f"for {len(spans)} numbers found by find_numbers; numbers outside int_digits={cfg.int_digits}, "
                    f"frac_digits={cfg.frac_digits} stay text. Raise --int-digits / --frac-digits (or leave them "
                    "unset to fit the corpus)."
                )
            surfaces = [span.text for span in spans]
            encoded = encoder(surfaces, add_special_tokens=False)["input_ids"] if surfaces else []
            out["number"][scheme].append(sum(len(row) for row in encoded))
    return out


def run(
    *,
    n_tables: int = 200,
    seed: int = 0,
    sign_policy: str = "text",
    int_digits: int | None = None,
    frac_digits: int | None = None,
) -> dict[str, Any]:
    """Counts the tokens of the generated tables under every scheme; returns means and ratios.

    Args:
        n_tables: corpus size.
        seed: corpus seed.
        sign_policy: the FoNE tokenizer's ``sign_policy`` (``"text"``: "-" is a token before [NUM]; ``"feature"``).
        int_digits: FoNE ``int_digits`` (None: the fewest that hold the corpus).
        frac_digits: FoNE ``frac_digits`` (None: the fewest that hold the corpus).

    Returns:
        A dict with ``config``, ``corpus`` statistics, ``tokens_per_table`` / ``number_tokens_per_table`` /
        ``tokens_per_number`` (scheme -> mean) and their ``ratios`` (``digits/fone``, ``subword/fone``), and
        ``ratio``: the headline whole-table ratio digits / fone.
    """
    tables = make_tables(n_tables, seed)
    fit = table_places(tables)
    places = (fit[0] if int_digits is None else int_digits, fit[1] if frac_digits is None else frac_digits)
    with tempfile.TemporaryDirectory(prefix="table_tokens-") as workdir:
        encoders = build_encoders(workdir, sign_policy, places)
        counts = count_tokens(tables, encoders)
    n_numbers = sum(counts["numbers"])
    per_table = {s: statistics.fmean(v) for s, v in counts["table"].items()}
    number_per_table = {s: statistics.fmean(v) for s, v in counts["number"].items()}
    per_number = {s: sum(v) / n_numbers for s, v in counts["number"].items()}

    def ratios(means: dict[str, float]) -> dict[str, float]:
        return {f"{s}/fone": means[s] / means["fone"] for s in ("digits", "subword")}

    return {
        "config": {"n_tables": n_tables, "seed": seed, "sign_policy": sign_policy, "int_digits": places[0],
                   "frac_digits": places[1]},
        "corpus": {"numbers_per_table": n_numbers / n_tables, "chars_per_table": statistics.fmean(map(len, tables)),
                   "numbers": n_numbers},
        "tokens_per_table": per_table,
        "number_tokens_per_table": number_per_table,
        "tokens_per_number": per_number,
        "ratios": {"table": ratios(per_table), "numbers": ratios(number_per_table)},
        "ratio": per_table["digits"] / per_table["fone"],
        "paper_ratio": PAPER_RATIO,
    }  # fmt: skip


def _print(result: dict[str, Any]) -> None:
    print(f"config: {result['config']}")
    print(f"corpus: {result['corpus']}")
    print(f"  {'scheme':8s} {'tokens/table':>13s} {'number tokens/table':>20s} {'tokens/number':>14s}")
    for s in SCHEMES:
        print(
            f"  {s:8s} {result['tokens_per_table'][s]:13.2f} {result['number_tokens_per_table'][s]:20.2f} "
            f"{result['tokens_per_number'][s]:14.3f}"
        )
    for key in ("digits/fone", "subword/fone"):
        print(
            f"  {key:13s} whole table x{result['ratios']['table'][key]:.3f}, "
            f"numbers x{result['ratios']['numbers'][key]:.3f}"
        )
    print(f"  headline: tokens per table digits / fone = {result['ratio']:.3f} (FoNE paper: 329.7 / 149.25 = "
          f"{result['paper_ratio']:.2f} on WikiTableQuestions tables)")  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=200, help="number of generated tables")
    parser.add_argument("--seed", type=int, default=0, help="corpus seed")
    parser.add_argument("--sign-policy", default="text", choices=["text", "feature"], help="FoNE sign_policy")
    parser.add_argument("--int-digits", type=int, default=None, help="FoNE int_digits (default: fit the corpus)")
    parser.add_argument("--frac-digits", type=int, default=None, help="FoNE frac_digits (default: fit the corpus)")
    parser.add_argument("--json", default=None, help="also write the result dict to this JSON file")
    args = parser.parse_args(argv)
    result = run(
        n_tables=args.tables,
        seed=args.seed,
        sign_policy=args.sign_policy,
        int_digits=args.int_digits,
        frac_digits=args.frac_digits,
    )
    _print(result)
    write_json(result, args.json)
    return result


if __name__ == "__main__":
    main()
