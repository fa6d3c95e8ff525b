"""Numbers a base model knows: short factual prompts whose answer is a number, and whether a model still answers them.

A number adapter must not cost what the base already knew (the task suite's ``facts`` retention, the quick start's
last lines). `FACTS` is a hand-written list of prompts whose next words are a number (units, constants, dates,
conversions; a few with numbers in the prompt that the answer neither repeats nor sums). `base_answers` completes
prompts greedily with a plain base model (no adapter), `known_facts` keeps the facts it answers right;
`numadapter.evaluation.facts_kept` counts how many of those a trained adapter still answers.

Every check reads the FIRST number of a completion: a base goes on writing after the answer ("60. There are 24 hours
in a day"), so its last number is not its answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

__all__ = ["FACTS", "base_answers", "first_number", "known_facts"]

FACTS: list[tuple[str, str]] = [
    ("The number of minutes in an hour is", "60"),
    ("The number of seconds in a minute is", "60"),
    ("The number of hours in a day is", "24"),
    ("The number of days in a week is", "7"),
    ("The number of months in a year is", "12"),
    ("The number of days in a leap year is", "366"),
    ("The number of days in a year is", "365"),
    ("The number of weeks in a year is", "52"),
    ("The number of years in a century is", "100"),
    ("The number of years in a decade is", "10"),
    ("The number of years in a millennium is", "1000"),
    ("The number of days in September is", "30"),
    ("The number of days in January is", "31"),
    ("The number of seconds in an hour is", "3600"),
    ("The number of minutes in a day is", "1440"),
    ("Water boils at a temperature in degrees Celsius of", "100"),
    ("Water boils at a temperature in degrees Fahrenheit of", "212"),
    ("Water freezes at a temperature in degrees Fahrenheit of", "32"),
    ("Water freezes at a temperature in degrees Celsius of", "0"),
    ("The normal human body temperature in degrees Celsius is", "37"),
    ("The number of centimeters in a meter is", "100"),
    ("The number of millimeters in a centimeter is", "10"),
    ("The number of meters in a kilometer is", "1000"),
    ("The number of grams in a kilogram is", "1000"),
    ("The number of milliliters in a liter is", "1000"),
    ("The number of inches in a foot is", "12"),
    ("The number of feet in a yard is", "3"),
    ("The number of feet in a mile is", "5280"),
    ("The number of ounces in a pound is", "16"),
    ("The number of cents in a dollar is", "100"),
    ("The number of items in a dozen is", "12"),
    ("The number of degrees in a right angle is", "90"),
    ("The number of degrees in a circle is", "360"),
    ("The sum of the angles of a triangle in degrees is", "180"),
    ("The number of sides of a triangle is", "3"),
    ("The number of sides of a hexagon is", "6"),
    ("The number of sides of an octagon is", "8"),
    ("The number of sides of a pentagon is", "5"),
    ("The number of vertices of a cube is", "8"),
    ("The number of faces of a cube is", "6"),
    ("The number of edges of a cube is", "12"),
    ("The value of pi to two decimal places is", "3.14"),
    ("The square root of 2 to three decimal places is", "1.414"),
    ("Euler's number e to two decimal places is", "2.72"),
    ("The square root of 144 is", "12"),
    ("The square root of 81 is", "9"),
    ("The square of 12 is", "144"),
    ("2 to the power of 10 is", "1024"),
    ("The number of bits in a byte is", "8"),
    ("The number of planets in the Solar System is", "8"),
    ("The number of continents on Earth is", "7"),
    ("The number of oceans on Earth is", "5"),
    ("The number of US states is", "50"),
    ("The number of players on a soccer team on the field is", "11"),
    ("The number of players on a basketball team on the court is", "5"),
    ("The number of cards in a standard deck is", "52"),
    ("The number of squares on a chessboard is", "64"),
    ("The number of pieces each player has at the start of a chess game is", "16"),
    ("The number of keys on a standard piano is", "88"),
    ("The number of strings on a standard guitar is", "6"),
    ("The number of legs of a spider is", "8"),
    ("The number of legs of an insect is", "6"),
    ("The number of chromosomes in a human cell is", "46"),
    ("The number of bones in the adult human body is", "206"),
    ("The number of teeth of an adult human is", "32"),
    ("The number of chambers of the human heart is", "4"),
    ("The number of letters in the English alphabet is", "26"),
    ("The number of colors in a rainbow is", "7"),
    ("The number of elements in the periodic table is", "118"),
    ("The atomic number of hydrogen is", "1"),
    ("The atomic number of carbon is", "6"),
    ("The atomic number of oxygen is", "8"),
    ("The atomic number of helium is", "2"),
    ("The speed of light in kilometers per second is about", "300000"),
    ("The year World War II ended is", "1945"),
    ("The year World War I began is", "1914"),
    ("The year Christopher Columbus reached the Americas is", "1492"),
    ("The year the United States declared independence is", "1776"),
    ("The year humans first landed on the Moon is", "1969"),
    ("The year the Berlin Wall fell is", "1989"),
    ("The year the French Revolution began is", "1789"),
    ("The year the Titanic sank is", "1912"),
    ("The year the 9/11 attacks happened is", "2001"),
    ("The year the Battle of Hastings took place is", "1066"),
    ("The number of days in February in a common year is", "28"),
    ("The boiling point of water at sea level in Kelvin is about", "373"),
    ("Absolute zero in degrees Celsius is about", "-273"),
    ("One mile in kilometers is about", "1.6"),
    ("One inch in centimeters is", "2.54"),
    ("One kilogram in pounds is about", "2.2"),
    ("The number of zeros in one million is", "6"),
    ("One hundred times one hundred is", "10000"),
    ("The number of hours in a week is", "168"),
    # numbers in the prompt that the answer neither repeats nor sums: where a head that writes every number fails
    ("Water boils at 100 degrees Celsius, which in degrees Fahrenheit is", "212"),
    ("Water freezes at 0 degrees Celsius, which in degrees Fahrenheit is", "32"),
    ("Water boils at 212 degrees Fahrenheit, which in degrees Celsius is", "100"),
    ("1 kilometer is equal to this many meters:", "1000"),
    ("1 hour is equal to this many minutes:", "60"),
    ("1 day is equal to this many hours:", "24"),
    ("1 week is equal to this many days:", "7"),
    ("1 year is equal to this many months:", "12"),
    ("1 minute is equal to this many seconds:", "60"),
    ("1 foot is equal to this many inches:", "12"),
    ("1 yard is equal to this many feet:", "3"),
    ("1 dozen is equal to this many items:", "12"),
    ("1 century is equal to this many years:", "100"),
    ("1 meter is equal to this many centimeters:", "100"),
    ("1 kilogram is equal to this many grams:", "1000"),
    ("1 liter is equal to this many milliliters:", "1000"),
    ("The Apollo 11 mission landed on the Moon in the year", "1969"),
    ("World War 2 ended in the year", "1945"),
    ("World War 1 began in the year", "1914"),
    ("A triangle has 3 sides and a square has this many sides:", "4"),
    ("A square has 4 sides and a triangle has this many sides:", "3"),
    ("A week has 7 days and a year has this many months:", "12"),
    ("An hour has 60 minutes and a day has this many hours:", "24"),
    ("A year has 12 months and a week has this many days:", "7"),
    ("A minute has 60 seconds and an hour has this many minutes:", "60"),
    ("In 2024 there were 366 days, and in 2023 the number of days was", "365"),
    ("A leap year has 366 days; a common year has", "365"),
    ("A common year has 365 days; a leap year has", "366"),
    ("There are 24 hours in a day and the number of days in a week is", "7"),
    ("There are 7 days in a week and the number of hours in a day is", "24"),
]


def first_number(text: str) -> Decimal | None:
    """The exact value of the first number `numadapter.numbers.find_numbers` finds in `text`, or None."""
    from numadapter.numbers import find_numbers

    spans = find_numbers(text)
    return spans[0].exact.to_decimal() if spans else None


def base_answers(base: str, prompts: Sequence[str], max_new_tokens: int = 8, batch: int = 32) -> list[str]:
    """The greedy continuations of `prompts` by the plain base model at `base` (``model.generate``, no adapter, left
    padding), in the order of `prompts`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base, padding_side="left")
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
    out: list[str] = []
    for start in range(0, len(prompts), batch):
        inputs = tokenizer(list(prompts[start : start + batch]), return_tensors="pt", padding=True)
        with torch.no_grad():
            ids = model.generate(
                **inputs, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id
            )
        out += tokenizer.batch_decode(ids[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    return out


def known_facts(base: str, facts: Sequence[tuple[str, str]] = FACTS, complete=base_answers) -> list[tuple[str, str]]:
    """The ``(prompt, answer)`` pairs of `facts` whose first number in the base's greedy continuation is the answer.

    Args:
        base: the base model's directory.
        facts: ``(prompt, answer)`` pairs (`FACTS` by default).
        complete: ``complete(base, prompts) -> continuations`` (`base_answers`; tests pass a stand-in).
    """
    answers = complete(base, [prompt for prompt, _ in facts])
    return [(p, a) for (p, a), got in zip(facts, answers) if first_number(got) == Decimal(a)]
