"""Encoding speed of `NumberTokenizer` vs the raw fast tokenizer it wraps, on number-heavy text.

Both encode the same generated corpus (prose with about one number every four words: integers, decimals,
thousands separators, signs, percentages, years, exponents) in batches, with the same padding / return_tensors
arguments, on the same tokenizer object. Every repetition encodes the whole corpus once with each, in rotating
order, so drifts in machine load hit both alike; throughputs are medians over repetitions and the ratio is the
median of the per-repetition ratios (NumberTokenizer / raw; the target is >= 0.5).

The raw tokenizer is a byte-level BPE with Llama 3's pre-tokenizer (digit runs of 1-3) trained here on a separate
sample of the same generator (offline); ``--tokenizer PATH`` measures any local Hugging Face tokenizer instead.

Run: ``python -m eval_harness.bench.tokenizer_speed [--encoding fone] [--texts 2000] [--batch-size 64]
[--repeats 7] [--tokenizer PATH] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
from typing import Any

from eval_harness.bench.common import interleaved_times, median_ratio, write_json
from numadapter.testing.toy import WORDS, random_number


def make_corpus(n_texts: int = 2000, words_per_text: int = 80, number_share: float = 0.25, seed: int = 0) -> list[str]:
    """`n_texts` sentences-of-prose texts in which about `number_share` of the words are numbers."""
    rng = random.Random(seed)
    texts = []
    for _ in range(n_texts):
        words = [
            random_number(rng) if rng.random() < number_share else rng.choice(WORDS) for _ in range(words_per_text)
        ]
        texts.append(" ".join(words).capitalize() + ".")
    return texts


def train_tokenizer(vocab_size: int = 8000, seed: int = 1) -> Any:
    """numadapter.testing.toy's Llama-3-like byte-level BPE, trained offline on a separate corpus sample."""
    from transformers import PreTrainedTokenizerFast

    from numadapter.testing.toy import CONFIGS
    from numadapter.testing.toy import train_tokenizer as train

    spec = CONFIGS["llama3"]
    tok = train("llama3", vocab_size=vocab_size, lines=make_corpus(3000, seed=seed))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=spec.bos_token, eos_token=spec.eos_token, pad_token=spec.pad_token
    )


def _encode_all(fn: Any, texts: list[str], batch_size: int, kwargs: dict[str, Any]) -> None:
    """Encodes `texts` with `fn` in batches of `batch_size` (the work one side does in one repetition)."""
    for i in range(0, len(texts), batch_size):
        fn(texts[i : i + batch_size], **kwargs)


def run(
    *,
    encoding: str = "fone",
    n_texts: int = 2000,
    batch_size: int = 64,
    repeats: int = 7,
    warmup: int = 1,
    padding: bool = True,
    return_tensors: str | None = "pt",
    tokenizer_path: str | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Measure raw vs NumberTokenizer encoding throughput; returns medians, the ratio and the corpus statistics.

    Args:
        encoding: NumberAdapterConfig.encoding ("fone", "xval" or "digits").
        n_texts: corpus size (texts of about 80 words).
        batch_size: texts per call.
        repeats: timed repetitions per side (interleaved).
        warmup: untimed repetitions first.
        padding: passed to both (``True`` pads each batch to its longest text).
        return_tensors: passed to both (``"pt"`` or None for Python lists).
        tokenizer_path: a local Hugging Face tokenizer directory (default: the built-in Llama-3-like BPE).
        seed: corpus seed.
    """
    from transformers import AutoTokenizer

    from numadapter import NumberAdapterConfig, NumberTokenizer, find_numbers

    texts = make_corpus(n_texts, seed=seed)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path) if tokenizer_path else train_tokenizer()
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    config = NumberAdapterConfig(encoding=encoding, int_digits=8, frac_digits=4, fone_numbers="all")
    ntok = NumberTokenizer(tokenizer, config)
    kwargs = {"padding": padding, "return_tensors": return_tensors}
    sides = {"raw": tokenizer, "numadapter": ntok}
    fns = {name: functools.partial(_encode_all, fn, texts, batch_size, kwargs) for name, fn in sides.items()}
    times = interleaved_times(fns, repeats, warmup)["wall"]
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    median = {name: statistics.median(ts) for name, ts in times.items()}
    raw_tokens = sum(len(ids) for ids in tokenizer(texts)["input_ids"])
    return {
        "config": {
            "encoding": encoding,
            "n_texts": n_texts,
            "batch_size": batch_size,
            "repeats": repeats,
            "padding": padding,
            "return_tensors": return_tensors,
            "tokenizer": tokenizer_path or "built-in Llama-3-like byte-level BPE (8k)",
        },
        "corpus": {
            "megabytes": megabytes,
            "numbers_per_text": sum(len(find_numbers(t)) for t in texts) / n_texts,
            "chars_per_text": sum(map(len, texts)) / n_texts,
            "raw_tokens_per_text": raw_tokens / n_texts,
        },
        "median_s": median,
        "texts_per_s": {name: n_texts / s for name, s in median.items()},
        "mb_per_s": {name: megabytes / s for name, s in median.items()},
        "ratio": median_ratio(times, "raw", "numadapter"),
    }


def _print(result: dict[str, Any]) -> None:
    print(f"config: {result['config']}")
    print(f"corpus: {result['corpus']}")
    print(f"medians over {result['config']['repeats']} interleaved repetitions:")
    for name in result["median_s"]:
        print(
            f"  {name:11s} {result['median_s'][name]:8.3f} s  {result['texts_per_s'][name]:10.0f} texts/s  "
            f"{result['mb_per_s'][name]:7.2f} MB/s"
        )
    print(f"  throughput ratio numadapter / raw: {result['ratio']:.3f}  (target >= 0.5)")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoding", default="fone", choices=["fone", "xval", "digits"])
    parser.add_argument("--texts", type=int, default=2000, help="corpus size (about 80 words per text)")
    parser.add_argument("--batch-size", type=int, default=64, help="texts per call")
    parser.add_argument("--repeats", type=int, default=7, help="timed repetitions per side (interleaved)")
    parser.add_argument("--lists", action="store_true", help="return Python lists (no padding) instead of tensors")
    parser.add_argument("--tokenizer", default=None, help="a local Hugging Face tokenizer directory")
    parser.add_argument("--json", default=None, help="also write the result dict to this JSON file")
    args = parser.parse_args(argv)
    result = run(
        encoding=args.encoding,
        n_texts=args.texts,
        batch_size=args.batch_size,
        repeats=args.repeats,
        padding=not args.lists,
        return_tensors=None if args.lists else "pt",
        tokenizer_path=args.tokenizer,
    )
    _print(result)
    write_json(result, args.json)
    return result


if __name__ == "__main__":
    main()
