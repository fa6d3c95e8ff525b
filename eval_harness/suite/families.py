"""The suite's generated task families: one small seeded generator per family, and their registry.

Each generator draws one problem from a `random.Random` and returns ``(prompt, completion)``; the completion starts
with a space and ends with the answer, the number `numadapter.evaluation.answer_metrics` reads (the last one). The
answer is computed from the problem's own operands, so a held-out row never depends on the training rows.
`family_rows` draws the disjoint ``train`` and ``held-out`` splits. The base-known facts family lives in
`eval_harness.suite.facts` (its rows depend on what the base answers, not on a generator).

Every `Family` declares the number places its rows need (``int_digits``, ``frac_digits``: every number in a prompt or
completion fits them, so no number falls back to text) and an xVal scale (``xval_scale``: every value divided by it
lies within xVal's clip of 5), which `Family.arm_config` hands to the arms.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

from eval_harness.suite.regression import fahrenheit_celsius, sst_rows

Problem = tuple[str, str]


@dataclass(frozen=True)
class Family:
    """One task family.

    Attributes:
        name: the family's name on the command line.
        description: what a row asks, for the README.
        draw: one ``(prompt, completion)`` from a seeded generator (None for the facts family).
        int_digits, frac_digits: number places every number of a row fits (`NumberAdapterConfig` fields).
        xval_scale: values divided by this stay within [-5, 5] (xVal's clip).
        max_new_tokens: the most tokens an answer may take (digit arms write one token per digit).
        scoring: ``"exact"`` (exact match of the last number) or ``"error"`` (a regression family: MAE and MAPE).
        chat: the rows are trained as ``messages`` (the prompt a user turn, the answer the assistant's) and asked
            through the base's chat template, as a chat fine-tune is.
        load: ``load(n_train, n_eval, seed) -> (train rows, held-out rows)`` for a family of shipped public rows
            instead of a generator (`draw` None).
        equations: the answers are whole worked solutions: after training the run also scores the share of the
            equations they write that are right (`numadapter.evaluation.equation_score`), since a right last number can
            follow wrong steps.
    """

    name: str
    description: str
    draw: Callable[[random.Random], Problem] | None
    int_digits: int
    frac_digits: int = 0
    max_new_tokens: int = 12
    scoring: str = "exact"
    chat: bool = False
    equations: bool = False
    load: Callable[[int, int, int], tuple[list[dict[str, str]], list[dict[str, str]]]] | None = None

    @property
    def xval_scale(self) -> float:
        """The largest value a row may hold, over 5: every value / scale lies in [-5, 5]."""
        return 10.0**self.int_digits / 5.0

    def arm_config(self, encoding: str, fitted: bool = False) -> dict[str, float | int]:
        """`NumberAdapterConfig` fields this family sets on an arm of `encoding` (the scale only for xVal, and not
        where the arm lets the trainer fit it: `fitted`)."""
        fields: dict[str, float | int] = {"int_digits": self.int_digits, "frac_digits": self.frac_digits}
        if encoding == "xval" and not fitted:
            fields["xval_scale"] = self.xval_scale
        return fields


def text(value: Decimal | int) -> str:
    """A number as plain text: no exponent, no trailing fraction zeros (``Decimal("1.50")`` -> ``"1.5"``)."""
    written = format(Decimal(value).normalize(), "f")
    return "0" if written in ("-0", "0") else written


def _digits(rng: random.Random, low: int, high: int) -> int:
    """A number whose digit count is uniform in [low, high] (short and long numbers equally common)."""
    count = rng.randint(low, high)
    return rng.randrange(10 ** (count - 1) if count > 1 else 0, 10**count)


def copy_integer(rng: random.Random) -> Problem:
    value = _digits(rng, 7, 12)
    return f"Repeat the number {value}:", f" {value}"


def copy_decimal(rng: random.Random) -> Problem:
    whole, places = _digits(rng, 1, 6), rng.randint(1, 4)
    fraction = rng.randrange(10 ** (places - 1)) * 10 + rng.randint(1, 9)  # ends in 1-9
    written = f"{whole}.{fraction:0{places}d}"
    return f"Repeat the number {written}:", f" {written}"


def sums(rng: random.Random) -> Problem:
    """The quick start's task: ``a + b =`` with 3-4 digit operands."""
    a, b = _digits(rng, 3, 4), _digits(rng, 3, 4)
    return f"{a} + {b} =", f" {a + b}"


def max_min(rng: random.Random) -> Problem:
    values = [_digits(rng, 1, 6) for _ in range(rng.randint(3, 6))]
    which = rng.choice(["max", "min"])
    answer = max(values) if which == "max" else min(values)
    return f"{which}({', '.join(map(str, values))}) =", f" {answer}"


def ledger(rng: random.Random) -> Problem:
    """A balance after 1-5 deposits / withdrawals (2-6 operands), among an account id, a date and list numbers."""
    while True:
        opening = rng.randint(1000, 9999)
        changes = [(rng.choice(["deposit", "withdrawal"]), _digits(rng, 2, 3)) for _ in range(rng.randint(1, 5))]
        balance = opening + sum(v if kind == "deposit" else -v for kind, v in changes)
        if balance >= 0:
            break
    date = f"{rng.randint(2000, 2024)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    items = " ".join(f"{i}) {kind} {v}" for i, (kind, v) in enumerate(changes, 1))
    prompt = f"Account {rng.randint(10000, 99999)}, {date}. Opening balance {opening}. {items}. Closing balance:"
    return prompt, f" {balance}"


def powers_of_ten(rng: random.Random) -> Problem:
    while True:
        value = Decimal(rng.randint(1, 99999)).scaleb(-rng.randint(0, 2))
        power, times = 10 ** rng.randint(1, 3), rng.random() < 0.5
        answer = value * power if times else value / power
        if answer < 10**6 and -answer.normalize().as_tuple().exponent <= 4:
            return f"{text(value)} {'*' if times else '/'} {power} =", f" {text(answer)}"


UNITS = [("km", "m", 1000), ("m", "cm", 100), ("kg", "g", 1000), ("L", "mL", 1000), ("h", "min", 60),
         ("min", "s", 60), ("days", "h", 24), ("weeks", "days", 7), ("ft", "in", 12), ("yd", "ft", 3)]  # fmt: skip


def units(rng: random.Random) -> Problem:
    source, target, factor = rng.choice(UNITS)
    value = _digits(rng, 1, 3)
    return f"Convert {value} {source} to {target}:", f" {value * factor}"


def times_one_digit(rng: random.Random) -> Problem:
    a, b = _digits(rng, 2, 6), rng.randint(2, 9)
    return f"{a} * {b} =", f" {a * b}"


def k_by_k(rng: random.Random) -> Problem:
    k = rng.randint(2, 3)
    a, b = rng.randrange(10 ** (k - 1), 10**k), rng.randrange(10 ** (k - 1), 10**k)
    return f"{a} * {b} =", f" {a * b}"


def percent(rng: random.Random) -> Problem:
    share, whole = rng.randint(1, 99), _digits(rng, 1, 4)
    return f"{share}% of {whole} =", f" {text(Decimal(share * whole) / 100)}"


def quotient_remainder(rng: random.Random) -> Problem:
    a, b = _digits(rng, 3, 5), rng.randint(2, 99)
    which = rng.choice(["quotient", "remainder"])
    return f"{a} divided by {b}: {which} =", f" {a // b if which == 'quotient' else a % b}"


ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen " \
    "seventeen eighteen nineteen".split()  # fmt: skip
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def _words_below_1000(n: int) -> list[str]:
    words = [ONES[n // 100], "hundred"] if n >= 100 else []
    rest = n % 100
    if rest >= 20:
        words.append(TENS[rest // 10] + (f"-{ONES[rest % 10]}" if rest % 10 else ""))
    elif rest or not words:
        words.append(ONES[rest])
    return words


def in_words(n: int) -> str:
    """``n`` in [0, 999999] in English words, without "and": ``4206`` -> ``"four thousand two hundred six"``."""
    if not 0 <= n <= 999_999:
        raise ValueError(f"in_words covers 0 to 999999, got {n}: split larger numbers first.")
    thousands, rest = divmod(n, 1000)
    words = _words_below_1000(thousands) + ["thousand"] if thousands else []
    return " ".join(words + (_words_below_1000(rest) if rest or not words else []))


def words_to_digits(rng: random.Random) -> Problem:
    value = _digits(rng, 1, 6)
    return f"Write in digits: {in_words(value)}.", f" {value}"


def _expression(rng: random.Random) -> tuple[str, list[str], int]:
    """``((a op b) op c) [op d]`` with every partial result in [0, 10^6): the text, its steps and the value."""
    while True:
        value = rng.randint(1, 99)
        written, steps = str(value), []
        for _ in range(rng.randint(2, 3)):
            operand, symbol = rng.randint(1, 99), rng.choice("+-*")
            result = value + operand if symbol == "+" else value - operand if symbol == "-" else value * operand
            steps.append(f"{value} {symbol} {operand} = {result}")
            written, value = f"({written} {symbol} {operand})", result
            if not 0 <= value < 10**6:
                break
        else:
            return written[1:-1], steps, value


def expression(rng: random.Random) -> Problem:
    written, _, value = _expression(rng)
    return f"Compute {written}:", f" {value}"


def expression_scratchpad(rng: random.Random) -> Problem:
    written, steps, value = _expression(rng)
    return f"Compute {written} step by step:", f" {', '.join(steps)}. Answer: {value}"


MILE_KM = Decimal("1.609344")


def miles_to_km(rng: random.Random) -> Problem:
    miles = Decimal(rng.randint(1, 9999)) / 10
    km = (miles * MILE_KM).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return f"Convert {text(miles)} miles to km:", f" {text(km)}"


NAMES = ("Ann", "Ben", "Carla", "Dev", "Eli", "Fatima", "Gus", "Hana")
ITEMS = ("boxes", "tickets", "books", "shirts", "bags", "plants")


def _money(value: Decimal) -> str:
    """An amount as solutions write it: thousands separators, cents only where there are any."""
    return f"{value:,.2f}" if value != value.to_integral_value() else f"{int(value):,}"


def worked_line(rng: random.Random) -> Problem:
    """One line of a worked solution up to the number it computes, as public grade-school solutions write them:
    other numbers earlier in the line, thousands separators, currency, decimals, units, three operands and
    percentages (``x * 30% =``: a share no sum, product or quotient of the numbers written forms)."""
    name, items, day = rng.choice(NAMES), rng.choice(ITEMS), rng.randint(2, 28)
    kind = rng.randrange(8)
    if kind == 0:  # a price times a count, the price with cents
        count, price = rng.randint(2, 40), Decimal(rng.randint(100, 9999)) / 100
        line = f"On day {day}, {name} buys {count} {items} at ${_money(price)} each, so {count} * {_money(price)} ="
        return line, f" ${_money(count * price)}"
    if kind == 1:  # two amounts with thousands separators
        a, b = rng.randrange(1000, 500000, 500), rng.randrange(1000, 500000, 500)
        return f"In year {rng.randint(2, 9)} the total is {a:,}+{b:,}=", f" ${a + b:,}"
    if kind == 2:  # three operands
        a = rng.randint(60, 999)
        b, c = rng.randint(1, a // 2), rng.randint(1, a // 2)
        return f"{name} had {a} {items}, gave away {b} and sold {c}: {a}-{b}-{c}=", f" {a - b - c}"
    if kind == 3:  # a rate: an exact quotient with decimals
        minutes = rng.choice((20, 25, 40, 50, 60, 80))
        per = Decimal(rng.randint(1, 40)) / 10
        total = per * minutes
        return f"{name} reads {text(total)} pages in {minutes} minutes, so {text(total)}/{minutes} =", f" {text(per)}"
    if kind == 4:  # units
        hours = rng.randint(2, 72)
        return f"The trip takes {hours} hours, in minutes {hours} * 60 =", f" {hours * 60}"
    if kind == 5:  # a share written as a percentage
        whole, share = rng.randrange(20, 5000, 20), rng.choice((5, 10, 15, 20, 25, 30, 40, 50, 75))
        return (
            f"{name} saves {share}% of ${whole:,}, so {whole:,} * {share}% =",
            f" ${_money(Decimal(whole * share) / 100)}",
        )
    if kind == 6:  # half, written as a fraction times the amount
        whole = rng.randrange(2, 20000, 2)
        return f"Half of the {whole} {items} are sold on day {day}: 1/2 * {whole} =", f" {whole // 2}"
    a, b = rng.randint(10, 5000), rng.randint(10, 5000)  # a sum after other numbers in the line
    return f"Week {day}: {name} ran {a} m on Monday and {b} m on Friday, in metres {a} + {b} =", f" {a + b}"


_PAIRS = "Ann:She Ben:He Carla:She Dev:He Eli:He Fatima:She Gus:He Hana:She Ivan:He Julia:She Kofi:He Lena:She"
PEOPLE = [tuple(pair.split(":")) for pair in _PAIRS.split()]  # (name, pronoun)
GOODS = ("notebooks", "pens", "mugs", "towels", "candles", "plates", "socks", "batteries", "lamps", "baskets")
Solution = tuple[str, list[str], Decimal]  # the question, the step lines, the final answer


def _cents(rng: random.Random, low: int, high: int) -> Decimal:
    """An amount in [low, high] cents, as dollars (``1250`` -> 12.5)."""
    return Decimal(rng.randint(low, high)) / 100


def _shopping(rng: random.Random) -> Solution:
    """Prices with cents, a total and the change from a round bill."""
    (name, pronoun), (first, second) = rng.choice(PEOPLE), rng.sample(GOODS, 2)
    a, price = rng.randint(2, 12), _cents(rng, 50, 4999)
    steps = [f"The {first} cost {a} * ${_money(price)} = ${_money(a * price)}."]
    question = f"{name} buys {a} {first} at ${_money(price)} each"
    total = a * price
    paid = f"${_money(total)}"  # what the change is taken from: the total, or both costs (three operands)
    if rng.random() < 0.6:
        b, other = rng.randint(2, 12), _cents(rng, 50, 4999)
        question += f" and {b} {second} at ${_money(other)} each"
        steps.append(f"The {second} cost {b} * ${_money(other)} = ${_money(b * other)}.")
        if rng.random() < 0.5:
            paid = f"${_money(total)} - ${_money(b * other)}"
        else:
            steps.append(f"Together they cost {paid} + ${_money(b * other)} = ${_money(total + b * other)}.")
            paid = f"${_money(total + b * other)}"
        total += b * other
    round_to = rng.choice((20, 50, 100))
    bill = (total // round_to + 1) * round_to
    question += f". {pronoun} pays with ${_money(bill)}. How much change does {name} get?"
    steps.append(f"{name} gets ${_money(bill)} - {paid} = ${_money(bill - total)} in change.")
    return question, steps, bill - total


def _population(rng: random.Random) -> Solution:
    """Hundreds of millions: growth, people leaving, then equal regions or a percentage."""
    place = rng.choice(("A country", "A large region", "A federation", "An island nation"))
    year = rng.randint(1980, 2015)
    start = rng.randrange(100_000_000, 800_000_000, 10_000)
    born, left = rng.randrange(1_000_000, 30_000_000, 10_000), rng.randrange(100_000, 9_000_000, 10_000)
    now = start + born - left
    question = (f"{place} had {start:,} people in {year}. Over the next {rng.choice((5, 10, 20))} years "
                f"{born:,} babies were born there and {left:,} people moved away.")  # fmt: skip
    if rng.random() < 0.5:
        steps = [f"The population is now {start:,} + {born:,} - {left:,} = {now:,}."]
    else:
        steps = [f"After the births it grew to {start:,} + {born:,} = {start + born:,}.",
                 f"After people moved away it was {start + born:,} - {left:,} = {now:,}."]  # fmt: skip
    if rng.random() < 0.5:
        regions = rng.choice((2, 4, 5, 8, 10, 16))
        question += f" The people now live in {regions} regions of equal size. How many people live in each region?"
        steps.append(f"Each region has {now:,} / {regions} = {now // regions:,} people.")
        return question, steps, Decimal(now // regions)
    share = rng.randint(3, 45)
    question += f" Now {share}% of the people are under 15. How many people are under 15?"
    young = now * share // 100  # exact: `now` is a multiple of 100
    steps.append(f"The number under 15 is {share}% * {now:,} = {young:,}.")
    return question, steps, Decimal(young)


def _discount(rng: random.Random) -> Solution:
    """A percentage off a price with thousands separators, then a fee with cents."""
    (name, _), thing = rng.choice(PEOPLE), rng.choice(("laptop", "bike", "sofa", "TV", "fridge", "camera", "tent"))
    price, share = rng.randint(40, 9999), rng.choice((5, 10, 15, 20, 25, 30, 35, 40, 50, 60, 75))
    off = Decimal(price * share) / 100
    question = f"A {thing} costs ${price:,}. It is on sale for {share}% off."
    steps = [f"The discount is {share}% * ${price:,} = ${_money(off)}.",
             f"The sale price is ${price:,} - ${_money(off)} = ${_money(price - off)}."]  # fmt: skip
    answer = price - off
    if rng.random() < 0.7:
        fee = _cents(rng, 199, 9999)
        question += f" {name} also pays ${_money(fee)} for delivery. How much does {name} pay in all?"
        steps.append(f"With delivery {name} pays ${_money(answer)} + ${_money(fee)} = ${_money(answer + fee)}.")
        return question, steps, answer + fee
    return question + f" How much does {name} pay for the {thing}?", steps, answer


def _speed(rng: random.Random) -> Solution:
    """A rate as an exact quotient, minutes to hours, and a distance with decimals."""
    (name, _), (verb, unit) = rng.choice(PEOPLE), rng.choice((("drives", "miles"), ("drives", "km"),
                                                                ("cycles", "km"), ("sails", "miles")))  # fmt: skip
    half = rng.random() < 0.3
    speed = Decimal(rng.randint(8, 90)) + (Decimal("0.5") if half else 0)
    hours = rng.randint(2, 9)
    minutes = rng.randrange(6 if half else 3, 181, 6 if half else 3)
    part = Decimal(minutes) / 60
    question = (f"{name} {verb} {text(speed * hours)} {unit} in {hours} hours at a steady speed. How far does "
                f"{name} go in {minutes} minutes at that speed?")  # fmt: skip
    steps = [
        f"{name}'s speed is {text(speed * hours)} / {hours} = {text(speed)} {unit} per hour.",
        f"{minutes} minutes is {minutes} / 60 = {text(part)} hours.",
        f"In {minutes} minutes {name} goes {text(speed)} * {text(part)} = {text(speed * part)} {unit}.",
    ]
    return question, steps, speed * part


def _factory(rng: random.Random) -> Solution:
    """Hours to minutes and a daily output over days, step by step or as one three-operand product."""
    rate, hours, days, goods = rng.randint(2, 40), rng.randint(2, 16), rng.randint(2, 30), rng.choice(GOODS)
    question = (f"A machine makes {rate} {goods} per minute. It runs {hours} hours a day for {days} days. How "
                f"many {goods} does it make?")  # fmt: skip
    total = hours * 60 * days * rate
    if rng.random() < 0.5:
        steps = [f"In {days} days it runs {hours} * 60 * {days} = {hours * 60 * days:,} minutes.",
                 f"It makes {hours * 60 * days:,} * {rate} = {total:,} {goods}."]  # fmt: skip
    else:
        steps = [f"Each day it runs {hours} * 60 = {hours * 60} minutes.",
                 f"Each day it makes {hours * 60} * {rate} = {hours * 60 * rate:,} {goods}.",
                 f"In {days} days it makes {hours * 60 * rate:,} * {days} = {total:,} {goods}."]  # fmt: skip
    return question, steps, Decimal(total)


def _leftover(rng: random.Random) -> Solution:
    """What is left after giving some away and using some, the count restated in prose."""
    (name, pronoun), fruit = rng.choice(PEOPLE), rng.choice(("apples", "lemons", "pears", "plums", "peaches"))
    start = rng.randint(60, 999)
    given, sold = rng.randint(1, start // 4), rng.randint(1, start // 4)
    kept = start - given - sold
    pies, each = rng.randint(2, 9), rng.randint(2, 12)
    pies = min(pies, kept // each)
    question = (f"{name} picked {start} {fruit}. {pronoun} gave {given} to a friend and sold {sold} at the market. "
                f"Then {pronoun.lower()} baked {pies} pies with {each} {fruit} each. How many {fruit} does {name} "
                f"have left?")  # fmt: skip
    if rng.random() < 0.5:
        steps = [f"After the friend and the market {name} had {start} - {given} - {sold} = {kept} {fruit}."]
    else:
        steps = [f"{name} gave and sold {given} + {sold} = {given + sold} {fruit}.",
                 f"{pronoun} had {start} - {given + sold} = {kept} {fruit} left."]  # fmt: skip
    steps += [f"{pronoun} had {kept} {fruit} before baking." if rng.random() < 0.5 else "",
              f"The pies used {pies} * {each} = {pies * each} {fruit}.",
              f"{name} has {kept} - {pies * each} = {kept - pies * each} {fruit} left."]  # fmt: skip
    if rng.random() < 0.5:
        steps.append(f"So {pronoun.lower()} has {kept - pies * each} {fruit} left.")
    return question, [step for step in steps if step], Decimal(kept - pies * each)


def _wages(rng: random.Random) -> Solution:
    """An hourly wage with cents, weeks of pay with separators, then a tax percentage."""
    (name, _), job = rng.choice(PEOPLE), rng.choice(("a cafe", "a library", "a garage", "a shop", "a farm", "a gym"))
    wage, hours, weeks = Decimal(rng.randint(40, 200)) / 4, rng.randrange(8, 49, 4), rng.randint(2, 52)
    pay = wage * hours * weeks  # whole dollars: the wage is in quarters and the hours a multiple of 4
    question = f"{name} works at {job} for ${_money(wage)} an hour, {hours} hours a week."
    taxed = rng.random() < 0.6
    if taxed and rng.random() < 0.5:  # the pay as one three-operand product
        steps = [f"In {weeks} weeks {name} earns {weeks} * {hours} * ${_money(wage)} = ${_money(pay)}."]
    else:
        steps = [f"Each week {name} earns {hours} * ${_money(wage)} = ${_money(wage * hours)}.",
                 f"In {weeks} weeks that is {weeks} * ${_money(wage * hours)} = ${_money(pay)}."]  # fmt: skip
    if not taxed:
        return question + f" How much does {name} earn in {weeks} weeks?", steps, pay
    tax = rng.randint(5, 30)
    question += f" {tax}% of the pay goes to taxes. How much does {name} keep after {weeks} weeks?"
    taxes = pay * tax / 100
    steps += [f"The taxes are {tax}% * ${_money(pay)} = ${_money(taxes)}.",
              f"{name} keeps ${_money(pay)} - ${_money(taxes)} = ${_money(pay - taxes)}."]  # fmt: skip
    return question, steps, pay - taxes


def _trip(rng: random.Random) -> Solution:
    """A cost shared equally: people counted (two or three groups), an exact quotient with cents."""
    students, teachers = rng.randint(10, 60), rng.randint(1, 6)
    parents = rng.randint(1, 9) if rng.random() < 0.5 else 0
    people = students + teachers + parents
    each = _cents(rng, 500, 9999)
    place = rng.choice(("the zoo", "a museum", "the coast", "a science fair", "a farm", "the mountains"))
    who = f"{students} students, {teachers} teachers and {parents} parents" if parents else \
        f"{students} students and {teachers} teachers"  # fmt: skip
    count = f"{students} + {teachers} + {parents}" if parents else f"{students} + {teachers}"
    question = f"A trip to {place} for {who} costs ${_money(each * people)} in all. Everyone pays the same share."
    steps = [f"There are {count} = {people} people.",
             f"Each person pays ${_money(each * people)} / {people} = ${_money(each)}."]  # fmt: skip
    if rng.random() < 0.5:
        steps.append(f"The students pay {students} * ${_money(each)} = ${_money(students * each)} together.")
        return question + " How much do the students pay together?", steps, students * each
    return question + " How much does each person pay?", steps, each


SOLUTIONS = (_shopping, _population, _discount, _speed, _factory, _leftover, _wages, _trip)


def worked_solution(rng: random.Random) -> Problem:
    """A whole grade-school worked solution as public ones are written (GSM8K's format without its calculator
    notes): ``Question: ...\\nAnswer:`` -> the step lines, each ending in the number its equation computes from the
    operands written before ``=``, then ``#### <answer>``. Currency with cents, separators, percentages (a share
    times an amount), hundreds of millions, exact decimal quotients, hours * 60, three-operand equations and numbers
    restated in prose."""
    question, steps, answer = rng.choice(SOLUTIONS)(rng)
    return f"Question: {question}\nAnswer:", " " + "\n".join(steps) + f"\n#### {text(answer)}"


DATA = Path(__file__).parent / "data"
# after a number: an operator and another operand (the number starts an expression: "= 3 * 4 = 12")
_GOES_ON = re.compile(r"\s*[-+*/x×÷]\s*[$(]?\s*\d")


def gsm8k_rows(n_train: int, n_eval: int, seed: int) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Public worked solutions (`DATA/gsm8k`, MIT): up to `n_train` of the 2,000 shipped train rows, in an order
    shuffled by `seed`, and the first `n_eval` of the 150 shipped test rows (a disjoint split of the source; more
    asked than shipped: all of them, and a printed note), each
    ``{"prompt": "Question: ...\\nAnswer:", "completion": " <the solution>\\n#### <answer>"}``."""

    def read(split: str) -> list[dict[str, str]]:
        lines = (DATA / "gsm8k" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
        rows = [json.loads(line) for line in lines if line.strip()]
        return [{"prompt": f"Question: {r['question']}\nAnswer:", "completion": f" {r['answer']}"} for r in rows]

    train, held = read("train"), read("test")
    if n_train > len(train) or n_eval > len(held):
        print(f"family 'gsm8k' ships {len(train)} train and {len(held)} held-out rows: using "
              f"{min(n_train, len(train))} / {min(n_eval, len(held))} of the {n_train} / {n_eval} asked")  # fmt: skip
    random.Random(seed).shuffle(train)
    return train[:n_train], held[:n_eval]


def gsm8k_line_rows(n_train: int, n_eval: int, seed: int) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Public worked-solution lines: the shipped GSM8K solutions cut at each equation's result (the number right
    after "=", a "$" between allowed, that starts no longer expression: the library's rule, read here through the
    public API): the question and the solution up to that "=" are the prompt, the result as written (its currency
    sign included) the completion. Train: one line drawn (by `seed`) from each train solution, in `gsm8k_rows`'
    order; held out: every line of the test solutions, in order."""
    from numadapter import find_numbers

    def lines(row: dict[str, str]) -> list[dict[str, str]]:
        text, cut = row["prompt"] + row["completion"], []
        for span in find_numbers(text):
            after_equals = text[: span.start].rstrip(" $").endswith("=")
            if span.start >= len(row["prompt"]) and after_equals and not _GOES_ON.match(text, span.end):
                equals = text.rindex("=", 0, span.start) + 1
                cut.append({"prompt": text[:equals], "completion": text[equals : span.end]})
        return cut

    train, held = gsm8k_rows(2000, 150, seed)
    rng = random.Random(seed)
    train_lines = [rng.choice(found) for found in map(lines, train) if found]
    held_lines = [line for row in held for line in lines(row)]
    return train_lines[:n_train], held_lines[:n_eval]


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in [
        Family("copy", "repeat a 7-12 digit integer", copy_integer, 12, max_new_tokens=16),
        Family("copy_decimal", "repeat a decimal with 1-6 integer and 1-4 fraction digits", copy_decimal, 6, 4),
        Family("sums", "a + b with 3-4 digit operands (the quick start's task)", sums, 5),
        Family(
            "sums_chat", "the sums as chat messages: the question a user turn, the sum the reply", sums, 5, chat=True
        ),
        Family("maxmin", "max(...) or min(...) of 3-6 numbers of 1-6 digits", max_min, 6),
        Family(
            "worked_line",
            "a worked-solution line up to the number it computes ($, separators, decimals, units, 3 operands, %)",
            worked_line,
            7,
            2,
        ),  # fmt: skip
        Family(
            "ledger",
            "closing balance after 1-5 deposits / withdrawals, among an id, a date and list numbers",
            ledger,
            5,
        ),
        Family("powers_of_ten", "a decimal times or divided by 10, 100 or 1000", powers_of_ten, 6, 4),
        Family("units", "a 1-3 digit amount converted with an integer factor (km -> m, h -> min, ...)", units, 6),
        Family("times_one_digit", "a 2-6 digit number times one digit 2-9", times_one_digit, 7),
        Family("k_by_k", "a k-digit number times a k-digit number, k = 2 or 3", k_by_k, 6),
        Family("percent", "p% of a 1-4 digit number (p 1-99; answers with up to 2 decimals)", percent, 4, 2),
        Family("divmod", "integer quotient or remainder of a 3-5 digit number by 2-99", quotient_remainder, 5),
        Family("words", "a number 0-999999 written in English words, to digits", words_to_digits, 6),
        Family("expression", "((a op b) op c) [op d], op in + - *, answer only", expression, 6),
        Family(
            "expression_scratchpad",
            "the same expressions, each step written before the answer",
            expression_scratchpad,
            6,
            max_new_tokens=64,
        ),
        Family(
            "worked_solution",
            "a whole GSM8K-style worked solution ($, %, separators, 100M+, rates, 3 operands), then #### answer",
            worked_solution,
            9,
            2,
            max_new_tokens=180,  # the longest of 20,000 references is 139 SmolLM2 tokens (digits one token each)
            equations=True,
        ),
        Family(
            "miles_km",
            "miles (1 decimal) to km at 1.609344, rounded to 2 decimals; scored by error",
            miles_to_km,
            4,
            2,
            scoring="error",
        ),
        Family(
            "fahrenheit_celsius",
            "degrees Fahrenheit (32.0-999.9) to Celsius, rounded to 2 decimals; scored by error",
            fahrenheit_celsius,
            3,
            2,
            scoring="error",
        ),
        Family(
            "sst_forecast",
            "next month's sea surface temperature off Peru from the last 12 (NOAA, public domain; data/elnino); "
            "scored by error",
            None,
            2,
            2,
            scoring="error",
            load=sst_rows,
        ),
        Family(
            "gsm8k",
            "public grade-school word problems with whole worked solutions (GSM8K, MIT; data/gsm8k)",
            None,
            8,
            2,
            max_new_tokens=256,
            equations=True,
            load=gsm8k_rows,
        ),
        Family(
            "gsm8k_line",
            "a line of a public GSM8K solution up to the number it computes (the question and the lines before it)",
            None,
            8,
            2,
            load=gsm8k_line_rows,
        ),
        Family(
            "facts",
            "facts and constants the base answers right before training (eval_harness.suite.facts)",
            None,
            6,
            3,
        ),
    ]
}


def family(name: str) -> Family:
    """The family called `name`; a clear error listing the names otherwise."""
    if name not in FAMILIES:
        raise ValueError(f"unknown family {name!r}: use one of {', '.join(FAMILIES)}.")
    return FAMILIES[name]


def _unique(draw: Callable[[random.Random], Problem], n: int, rng: random.Random, skip: set[str], name: str):
    rows: list[dict[str, str]] = []
    seen = set(skip)
    for _ in range(50 * n + 1000):
        if len(rows) == n:
            return rows
        prompt, completion = draw(rng)
        if prompt not in seen:
            seen.add(prompt)
            rows.append({"prompt": prompt, "completion": completion})
    raise ValueError(
        f"family {name!r}: only {len(rows)} distinct prompts outside the other split after {50 * n + 1000} draws, "
        f"{n} asked: ask for fewer rows."
    )


def family_rows(name: str, n_train: int, n_eval: int, seed: int) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The ``train`` and ``held-out`` rows of a generated family: distinct prompts, disjoint splits, seeded.

    The train rows come from ``random.Random(seed)``, the held-out rows from ``random.Random(seed + 1)`` with the
    train prompts skipped; each row's answer is computed from its own prompt's numbers.
    """
    found = family(name)
    if found.load is not None:
        return found.load(n_train, n_eval, seed)
    if found.draw is None:
        raise ValueError(f"family {name!r} has no generator: its rows come from eval_harness.suite.facts.")
    if n_train < 0 or n_eval < 0:
        raise ValueError(f"row counts must be >= 0, got n_train={n_train}, n_eval={n_eval}.")
    train = _unique(found.draw, n_train, random.Random(seed), set(), name)
    held = _unique(found.draw, n_eval, random.Random(seed + 1), {r["prompt"] for r in train}, name)
    return train, held
