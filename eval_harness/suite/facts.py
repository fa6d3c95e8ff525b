"""Numbers the base knows: short factual prompts, the ones the base answers right, and retention after training.

`FACTS` (`numadapter.data.known_facts`, shared with the quick start) is a hand-written list of prompts whose next words
are a number (units, constants, dates, conversions). `base_known` greedily completes each with the base model (no
adapter) and keeps those whose first generated number is the answer; it caches the list with the base's answers in
``<out>/facts/base_known.json``. `fact_rows` splits the kept facts into seeded, disjoint ``train`` and ``held-out``
halves (the ``facts`` family), and `score_facts` scores an already trained adapter on facts it was not trained on
(every known fact after a task family, the held-out half after the facts family), to check that fine-tuning on a task
does not erase them.

Both checks read the FIRST number of a completion: the base (and an adapter not trained on facts) goes on writing
after the answer ("60. There are 24 hours in a day"), so its last number is not its answer.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from numadapter.data.known_facts import FACTS, first_number
from numadapter.data.known_facts import base_answers as greedy_base

__all__ = ["FACTS", "base_known", "fact_rows", "first_number", "greedy_base", "score_facts"]


def _digest(facts: Sequence[tuple[str, str]], base: str) -> str:
    return hashlib.sha256(json.dumps([list(facts), base]).encode()).hexdigest()[:16]


def base_known(base: str, out: Path, facts: Sequence[tuple[str, str]] = FACTS, complete=greedy_base) -> list[dict]:
    """The facts the base answers right (first generated number == the answer), cached under ``<out>/facts/``.

    Args:
        base: the base model's directory.
        out: the results folder; ``facts/base_known.json`` holds every fact, the base's answer and whether it was
            right, with a digest of the facts and the base path (a changed list or base is asked again).
        facts: ``(prompt, answer)`` pairs.
        complete: ``complete(base, prompts) -> continuations`` (`greedy_base`; tests pass a stand-in).

    Returns:
        ``[{"prompt", "answer", "base_answer"}]`` of the known facts, in list order.
    """
    cache = out / "facts" / "base_known.json"
    digest = _digest(facts, base)
    if cache.is_file() and json.loads(cache.read_text()).get("digest") == digest:
        checked = json.loads(cache.read_text())["facts"]
    else:
        answers = complete(base, [prompt for prompt, _ in facts])
        checked = [
            {"prompt": p, "answer": a, "base_answer": got, "known": first_number(got) == Decimal(a)}
            for (p, a), got in zip(facts, answers)
        ]
        cache.parent.mkdir(parents=True, exist_ok=True)
        known = sum(f["known"] for f in checked)
        cache.write_text(json.dumps({"base": base, "digest": digest, "known": known, "facts": checked}, indent=1))
    return [{k: f[k] for k in ("prompt", "answer", "base_answer")} for f in checked if f["known"]]


def fact_rows(known: Sequence[dict], seed: int) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The known facts as rows, shuffled with `seed` and cut in two disjoint halves: ``(train, held_out)``."""
    rows = [{"prompt": f["prompt"], "completion": f" {f['answer']}"} for f in known]
    random.Random(seed).shuffle(rows)
    half = len(rows) // 2
    return rows[:half], rows[half:]


def score_facts(model: Any, ntok: Any, held_out: Sequence[dict[str, str]], batch: int = 32) -> dict[str, Any]:
    """How many base-known facts a trained adapter still answers: first generated number == the answer.

    Returns:
        ``{"facts": n, "facts_retained": share right (NaN when there are none), "fact_answers": [the adapter's
        continuation of each prompt]}``.
    """
    from numadapter.evaluation import generate_answers, last_number

    answers = generate_answers(model, ntok, [r["prompt"] for r in held_out], 8, batch, progress=False)
    right = sum(first_number(got) == last_number(r["completion"]) for got, r in zip(answers, held_out))
    share = right / len(held_out) if held_out else float("nan")
    return {"facts": len(held_out), "facts_retained": share, "fact_answers": list(answers)}
