"""FoNE arithmetic and classification tasks (Zhou et al., "FoNE: Precise Single-Token Number Embeddings via
Fourier Features", Sec. 4.1, Appendix B, Table 4 in Appendix G).

Arithmetic (Sec. 4.1): each example is ``[operand a][operator][operand b]=``, e.g. ``"123.456+7.891="``.
- "For an x-digit operands dataset, each operand can have up to x digits": operands are drawn uniformly from
  ``[0, 10^x - 1]`` (0 included; so most operands have x digits). Decimal addition has 6 digits in total,
  3 before and 3 after the point (the paper's Table 7 sums such as 1756.008 confirm the 3+3 split): operands
  ``0.000 .. 999.999``, written with exactly 3 decimals ("7.890"); the target is written the same way.
- Addition and multiplication keep only ``a <= b`` ("a + b and b + a are treated as identical and included
  only once"); subtraction keeps ``a >= b`` (non-negative results).
- Pairs are drawn without replacement from all such pairs (uniform over unordered pairs) and split
  valid / test / train by `KeyedPermutation`, so no pair is repeated or shared between splits.
- Default sizes: Table 4 (e.g. 720,000 / 80,000 / 200,000 for 6-digit addition).

Binary classification (Appendix B): ``[num1, num2, num3]`` with integers uniform in [0, 1000], sorted
``num1 <= num2 <= num3`` (each multiset once); label 1 when ``1.5*num1 - 2*num2 + 0.5*num3 - d > 0`` else 0,
for d = 10 and d = -190. The label is computed exactly as ``3*num1 - 4*num2 + num3 - 2d > 0`` (times 2).
Our prompt is ``"[12, 345, 678]="`` and the target ``"1"``/``"0"``: the items are separated by ", " (comma and
space) so that no number parser can read "12,345,678" as one number with thousands separators.
Table 4 prints the classification sizes as "720,00 / 80,00 / 200,00"; we read them as 72,000 / 8,000 / 20,000
(Table 5 trains on 50,000 examples, consistent with a 72,000-example train split).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

from .base import Example, Task, canonical_number
from .sampling import PermutedSpaceTask, unrank_pairs, unrank_triple

_OPS = {"add": "+", "sub": "-", "mul": "*"}


@dataclass(frozen=True, eq=False)
class FoneArithmeticTask(PermutedSpaceTask):
    """``a op b =`` with operands of up to `digits` digits (`frac_digits` of them after the point).

    Args:
        name: registry name.
        op: "add", "sub" or "mul".
        digits: total digits per operand (integer + fraction), the paper's "x-digit".
        frac_digits: digits after the point (3 for decimal addition, else 0).
        n_train, n_valid, n_test: default split sizes (Table 4); valid and test are reserved first, train gets
            every remaining pair (its capacity), so a larger train set never overlaps valid/test.
        description: one line for the task list.
    """

    name: str
    op: str
    digits: int
    frac_digits: int
    n_train: int
    n_valid: int
    n_test: int
    description: str = ""
    metrics: tuple[str, ...] = ("exact_match", "r2", "mae")
    source: str = "FoNE Sec. 4.1, Table 4"

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"`op` must be one of {sorted(_OPS)}, got {self.op!r}.")
        if self.digits < 1 or not 0 <= self.frac_digits < self.digits:
            raise ValueError(f"need digits >= 1 and 0 <= frac_digits < digits, got {self.digits}, {self.frac_digits}")
        super().__post_init__()

    @property
    def space_size(self) -> int:
        """Number of distinct unordered operand pairs: N(N+1)/2 with N = 10^digits values."""
        n_values = 10**self.digits
        return n_values * (n_values + 1) // 2

    def _fmt(self, units: int) -> str:
        if self.frac_digits == 0:
            return str(units)
        scale = 10**self.frac_digits
        sign = "-" if units < 0 else ""
        q, r = divmod(abs(units), scale)
        return f"{sign}{q}.{r:0{self.frac_digits}d}"

    def _generate(self, split: str, n: int, seed: int) -> list[Example]:
        small, large = unrank_pairs(self._ranks("fone", split, n, seed), 10**self.digits)
        symbol = _OPS[self.op]
        out = []
        for lo, hi in zip(small.tolist(), large.tolist()):
            a, b = (hi, lo) if self.op == "sub" else (lo, hi)
            if self.op == "add":
                result_text = self._fmt(a + b)
                exact = canonical_number(_decimal(a + b, self.frac_digits))
            elif self.op == "sub":
                result_text = self._fmt(a - b)
                exact = canonical_number(_decimal(a - b, self.frac_digits))
            else:  # mul: integer operands only (frac_digits == 0 in the paper's tasks)
                exact = canonical_number(_decimal(a * b, 2 * self.frac_digits))
                result_text = exact
            a_text, b_text = self._fmt(a), self._fmt(b)
            out.append(
                Example(
                    prompt=f"{a_text}{symbol}{b_text}=",
                    target=result_text,
                    answer=exact,
                    metadata={"task": self.name, "op": symbol, "operands": [a_text, b_text]},
                )
            )
        return out


def _decimal(units: int, frac_digits: int) -> Decimal:
    """The exact value ``units * 10^-frac_digits``."""
    return Decimal(units).scaleb(-frac_digits)


@dataclass(frozen=True, eq=False)
class FoneClassificationTask(PermutedSpaceTask):
    """FoNE Appendix B: label of ``a*num1 + b*num2 + c*num3 - d > 0`` for sorted integers in [0, max_value].

    Args:
        name: registry name.
        d: the offset (10 or -190 in the paper); a = 1.5, b = -2, c = 0.5 are fixed as in the paper.
        n_train, n_valid, n_test: default split sizes.
        max_value: largest integer (1000 in the paper).
    """

    name: str
    d: int
    n_train: int = 72_000
    n_valid: int = 8_000
    n_test: int = 20_000
    max_value: int = 1000
    description: str = ""
    metrics: tuple[str, ...] = ("exact_match",)
    source: str = "FoNE Appendix B, Table 4"

    @property
    def space_size(self) -> int:
        """Number of sorted triples (multisets of size 3) of [0, max_value]: C(N+2, 3), N = max_value + 1."""
        return math.comb(self.max_value + 3, 3)

    def _generate(self, split: str, n: int, seed: int) -> list[Example]:
        ranks = self._ranks("fone", split, n, seed)
        out = []
        for rank in ranks.tolist():
            x, y, z = unrank_triple(int(rank), self.max_value + 1)
            score2 = 3 * x - 4 * y + z - 2 * self.d  # 2 * (1.5x - 2y + 0.5z - d), exact
            label = "1" if score2 > 0 else "0"
            out.append(
                Example(
                    prompt=f"[{x}, {y}, {z}]=",
                    target=label,
                    answer=label,
                    metadata={
                        "task": self.name,
                        "operands": [str(x), str(y), str(z)],
                        "score": canonical_number(_decimal(score2 * 5, 1)),  # score2 / 2, exact
                    },
                )
            )
        return out


def fone_tasks() -> list[Task]:
    """The FoNE tasks with the paper's default sizes."""
    k = 1000
    return [
        FoneArithmeticTask(
            "fone_decimal_add_6", "add", 6, 3, 720 * k, 80 * k, 200 * k,
            description="6-digit decimal addition (3+3 digits), 'a+b=' with a <= b",
        ),
        FoneArithmeticTask(
            "fone_int_add_6", "add", 6, 0, 720 * k, 80 * k, 200 * k,
            description="6-digit integer addition, 'a+b=' with a <= b",
        ),
        FoneArithmeticTask(
            "fone_int_sub_5", "sub", 5, 0, 720 * k, 80 * k, 200 * k,
            description="5-digit integer subtraction, 'a-b=' with a >= b",
        ),
        FoneArithmeticTask(
            "fone_int_mul_3", "mul", 3, 0, 360 * k, 40 * k, 100 * k,
            description="3-digit integer multiplication, 'a*b=' with a <= b (uses 500k of the 500,500 pairs)",
        ),
        FoneArithmeticTask(
            "fone_int_mul_4", "mul", 4, 0, 720 * k, 80 * k, 200 * k,
            description="4-digit integer multiplication, 'a*b=' with a <= b",
        ),
        FoneClassificationTask(
            "fone_classify_d10", 10,
            description="label of 1.5*x - 2*y + 0.5*z - 10 > 0 for sorted x <= y <= z in [0, 1000]",
        ),
        FoneClassificationTask(
            "fone_classify_dneg190", -190,
            description="label of 1.5*x - 2*y + 0.5*z + 190 > 0 for sorted x <= y <= z in [0, 1000]",
        ),
    ]  # fmt: skip
