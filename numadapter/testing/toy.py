"""Small local tokenizers for demos, benchmarks and tests: trained offline with the `tokenizers` library.

Nothing is downloaded. Each kind is trained on a deterministic built-in corpus of English-like sentences full of
numbers, wrapped as a transformers fast tokenizer, saved with `save_pretrained` and loaded back.

Kinds (`build_tokenizer(kind, path)`):
    - ``"digits"``: byte-level BPE, every digit its own token (``Digits(individual_digits=True)``), Llama-2-like
      special tokens: ``<unk>`` 0, ``<s>`` 1 (bos, prepended), ``</s>`` 2 (eos), ``<pad>`` 3.
    - ``"llama3"``: byte-level BPE with Llama 3's split regex, so digit runs are split in groups of 1-3 and the vocab
      holds multi-digit pieces ("12", "345", ...). ``<|begin_of_text|>`` (bos, prepended), ``<|end_of_text|>``
      (eos), ``<|finetune_right_pad_id|>`` (pad; real Llama 3 has none, tests need one).
    - ``"t5"``: SentencePiece-style Unigram with a Metaspace ("\u2581") pre-tokenizer and decoder; ``<pad>`` 0 (also
      the decoder start token), ``</s>`` 1 (eos, appended), ``<unk>`` 2; no bos. Its normaliser collapses runs of
      spaces, so like real T5 its own round trip is lossy on whitespace runs and unknown characters.

Every digit 0-9 is a single token in every kind.
"""

from __future__ import annotations

import json
import math
import os
import random
import string
from dataclasses import dataclass, replace

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

TOKENIZER_KINDS = ("digits", "llama3", "t5")

__all__ = [
    "CONFIGS",
    "TOKENIZER_KINDS",
    "WORDS",
    "TokenizerSpec",
    "build_tokenizer",
    "corpus",
    "random_number",
    "train_tokenizer",
]

# Llama 3's pre-tokenizer split pattern (digits in runs of at most 3).
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)


@dataclass(frozen=True)
class TokenizerSpec:
    """Special tokens of one tokenizer kind (ids are fixed: the specials come first in the vocab)."""

    kind: str
    specials: tuple[str, ...]  # in id order, ids 0..len-1
    bos_token: str | None
    eos_token: str
    unk_token: str | None
    pad_token: str
    vocab_size: int  # trainer target; the real size is len(tokenizer)

    def token_id(self, token: str | None) -> int | None:
        return None if token is None else self.specials.index(token)

    @property
    def bos_token_id(self) -> int | None:
        return self.token_id(self.bos_token)

    @property
    def eos_token_id(self) -> int:
        return self.specials.index(self.eos_token)

    @property
    def pad_token_id(self) -> int:
        return self.specials.index(self.pad_token)

    @property
    def unk_token_id(self) -> int | None:
        return self.token_id(self.unk_token)


CONFIGS: dict[str, TokenizerSpec] = {
    "digits": TokenizerSpec("digits", ("<unk>", "<s>", "</s>", "<pad>"), "<s>", "</s>", "<unk>", "<pad>", 700),
    "llama3": TokenizerSpec(
        "llama3",
        ("<|begin_of_text|>", "<|end_of_text|>", "<|finetune_right_pad_id|>"),
        "<|begin_of_text|>",
        "<|end_of_text|>",
        None,
        "<|finetune_right_pad_id|>",
        900,
    ),
    "t5": TokenizerSpec("t5", ("<pad>", "</s>", "<unk>"), None, "</s>", "<unk>", "<pad>", 700),
}

WORDS = (
    "the a an of to and in is was for on with as by at from that this it are be or which price total sum "
    "year day month cost value number count average rate about after before between than more less each "
    "apples oranges bananas people cars miles meters kilograms dollars euros items students tickets books "
    "city river store company report answer question result times plus minus equals what how many much "
    "bought sold paid received measured grew fell rose dropped reached weighed counted scored added "
    "Alice Bob Carol David Emma Frank Grace Henry Paris London Tokyo January March October Monday Friday"
).split()


def random_number(rng: random.Random) -> str:
    """One number in one of many surface forms."""
    form = rng.randrange(10)
    if form == 0:
        return str(rng.randrange(10))
    if form == 1:
        return str(rng.randrange(10, 1000))
    if form == 2:
        return str(rng.randrange(1000, 10**7))
    if form == 3:
        return f"{rng.randrange(0, 10**4)}.{rng.randrange(0, 100):02d}"
    if form == 4:
        return f"-{rng.randrange(1, 500)}"
    if form == 5:
        return f"{rng.randrange(1000, 10**6):,}"
    if form == 6:
        return f"{rng.randrange(1, 100)}%"
    if form == 7:
        return f"{rng.randrange(1900, 2030)}"
    if form == 8:
        return f"0.{rng.randrange(0, 1000):03d}"
    return f"{rng.randrange(1, 10)}.{rng.randrange(0, 100)}e{rng.randrange(1, 30)}"


def corpus(n_lines: int = 600, seed: int = 0) -> list[str]:
    """A deterministic English-like corpus with many numbers (and every digit alone, with and without a space)."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n_lines):
        parts = []
        for _ in range(rng.randrange(6, 16)):
            parts.append(random_number(rng) if rng.random() < 0.3 else rng.choice(WORDS))
        sep = rng.choice([" ", " ", " ", ", "])
        lines.append(sep.join(parts).capitalize() + rng.choice([".", "?", "!", ":"]))
    # every digit, alone and after a space, and all 2-digit numbers so multi-digit merges exist
    lines.append(" ".join(str(d) for d in range(10)))
    lines.append("".join(str(d) for d in range(10)))
    lines.extend(" ".join(str(n) for n in range(k, k + 10)) for k in range(10, 100, 10))
    return lines


def _train_byte_level_bpe(
    spec: TokenizerSpec, lines: list[str], model: models.Model, pre_tokenizer: pre_tokenizers.PreTokenizer
) -> Tokenizer:
    """A byte-level BPE trained on `lines` with the given splitting, prepending bos like Llama tokenizers."""
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        special_tokens=list(spec.specials),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{spec.bos_token} $A",
        pair=f"{spec.bos_token} $A {spec.bos_token} $B",
        special_tokens=[(spec.bos_token, spec.bos_token_id)],
    )
    return tok


def _train_digits(spec: TokenizerSpec, lines: list[str]) -> Tokenizer:
    split = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    return _train_byte_level_bpe(spec, lines, models.BPE(unk_token=spec.unk_token, byte_fallback=False), split)


def _train_llama3(spec: TokenizerSpec, lines: list[str]) -> Tokenizer:
    split = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    return _train_byte_level_bpe(spec, lines, models.BPE(ignore_merges=True), split)


def _canonical_unigram_vocab(vocab: list, n_specials: int, lines: list[str]) -> list[list]:
    """The trained Unigram pieces with scores and order that do not change from one process to the next.

    The `tokenizers` Unigram trainer picks the same pieces every run but breaks ties in hash-map order, so the ids of
    equally scored pieces (and the scores, by ~0.006) changed between processes, and with them every T5 test model.
    The specials keep their ids (first); every other piece is scored ``log((count + 1) / (total + pieces))``, its
    count being its occurrences in the corpus written as the Metaspace pre-tokenizer sees it, and pieces are ordered
    by score, then text.
    """
    text = "".join("\u2581" + word for line in lines for word in line.split())
    pieces = sorted({piece for piece, _ in vocab[n_specials:]})
    counts = {piece: text.count(piece) for piece in pieces}
    total = sum(counts.values()) + len(pieces)
    scored = [[piece, math.log((counts[piece] + 1) / total)] for piece in pieces]
    scored.sort(key=lambda item: (-item[1], item[0]))
    return [list(item) for item in vocab[:n_specials]] + scored


def _train_t5(spec: TokenizerSpec, lines: list[str]) -> Tokenizer:
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(
        vocab_size=spec.vocab_size,
        special_tokens=list(spec.specials),
        unk_token=spec.unk_token,
        initial_alphabet=list(string.ascii_letters + string.digits + string.punctuation),
        max_piece_length=8,
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer=trainer)
    # make sure the single digits and "\u2581"+digit pieces exist (the trainer may prune some)
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    have = {piece for piece, _ in vocab}
    low = min(score for _, score in vocab if score != 0.0) - 1.0
    for piece in [str(d) for d in range(10)] + ["\u2581" + str(d) for d in range(10)]:
        if piece not in have:
            vocab.append([piece, low])
    data["model"]["vocab"] = _canonical_unigram_vocab(vocab, len(spec.specials), lines)
    tok = Tokenizer.from_str(json.dumps(data))
    tok.post_processor = processors.TemplateProcessing(
        single=f"$A {spec.eos_token}",
        pair=f"$A {spec.eos_token} $B {spec.eos_token}",
        special_tokens=[(spec.eos_token, spec.eos_token_id)],
    )
    return tok


_TRAINERS = {"digits": _train_digits, "llama3": _train_llama3, "t5": _train_t5}
_CACHE: dict[str, Tokenizer] = {}


def train_tokenizer(kind: str, vocab_size: int | None = None, lines: list[str] | None = None) -> Tokenizer:
    """The raw `tokenizers.Tokenizer` of `kind`, trained on `lines` (default: `corpus()`).

    With the default corpus and vocabulary size the result is trained once per process, then copied.
    """
    if kind not in TOKENIZER_KINDS:
        raise ValueError(f"Unknown tokenizer kind {kind!r}; choose one of {list(TOKENIZER_KINDS)}.")
    spec = CONFIGS[kind]
    if vocab_size is not None or lines is not None:
        spec = replace(spec, vocab_size=vocab_size or spec.vocab_size)
        return _TRAINERS[kind](spec, lines if lines is not None else corpus())
    if kind not in _CACHE:
        _CACHE[kind] = _TRAINERS[kind](spec, corpus())
    return Tokenizer.from_str(_CACHE[kind].to_str())


def build_tokenizer(kind: str, path: str | os.PathLike, padding_side: str = "right") -> PreTrainedTokenizerFast:
    """Trains (or reuses) the `kind` tokenizer, saves it to `path` and returns `AutoTokenizer.from_pretrained(path)`.

    Args:
        kind: ``"digits"``, ``"llama3"`` or ``"t5"`` (see the module docstring).
        path: directory to save to (created if missing), e.g. pytest's ``tmp_path / "tok"``.
        padding_side: ``"right"`` or ``"left"``.

    Returns:
        The reloaded fast tokenizer.
    """
    spec = CONFIGS.get(kind)
    if spec is None:
        raise ValueError(f"Unknown tokenizer kind {kind!r}; choose one of {list(TOKENIZER_KINDS)}.")
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=train_tokenizer(kind),
        bos_token=spec.bos_token,
        eos_token=spec.eos_token,
        unk_token=spec.unk_token,
        pad_token=spec.pad_token,
        padding_side=padding_side,
        model_max_length=512,
        clean_up_tokenization_spaces=False,
    )
    os.makedirs(path, exist_ok=True)
    wrapped.save_pretrained(path)
    return AutoTokenizer.from_pretrained(path)
