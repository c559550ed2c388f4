"""Test utility: small Hugging Face tokenizers built fully offline with the ``tokenizers`` library.

``build_tokenizer(directory, kind)`` saves the tokenizer to ``directory`` and loads it back with
AutoTokenizer, so tests exercise the same path a downloaded checkpoint takes. Kinds:

- ``word``: one token per shipped word (lowercased), punctuation, digits and letters; unknown words are
  spelled with ``##`` pieces, so UUIDs and pass keys still encode. Adds BOS ``<s>``; has ``<unk>``.
- ``bpe``: byte-level BPE trained here on generated text, so some words take several tokens and any
  character encodes. No BOS, like GPT-2.
- ``tiny``: word-level over about 30 words; it cannot encode the suites (for error tests).

Every vocabulary stays under 2000 tokens so tiny models can use it.
"""

from __future__ import annotations

import re
import string
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from attnlab.tasks import generic_text, suites
from attnlab.tasks.text import lexicon

_TINY_WORDS = (
    "the a an is was and of to in it on at cat dog sun sky red big old new one two sat ran saw had not"
).split()


def _template_words() -> set[str]:
    fixed = " ".join(
        [
            suites.NIAH_CUE,
            suites.PASSKEY_CUE,
            suites.RULER_INTRO,
            suites.RULER_NEEDLE,
            suites.RULER_QUESTION,
            *suites.NIAH_ORDINALS,
            *suites.DECOY_MODIFIERS,
        ]
    )
    return set(re.findall(r"[a-z]+", fixed.lower()))


def _with_bos(tok: Tokenizer) -> None:
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", tok.token_to_id("<s>"))]
    )


def _word() -> PreTrainedTokenizerFast:
    chars = list(string.ascii_lowercase + string.digits)
    words = sorted({w for ws in lexicon().values() for w in ws} | _template_words() | set(chars))
    vocab = ["<unk>", "<s>", *string.punctuation, *("##" + c for c in chars), *words]
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tok.decoder = decoders.WordPiece()
    _with_bos(tok)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", unk_token="<unk>")


def _bpe() -> PreTrainedTokenizerFast:
    # Generated sentences plus the templates, UUID-like and pass-key-like strings: enough merges that most
    # common words are one token, few enough (vocab 1200) that some nouns split.
    corpus = generic_text(30_000, seed=11).split(". ")
    corpus += [
        suites.NIAH_CUE,
        suites.PASSKEY_CUE,
        suites.RULER_INTRO,
        suites.RULER_NEEDLE,
        suites.RULER_QUESTION,
        "3f2a9c4e-1b7d-4e0a-9c3f-5d8e2b6a1c70 QX7K2M9A",
    ] * 50
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1200,
        special_tokens=["<|endoftext|>"],
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")


def _tiny() -> PreTrainedTokenizerFast:
    vocab = ["<unk>", "<s>", ".", ",", *_TINY_WORDS]
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(vocab)}, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece()
    _with_bos(tok)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", unk_token="<unk>")


_KINDS = {"word": _word, "bpe": _bpe, "tiny": _tiny}


def build_tokenizer(directory: str | Path, kind: str):
    """Build tokenizer ``kind`` ("word", "bpe" or "tiny"), save it to ``directory``, and load it back."""
    if kind not in _KINDS:
        raise ValueError(f"unknown tokenizer kind {kind!r}; choose one of: {', '.join(_KINDS)}")
    _KINDS[kind]().save_pretrained(str(directory))
    return AutoTokenizer.from_pretrained(str(directory))
