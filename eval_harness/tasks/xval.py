"""xVal multi-operand arithmetic (Golkar et al., "xVal: A Continuous Number Encoding for Large Language Models",
Sec. 3.1, Table 3).

The paper: "random binary trees combining a fixed number of operands (2, 3, or 4) using the binary operators of
addition, subtraction, and multiplication ... such as ((1.32 * 32.1) + (1.42-8.20)) = 35.592", evaluated by R^2
between the true value and the prediction. The paper gives neither operand ranges nor split sizes; our choices:

- operands: uniform over 0.00 .. 99.99 in steps of 0.01, always written with 2 decimals ("8.20", "0.05");
- tree shape: uniform over the Catalan(k-1) binary-tree shapes with k leaves; each inner node's operator
  uniform over {+, -, *} (all combinations equally likely: index = (shape, operators, operands) in mixed radix,
  drawn without replacement by `KeyedPermutation`, so splits are disjoint and duplicate-free);
- format: every inner node is parenthesised except the root, no spaces, then "=":
  ``"(1.32*32.10)+(1.42-8.20)="``;
- target: the exact value in canonical form (no trailing zeros), e.g. ``"35.592"``, ``"-6.78"``;
- default sizes: 100,000 train / 10,000 valid / 10,000 test.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, localcontext
from functools import cache

import numpy as np

from .base import Example, Task, canonical_number
from .sampling import PermutedSpaceTask

_OPERATORS = ("+", "-", "*")
_VALUES = 10_000  # 0.00 .. 99.99

# A tree shape is None (a leaf) or a (left, right) pair of shapes.
Shape = tuple | None


@cache
def tree_shapes(leaves: int) -> tuple[Shape, ...]:
    """All binary-tree shapes with `leaves` leaves (Catalan(leaves - 1) of them), in a fixed order."""
    if leaves == 1:
        return (None,)
    out: list[Shape] = []
    for left in range(1, leaves):
        for ls in tree_shapes(left):
            for rs in tree_shapes(leaves - left):
                out.append((ls, rs))
    return tuple(out)


def _format_string(shape: Shape, root: bool = True) -> str:
    """A str.format template for `shape`: in-order traversal alternates leaf, operator, leaf, ..., so the
    template only adds the parentheses: 3 leaves ((x o x) o x) -> "({}{}{}){}{}"."""
    if shape is None:
        return "{}"
    text = _format_string(shape[0], False) + "{}" + _format_string(shape[1], False)
    return text if root else f"({text})"


def _evaluate(shape: Shape, leaves: list[Decimal], ops: list[str]) -> Decimal:
    if shape is None:
        return leaves.pop(0)
    left = _evaluate(shape[0], leaves, ops)
    op = ops.pop(0)
    right = _evaluate(shape[1], leaves, ops)
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    return left * right


@dataclass(frozen=True, eq=False)
class XvalExpressionTask(PermutedSpaceTask):
    """Random expression trees with `operands` leaves, e.g. ``"(1.32*32.10)+(1.42-8.20)="`` -> ``"35.592"``.

    Args:
        name: registry name.
        operands: number of leaves (2, 3 or 4 as in the paper; 1..4 accepted: 5 would not fit the 64-bit index
            space of `KeyedPermutation`).
        n_train, n_valid, n_test: default split sizes.
    """

    name: str
    operands: int
    n_train: int = 100_000
    n_valid: int = 10_000
    n_test: int = 10_000
    description: str = ""
    metrics: tuple[str, ...] = ("r2", "mae", "exact_match")
    source: str = "xVal Sec. 3.1, Table 3"

    def __post_init__(self) -> None:
        if not 1 <= self.operands <= 4:
            raise ValueError(
                f"`operands` must be in [1, 4] (the index space must fit in 64 bits), got {self.operands}."
            )
        super().__post_init__()

    @property
    def space_size(self) -> int:
        """shapes * 3^(k-1) operator choices * 10^4^k operand choices."""
        k = self.operands
        return len(tree_shapes(k)) * len(_OPERATORS) ** (k - 1) * _VALUES**k

    def _generate(self, split: str, n: int, seed: int) -> list[Example]:
        k = self.operands
        shapes = tree_shapes(k)
        templates = [_format_string(shape) + "=" for shape in shapes]
        index = self._ranks("xval", split, n, seed)  # (n,) uint64, decoded in mixed radix below
        unit_cols = []
        for _ in range(k):
            unit_cols.append((index % np.uint64(_VALUES)).tolist())
            index = index // np.uint64(_VALUES)
        op_cols = []
        for _ in range(k - 1):
            op_cols.append((index % np.uint64(len(_OPERATORS))).tolist())
            index = index // np.uint64(len(_OPERATORS))
        shape_col = index.tolist()
        texts_table = [f"{u // 100}.{u % 100:02d}" for u in range(_VALUES)]
        values_table = [Decimal(t) for t in texts_table]
        out = []
        with localcontext() as ctx:
            ctx.prec = 80  # exact: at most 4 operands of 4 significant digits multiplied
            for i in range(n):
                units = [col[i] for col in unit_cols]
                ops = [_OPERATORS[col[i]] for col in op_cols]
                texts = [texts_table[u] for u in units]
                interleaved = [texts[0]]
                for op, text in zip(ops, texts[1:]):
                    interleaved += [op, text]
                prompt = templates[shape_col[i]].format(*interleaved)
                value = _evaluate(shapes[shape_col[i]], [values_table[u] for u in units], list(ops))
                answer = canonical_number(value)
                out.append(
                    Example(
                        prompt=prompt,
                        target=answer,
                        answer=answer,
                        metadata={"task": self.name, "operands": texts, "ops": ops},
                    )
                )
        return out


def xval_tasks() -> list[Task]:
    """The xVal multi-operand tasks (2, 3 and 4 operands)."""
    return [
        XvalExpressionTask(
            f"xval_expr_{k}", k, description=f"random expression tree over {k} operands in [0, 99.99] with +, -, *"
        )
        for k in (2, 3, 4)
    ]
