"""FERMAT-style multi-view word problems, as used by the digit-aggregation paper (Sivakumar & Moosavi, "How to
Leverage Digit Embeddings to Represent Numbers?", Sec. 5 and Appendix B; FERMAT: Sivakumar & Moosavi 2023).

FERMAT keeps each maths word problem fixed and changes only how its numbers look ("views"): integers below
1000, integers above 1000, 1 and 2 decimal places. Its training set is generated from templates with numbers
of these four categories. We reproduce that design with our own templates (FERMAT's are not copied):

- a problem = a template (chosen by problem id) + quantities drawn in the view's number format;
- views (`VIEWS`): "int" (integers 0..1000), "1dp" (one decimal, last digit non-zero, 0.1..999.9),
  "2dp" (two decimals, last digit non-zero, 0.01..999.99), "1000plus" (integers 1000..100000); counts
  (people, boxes, pieces) stay small integers 2..12 in every view, as they are counts;
- problem i of a split uses the same template in every view (`metadata["problem_id"]` and
  ``metadata["template"]``), so the views of one problem differ only in their numbers;
- the answer is computed exactly (`Decimal`); subtraction templates put the larger quantity first and
  division templates build the dividend as quotient * count, so answers are non-negative and exact;
- target: the canonical exact answer (no trailing zeros), e.g. "12.5"; prompt and target joined by " ";
- splits: a rendered problem (template + number texts) belongs to one of train / valid / test by `hash_split`
  (85% / 5% / 10%), for every view, so no test problem text occurs in any train set of the same seed;
- "fermat_mixed" draws view ``VIEWS[i % 4]`` for problem i (FERMAT's mixed training set);
- default sizes: FERMAT's 200,000 train / 1,000 dev / 1,111 test per view.

The paper scores these with accuracy and CER (character error rate, digit-aggregation paper Sec. 5).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from .base import Example, Task, canonical_number
from .sampling import HASH_FRACTIONS, HASH_SPLITS, MAX_ATTEMPTS_PER_EXAMPLE, derive_key, hash_split

# view name -> (decimal places, smallest units, largest units, last digit must be non-zero)
VIEWS: dict[str, tuple[int, int, int, bool]] = {
    "int": (0, 0, 1000, False),
    "1dp": (1, 1, 9999, True),
    "2dp": (2, 1, 99999, True),
    "1000plus": (0, 1000, 100000, False),
}
_COUNT_RANGE = (2, 12)

Quantity = Callable[..., Decimal]  # quantity(divisor=1): a number in the view's format
Count = Callable[[], int]


def _add2(q: Quantity, c: Count) -> tuple[dict[str, Decimal | int], Decimal]:
    a, b = q(), q()
    return {"a": a, "b": b}, a + b


def _sub2(q: Quantity, c: Count) -> tuple[dict[str, Decimal | int], Decimal]:
    a, b = sorted((q(), q()), reverse=True)
    return {"a": a, "b": b}, a - b


def _mul_count(q: Quantity, c: Count) -> tuple[dict[str, Decimal | int], Decimal]:
    a, n = q(), c()
    return {"a": a, "n": n}, a * n


def _div_count(q: Quantity, c: Count) -> tuple[dict[str, Decimal | int], Decimal]:
    n = c()
    quotient = q(n)  # the dividend quotient * n stays inside the view's range
    return {"a": quotient * n, "n": n}, quotient


def _add3(q: Quantity, c: Count) -> tuple[dict[str, Decimal | int], Decimal]:
    a, b, d = q(), q(), q()
    return {"a": a, "b": b, "c": d}, a + b + d


def _sub_add(q: Quantity, c: Count) -> tuple[dict[str, Decimal | int], Decimal]:
    a, b = sorted((q(), q()), reverse=True)
    d = q()
    return {"a": a, "b": b, "c": d}, a - b + d


def _mul2(q: Quantity, c: Count) -> tuple[dict[str, Decimal | int], Decimal]:
    a, b = q(), q()
    return {"a": a, "b": b}, a * b


def _mul_count_add(q: Quantity, c: Count) -> tuple[dict[str, Decimal | int], Decimal]:
    a, b, n = q(), q(), c()
    return {"a": a, "b": b, "n": n}, a * n + b


def _mean2(q: Quantity, c: Count) -> tuple[dict[str, Decimal | int], Decimal]:
    a, b = q(), q()
    return {"a": a, "b": b}, (a + b) / 2


# (text with {a} {b} {c} quantities and {n} counts, builder). Quantities use the view's format.
TEMPLATES: tuple[tuple[str, Callable[[Quantity, Count], tuple[dict[str, Decimal | int], Decimal]]], ...] = (
    ("A baker used {a} kg of flour on Monday and {b} kg on Tuesday. How many kilograms did she use in total?", _add2),
    ("A tank holds {a} litres of water and {b} litres are drained. How many litres are left?", _sub2),
    ("One crate weighs {a} kg. How many kilograms do {n} crates weigh?", _mul_count),
    ("A rope {a} metres long is cut into {n} equal pieces. How many metres long is each piece?", _div_count),
    ("A runner ran {a} km on Monday, {b} km on Wednesday and {c} km on Friday. How far did she run in total?", _add3),
    ("A shop had {a} dollars, paid {b} dollars for stock and then took in {c} dollars. How many dollars does it "
     "have now?", _sub_add),
    ("A field is {a} metres long and {b} metres wide. What is its area in square metres?", _mul2),
    ("A notebook costs {a} dollars and a pen costs {b} dollars. What do {n} notebooks and one pen cost?",
     _mul_count_add),
    ("The temperature was {a} degrees on one day and {b} degrees on the next. What was the average temperature?",
     _mean2),
    ("Pipe A is {a} cm long and pipe B is {b} cm long. How much longer is the longer pipe, in cm?", _sub2),
    ("A farmer picked {a} kg of apples and {b} kg of pears. How many kilograms of fruit did he pick?", _add2),
    ("{n} friends share a bill of {a} dollars equally. How many dollars does each friend pay?", _div_count),
)  # fmt: skip


# Templates whose slot "a" is derived (dividend = quotient * count) and must be checked against the view.
_DERIVED = frozenset(i for i, (_, build) in enumerate(TEMPLATES) if build is _div_count)


def _in_view(value: Decimal, view: str) -> bool:
    places, low, high, nonzero_last = VIEWS[view]
    units = value.scaleb(places)
    if units != units.to_integral_value():
        return False
    units_int = int(units)
    return low <= units_int <= high and not (nonzero_last and units_int % 10 == 0)


@dataclass(frozen=True, eq=False)
class FermatTask(Task):
    """FERMAT-style word problems with numbers in one view (or mixed views).

    Args:
        name: registry name.
        view: a key of `VIEWS`, or "mixed" (problem i uses view ``list(VIEWS)[i % 4]``).
        n_train, n_valid, n_test: default split sizes.
    """

    name: str
    view: str
    n_train: int = 200_000
    n_valid: int = 1_000
    n_test: int = 1_111
    description: str = ""
    metrics: tuple[str, ...] = ("exact_match", "cer")
    source: str = "digit-aggregation paper Sec. 5, Appendix B (FERMAT)"

    def __post_init__(self) -> None:
        if self.view not in VIEWS and self.view != "mixed":
            raise ValueError(f"`view` must be one of {[*VIEWS, 'mixed']}, got {self.view!r}.")

    def _generate(self, split: str, n: int, seed: int) -> list[Example]:
        # Templates come from a stream that depends on (seed, split) only, so problem i has the same template
        # in every view; the numbers come from a per-view stream.
        template_rng = random.Random(f"fermat|templates|{seed}|{split}")
        template_ids = [template_rng.randrange(len(TEMPLATES)) for _ in range(n)]
        views = list(VIEWS)
        seed_key = derive_key("fermat", seed)  # shared by all views: one partition of all rendered problems
        samplers = {v: _samplers(random.Random(f"fermat|numbers|{seed}|{split}|{v}"), v) for v in views}
        out: list[Example] = []
        for pid, template_id in enumerate(template_ids):
            view = views[pid % len(views)] if self.view == "mixed" else self.view
            text, build = TEMPLATES[template_id]
            for _ in range(MAX_ATTEMPTS_PER_EXAMPLE):
                slots, answer = build(*samplers[view])
                if template_id in _DERIVED and not _in_view(slots["a"], view):
                    continue  # the dividend quotient * n must look like the view's numbers too
                rendered = {k: str(v) for k, v in slots.items()}  # Decimal keeps the view's decimal places
                key = f"{template_id}|" + "|".join(f"{k}={v}" for k, v in sorted(rendered.items()))
                if hash_split(key, seed_key, HASH_SPLITS, HASH_FRACTIONS) == split:
                    break
            else:
                raise RuntimeError(f"no {split!r} problem found for template {template_id} in view {view!r}")
            answer_text = canonical_number(answer)
            metadata = {"task": self.name, "problem_id": pid, "template": template_id, "view": view}
            metadata["slots"] = rendered  # slot name -> number text; a, b, c are quantities, n is a count
            out.append(Example(text.format(**rendered), answer_text, answer_text, metadata, " "))
        return out


def _samplers(rng: random.Random, view: str) -> tuple[Quantity, Count]:
    """The (quantity, count) samplers of one view, drawing from `rng`."""
    places, low, high, nonzero_last = VIEWS[view]
    uniform = rng.random
    count_low, count_span = _COUNT_RANGE[0], _COUNT_RANGE[1] - _COUNT_RANGE[0] + 1

    def quantity(divisor: int = 1) -> Decimal:
        """A quantity in the view's format; with `divisor`, one whose product with it stays in range."""
        lo, hi = -(-low // divisor), high // divisor
        while True:
            units = lo + int(uniform() * (hi - lo + 1))  # uniform in [lo, hi]; spans << 2**53
            if not (nonzero_last and units % 10 == 0):
                return Decimal(units).scaleb(-places)

    def count() -> int:
        return count_low + int(uniform() * count_span)

    return quantity, count


def fermat_tasks() -> list[Task]:
    """The FERMAT-style views plus the mixed training set."""
    descriptions = {
        "int": "integers 0..1000",
        "1dp": "numbers with 1 decimal place",
        "2dp": "numbers with 2 decimal places",
        "1000plus": "integers 1000..100000",
    }
    tasks: list[Task] = [
        FermatTask(f"fermat_{view}", view, description=f"FERMAT-style word problems, {text}")
        for view, text in descriptions.items()
    ]
    tasks.append(FermatTask("fermat_mixed", "mixed", description="FERMAT-style word problems, views mixed 1:1:1:1"))
    return tasks
