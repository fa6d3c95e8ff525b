"""Can a head choose the ledger's numbers by their own hidden states? A linear probe on the frozen base.

The context head gives a coefficient (-1, 0, +1) to each of the last K numbers from the hidden state at the answer
alone, so a ledger of n changes (2n + 1 numbers back to the opening balance, list numbers included) needs K >= 2n + 1
and 3^K combinations scored. A head that reads each number's own hidden state (what attention over the numbers
would see) could give every number its coefficient wherever it stands. This probe measures whether the frozen
base's hidden state at a number says its role: +1 (the opening balance, a deposit), -1 (a withdrawal), 0 (the
account id, the date, a list number). A logistic regression on the hidden states of the numbers of training
prompts, scored on held-out prompts: per number, and per prompt (every coefficient right: the answer's upper bound
for such a head with an exact read-out). Positions: the number's last token, and the token after it (which sees
the ")" of a list number).

``python -m eval_harness.suite.pointer_probe`` writes ``eval_harness/results/suite/pointer_probe.json``.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

OUT = Path(__file__).parent.parent / "results" / "suite" / "pointer_probe.json"
ROLE = {"deposit": 1, "withdrawal": -1}


def roles(prompt: str) -> list[tuple[int, int]]:
    """``(end character offset, coefficient)`` of every number of a ledger prompt, in text order: the account id and
    the date parts 0, the opening balance +1, each list number 0 and each change +1 (deposit) / -1 (withdrawal)."""
    from numadapter import find_numbers

    spans = find_numbers(prompt)
    changes = re.findall(r"\d+\) (deposit|withdrawal) \d+", prompt)
    coefficients = [0, 0, 0, 0, 1] + [c for kind in changes for c in (0, ROLE[kind])]
    if len(spans) != len(coefficients):
        raise ValueError(f"{len(spans)} numbers in {prompt!r}, expected {len(coefficients)}.")
    return [(span.end, c) for span, c in zip(spans, coefficients)]


def features(base: str, prompts: list[str], layers: list[int]) -> dict[str, Any]:
    """Hidden states of the frozen base at every number: ``{"last" | "next": float32 [L, N, H], "label": [N],
    "prompt": [N]}`` (layers `layers`; N numbers over all prompts)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
    last, after, labels, owner = [], [], [], []
    with torch.no_grad():
        for index, prompt in enumerate(prompts):
            enc = tokenizer(prompt, return_offsets_mapping=True, return_tensors="pt")
            ends = enc.pop("offset_mapping")[0, :, 1].tolist()  # (T,): each token's end character
            hidden = torch.stack(model(**enc, output_hidden_states=True).hidden_states)[layers, 0]  # (L, T, H)
            for end, coefficient in roles(prompt):
                token = next(t for t, e in enumerate(ends) if e >= end)  # the token holding the last digit
                last.append(hidden[:, token])
                after.append(hidden[:, min(token + 1, hidden.shape[1] - 1)])
                labels.append(coefficient + 1)  # classes 0, 1, 2 for -1, 0, +1
                owner.append(index)
    return {"last": torch.stack(last, 1), "next": torch.stack(after, 1), "label": torch.tensor(labels),
            "prompt": torch.tensor(owner)}  # fmt: skip


def fit_and_score(x: Any, y: Any, train: Any, owner: Any, steps: int = 300) -> dict[str, float]:
    """A 3-class logistic regression on the standardised `x` ``[N, H]`` rows of `train` (a bool ``[N]``), scored on
    the others: accuracy per number and the share of held-out prompts with every number right."""
    import torch

    mean, std = x[train].mean(0), x[train].std(0) + 1e-6
    z = (x - mean) / std
    linear = torch.nn.Linear(z.shape[1], 3)
    optimizer = torch.optim.LBFGS(linear.parameters(), max_iter=steps, line_search_fn="strong_wolfe")

    def closure() -> Any:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(linear(z[train]), y[train]) + 1e-3 * linear.weight.square().sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        right = linear(z).argmax(-1) == y
    held = ~train
    prompts = owner[held].unique()
    whole = [bool(right[held & (owner == p)].all()) for p in prompts.tolist()]
    return {"number_accuracy": float(right[held].float().mean()), "prompts_all_right": sum(whole) / len(whole),
            "train_accuracy": float(right[train].float().mean())}  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, Any]:
    import torch

    import numadapter
    from eval_harness.suite.families import family_rows

    parser = argparse.ArgumentParser(prog="python -m eval_harness.suite.pointer_probe", description=__doc__)
    parser.add_argument("--n-train", type=int, default=300)
    parser.add_argument("--n-eval", type=int, default=100)
    parser.add_argument("--layers", default="10,20,30", help="hidden-state layers (0: the embeddings)")
    parser.add_argument("--base", default=None)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    base = args.base or numadapter.smollm2_path()
    train_rows, held_rows = family_rows("ledger", args.n_train, args.n_eval, 0)
    layers = [int(t) for t in args.layers.split(",")]
    found = features(base, [r["prompt"] for r in train_rows + held_rows], layers)
    train = found["prompt"] < len(train_rows)
    record: dict[str, Any] = {"base": str(base), "n_train": args.n_train, "n_eval": args.n_eval, "layers": layers,
                              "numbers": int(found["label"].numel()), "results": []}  # fmt: skip
    for position in ("last", "next"):
        for row, layer in enumerate(layers):
            scores = fit_and_score(found[position][row], found["label"], train, found["prompt"])
            record["results"].append({"position": position, "layer": layer, **scores})
            print(f"{position:4} layer {layer:2}: {scores}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1))
    print(f"wrote {args.out}")
    return record


if __name__ == "__main__":
    main()
