"""The `numadapter` command line.

Commands:
    numadapter quickstart [--out DIR]   an offline tour of what numadapter does to numbers in text (no download):
                                        builds a small local tokenizer, shows how it splits numbers, how
                                        NumberTokenizer turns each into one [NUM] token with exact digits, and that
                                        FoNE features decode back exactly where float64 does not.

Heavy imports happen inside the commands so `numadapter --help` stays fast.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence

DEMO_TEXT = (
    "Invoice 2024-117: 12,345.67 dollars for 3 pallets of 1,250 kg, paid at 6.5% interest; "
    "Avogadro's number is 6.02214076e23 and 123456789012345678901234567890 has 30 digits."
)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="numadapter", description="Teach pretrained language models to read and write numbers as numbers."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    quick = sub.add_parser(
        "quickstart",
        help="offline tour: [NUM] tokenization, exact digits, FoNE features decoded back exactly",
        description="Offline tour of numadapter on a small tokenizer trained locally (nothing is downloaded).",
    )
    quick.add_argument("--out", default=None, help="directory for the local tokenizer (default: a temporary one)")
    quick.add_argument("--text", default=DEMO_TEXT, help="the text to show (default: a number-heavy sentence)")
    return parser


def quickstart(text: str = DEMO_TEXT, out: str | None = None, print_fn=print) -> dict[str, int]:
    """Runs the tour and returns the token counts it printed (raw, FoNE, digits) for `text`.

    Args:
        text: the text to tokenize.
        out: directory to save the local tokenizer to (a temporary directory when None).
        print_fn: where lines go (``print`` by default).

    Returns:
        ``{"raw": ..., "fone": ..., "digits": ..., "numbers": ...}`` token and number counts for `text`.
    """
    import math

    from numadapter import NumberAdapterConfig, NumberTokenizer, find_numbers, fone_decode, fone_features
    from numadapter.toy import build_tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        base = build_tokenizer("llama3", out or tmp)
        print_fn(f"Text:\n  {text}\n")
        spans = find_numbers(text)
        print_fn(f"find_numbers found {len(spans)} numbers (exact, never via float64):")
        for span in spans:
            print_fn(f"  {span.text!r:36} -> {span.exact}")

        raw_ids = base(text, add_special_tokens=False)["input_ids"]
        print_fn(f"\nA Llama-3-style tokenizer cuts them into digit groups ({len(raw_ids)} tokens):")
        print_fn("  " + " | ".join(base.convert_ids_to_tokens(raw_ids)).replace("\u0120", "_"))

        config = NumberAdapterConfig(encoding="fone", int_digits=30, frac_digits=4)
        ntok = NumberTokenizer(base, config)
        enc = ntok(text, add_special_tokens=False)
        ids = enc["input_ids"]
        print_fn(f"\nNumberTokenizer (encoding='fone'): one [NUM] per number ({len(ids)} tokens):")
        print_fn("  " + " | ".join(ntok.tokenizer.convert_ids_to_tokens(ids)).replace("\u0120", "_"))
        kept = len(enc["number_texts"])
        print_fn(
            f"  {kept} numbers became [NUM] (exact digits ride along in side tensors); {len(spans) - kept} stay "
            f"text (beyond int_digits={config.int_digits}/frac_digits={config.frac_digits}, out_of_range='text')."
        )
        print_fn(f"  decode(encode(text)) == text: {ntok.decode(enc) == text}")

        big = "123456789012345678901234567890"
        feats = fone_features([big], int_digits=30, frac_digits=0)
        print_fn(f"\nFoNE features of {big} (int_digits=30): {feats.shape[1]} values, cos/sin(2*pi*x/10^i)")
        print_fn(f"  fone_decode(features) = {fone_decode(feats, 30, 0)[0]}  (exact)")
        naive = [math.cos(2 * math.pi * float(big) / 10**i) for i in (1, 2, 3)]
        exact = feats[0, 0:6:2].tolist()
        print_fn(
            "  cos for periods 10, 100, 1000 from exact digits: "
            + ", ".join(f"{v:+.4f}" for v in exact)
            + "\n  the same from float64(x):                        "
            + ", ".join(f"{v:+.4f}" for v in naive)
        )

        digits = NumberTokenizer(base, NumberAdapterConfig(encoding="digits", aggregate=True, int_digits=30))
        n_digits = len(digits(text, add_special_tokens=False)["input_ids"])
        print_fn(f"\nencoding='digits' + [AGG]: one token per digit plus [AGG] per number ({n_digits} tokens).")
    return {"raw": len(raw_ids), "fone": len(ids), "digits": n_digits, "numbers": kept}


def main(argv: Sequence[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    if args.command == "quickstart":
        quickstart(text=args.text, out=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
