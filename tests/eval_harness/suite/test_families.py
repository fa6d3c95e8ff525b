"""eval_harness.suite.families: seeded, disjoint splits whose answers a second computation here confirms."""

from __future__ import annotations

import ast
import re
from decimal import ROUND_HALF_UP, Decimal

import pytest

from eval_harness.suite.families import FAMILIES, Family, family_rows
from numadapter.numbers import find_numbers

GENERATED = [name for name, f in FAMILIES.items() if f.draw is not None]

# units by their own factors, written out again here (not imported from the generator)
FACTORS = {("km", "m"): 1000, ("m", "cm"): 100, ("kg", "g"): 1000, ("L", "mL"): 1000, ("h", "min"): 60,
           ("min", "s"): 60, ("days", "h"): 24, ("weeks", "days"): 7, ("ft", "in"): 12, ("yd", "ft"): 3}  # fmt: skip
SMALL = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen "
                                    "fourteen fifteen sixteen seventeen eighteen nineteen".split())}  # fmt: skip
DECADES = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}


def _words(text: str) -> int:
    """English words to an integer: a parser of its own (the generator only writes numbers as words)."""
    total = current = 0
    for word in text.replace("-", " ").split():
        if word in SMALL:
            current += SMALL[word]
        elif word in DECADES:
            current += DECADES[word]
        elif word == "hundred":
            current *= 100
        elif word == "thousand":
            total, current = total + current * 1000, 0
        else:
            raise AssertionError(f"unexpected word {word!r} in {text!r}")
    return total + current


def _evaluate(node: ast.AST) -> int:
    """The value of an arithmetic expression tree of integers and + - *."""
    if isinstance(node, ast.Constant):
        return node.value
    assert isinstance(node, ast.BinOp), ast.dump(node)
    left, right = _evaluate(node.left), _evaluate(node.right)
    return {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right}[type(node.op)]


def _ledger(prompt: str) -> int:
    opening = int(re.search(r"Opening balance (\d+)\.", prompt).group(1))
    moves = re.findall(r"\d\) (deposit|withdrawal) (\d+)", prompt)
    assert 1 <= len(moves) <= 5 and re.search(r"Account \d+, \d{4}-\d\d-\d\d\.", prompt)
    return opening + sum(int(v) if kind == "deposit" else -int(v) for kind, v in moves)


def _answer(name: str, prompt: str) -> Decimal:
    """The answer recomputed from the prompt alone."""
    d = [Decimal(x) for x in re.findall(r"\d+(?:\.\d+)?", prompt)]
    if name in ("copy", "copy_decimal"):
        return Decimal(re.fullmatch(r"Repeat the number ([\d.]+):", prompt).group(1))
    if name == "sums":
        return d[0] + d[1]
    if name == "maxmin":
        return (max if prompt.startswith("max(") else min)(d)
    if name == "ledger":
        return Decimal(_ledger(prompt))
    if name == "powers_of_ten":
        return d[0] * d[1] if " * " in prompt else d[0] / d[1]
    if name == "units":
        amount, source, target = re.fullmatch(r"Convert (\d+) (\w+) to (\w+):", prompt).groups()
        return Decimal(int(amount) * FACTORS[source, target])
    if name in ("times_one_digit", "k_by_k"):
        return d[0] * d[1]
    if name == "percent":
        return d[0] * d[1] / 100
    if name == "divmod":
        return Decimal(int(d[0]) // int(d[1]) if "quotient" in prompt else int(d[0]) % int(d[1]))
    if name == "words":
        return Decimal(_words(re.fullmatch(r"Write in digits: ([a-z -]+)\.", prompt).group(1)))
    if name in ("expression", "expression_scratchpad"):
        return Decimal(_evaluate(ast.parse(re.fullmatch(r"Compute (.+?)( step by step)?:", prompt).group(1)).body[0]
                                 .value))  # fmt: skip
    if name == "miles_km":
        return (d[0] * Decimal("1.609344")).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    if name == "fahrenheit_celsius":
        return ((d[0] - 32) * 5 / 9).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    if name in ("worked_line", "sums_chat"):
        return _line(prompt) if name == "worked_line" else d[0] + d[1]
    if name == "worked_solution":
        return _solution(prompt)
    raise AssertionError(f"no check for family {name}")


def _solution(prompt: str) -> Decimal:
    """A worked_solution question solved from its own numbers (its steps are checked in test_worked_solution.py)."""
    question = prompt.removeprefix("Question: ").removesuffix("\nAnswer:")
    money = r"\$([\d,]+(?:\.\d\d)?)"
    found = {
        "shop": rf"buys (\d+) \w+ at {money} each(?: and (\d+) \w+ at {money} each)?\. \w+ pays with {money}\.",
        "people": r"had ([\d,]+) people in \d+\. Over the next \d+ years ([\d,]+) babies .* and ([\d,]+) people",
        "sale": rf"costs {money}\. It is on sale for (\d+)% off\.(?: \w+ also pays {money} for delivery)?",
        "speed": r"\w+ \w+ ([\d.]+) \w+ in (\d+) hours at a steady speed\. .* in (\d+) minutes",
        "machine": r"makes (\d+) \w+ per minute\. It runs (\d+) hours a day for (\d+) days\.",
        "fruit": r"picked (\d+) \w+\. \w+ gave (\d+) to a friend and sold (\d+) .* baked (\d+) pies with (\d+)",
        "wage": rf"for {money} an hour, (\d+) hours a week\.(?: (\d+)% of the pay goes to taxes\.)? .* (\d+) weeks\?",
        "trip": rf"for (\d+) students(?:, | and )(\d+) teachers(?: and (\d+) parents)? costs {money} in all",
    }
    kind, match = next((k, m) for k, pattern in found.items() if (m := re.search(pattern, question)))
    v = [Decimal(x.replace(",", "")) if x else Decimal(0) for x in match.groups()]
    if kind == "shop":
        return v[4] - v[0] * v[1] - v[2] * v[3]
    if kind == "people":
        now = v[0] + v[1] - v[2]
        regions = re.search(r"live in (\d+) regions", question)
        return now / int(regions.group(1)) if regions else now * int(re.search(r"Now (\d+)%", question)[1]) / 100
    if kind == "sale":
        return v[0] * (100 - v[1]) / 100 + v[2]
    if kind == "speed":
        return v[0] / v[1] * v[2] / 60
    if kind == "machine":
        return v[0] * v[1] * 60 * v[2]
    if kind == "fruit":
        return v[0] - v[1] - v[2] - v[3] * v[4]
    if kind == "wage":
        return v[0] * v[1] * v[3] * (100 - v[2]) / 100
    each = v[3] / (v[0] + v[1] + v[2])
    return each * v[0] if "students pay together" in question else each


def _line(prompt: str) -> Decimal:
    """The value of the expression before a worked line's final "=", left to right ("30%" is 30/100)."""
    written = re.search(r"((?:[\d,.]+%?\s*[-+*/]\s*)+[\d,.]+%?)\s*=$", prompt).group(1)
    terms = re.findall(r"([-+*/]?)\s*([\d,.]+)(%?)", written)
    value = Decimal(0)
    for operator, number, percent in terms:
        operand = Decimal(number.replace(",", "")) / (100 if percent else 1)
        value = {"": operand, "+": value + operand, "-": value - operand, "*": value * operand,
                 "/": value / operand if operator == "/" else 0}[operator]  # fmt: skip
    return value


def test_at_least_twelve_families_cover_the_issue():
    assert len(FAMILIES) >= 12
    assert [f.name for f in FAMILIES.values() if f.scoring == "error"] == [
        "miles_km", "fahrenheit_celsius", "sst_forecast"
    ]  # fmt: skip


@pytest.mark.parametrize("name", GENERATED)
def test_rows_are_seeded_disjoint_and_right(name):
    train, held = family_rows(name, 300, 100, seed=5)
    assert (train, held) == family_rows(name, 300, 100, seed=5)
    assert train != family_rows(name, 300, 100, seed=6)[0]
    prompts = [r["prompt"] for r in train], [r["prompt"] for r in held]
    assert len(set(prompts[0])) == 300 and len(set(prompts[1])) == 100 and not set(prompts[0]) & set(prompts[1])
    for row in train + held:
        assert row["completion"].startswith(" ") and re.search(r"\d$", row["completion"])
        spans = find_numbers(row["completion"])
        assert spans[-1].exact.to_decimal() == _answer(name, row["prompt"]), row


def test_scratchpad_steps_are_each_right():
    for row in family_rows("expression_scratchpad", 0, 200, seed=1)[1]:
        steps, answer = re.fullmatch(r" (.+)\. Answer: (\d+)", row["completion"]).groups()
        for step in steps.split(", "):
            left, result = step.split(" = ")
            assert _evaluate(ast.parse(left).body[0].value) == int(result), row
        assert int(result) == int(answer)


@pytest.mark.parametrize("name", GENERATED)
def test_every_number_fits_the_declared_places_and_xval_clip(name):
    found: Family = FAMILIES[name]
    train, held = family_rows(name, 500, 0, seed=0)
    for row in train:
        for span in find_numbers(row["prompt"] + row["completion"]):
            exact = span.exact
            assert len(exact.int_digits) <= found.int_digits, (span.text, row)
            assert len(exact.frac_digits) <= found.frac_digits, (span.text, row)
            assert abs(exact.to_decimal()) / Decimal(found.xval_scale) <= 5, (span.text, row)
    assert found.arm_config("xval")["xval_scale"] == found.xval_scale
    assert "xval_scale" not in found.arm_config("fone")


def test_unknown_family_and_too_many_rows_are_clear_errors(monkeypatch):
    with pytest.raises(ValueError, match="unknown family 'totals'.*copy"):
        family_rows("totals", 1, 1, seed=0)
    three = Family("three", "3 prompts", lambda rng: (f"{rng.randint(1, 3)} =", " 1"), 1)
    monkeypatch.setitem(FAMILIES, "three", three)
    assert len(family_rows("three", 2, 1, seed=0)[1]) == 1
    with pytest.raises(ValueError, match="'three': only 1 distinct prompts outside the other split.*2 asked"):
        family_rows("three", 2, 2, seed=0)
    with pytest.raises(ValueError, match="eval_harness.suite.facts"):
        family_rows("facts", 1, 1, seed=0)
