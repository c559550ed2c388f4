"""Generated English-like text: NIAH haystacks, copying passages and held-out generic text.

Sentences come from a small grammar over the word lists shipped in ``words/*.txt``, so no prompt depends on
a downloaded corpus, none is a memorized opening, and the text can never contain a suite's cue words.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

import numpy as np

from attnlab.errors import ArgumentError

# Words that name what a suite plants; generated text must never hold them, even inside a longer word
# ("monkey", "sword"), or a model could find the needle sentence by its cue.
CUE_WORDS = ("secret", "word", "pass", "key", "magic", "uuid", "special")

CATEGORIES = ("nouns", "adjectives", "verbs", "adverbs", "prepositions")

# Generic text draws from stream 0; the suites in ``prompts`` use streams 1 and up, so calibration text
# never repeats a prompt's sentences for the same seed.
GENERIC_STREAM = 0

_SLOTS = {"N": "nouns", "A": "adjectives", "V": "verbs", "D": "adverbs", "P": "prepositions"}

# Nouns never open a sentence, so each occurs as " noun": the form prompts screens against the needle.
_TEMPLATES = (
    "the {A} {N} {V} the {N} {P} the {N}.",
    "a {N} {V} a {A} {N}.",
    "{D}, the {N} {V} the {A} {N}.",
    "the {N} {V} the {N} {D}.",
    "every {N} {P} the {N} was {A}.",
    "the {N} was {A}, and the {N} was {A}.",
    "my {N} {V} your {A} {N} {P} the {N}.",
    "the {A} {N} and the {A} {N} {V} a {N}.",
    "nobody {V} the {N} {P} the {A} {N}.",
    "{D}, a {A} {N} {V} her {N}.",
    "their {N} {V} his {N} {D}.",
    "one {A} {N} {V} the {N} and the {N}.",
)


# Chapters I to L of Jane Austen, Pride and Prejudice (1813; public domain), from Project Gutenberg eBook #1342:
# illustrations, their captions and italics marks removed, quotes and dashes set as ASCII, one paragraph a line.
# Real long-form prose for reading a checkpoint past its window (125k tokens of SmolLM2's tokenizer).
NOVEL = "pride_and_prejudice.txt"


def novel_path() -> str:
    """The path of the bundled novel (``NOVEL``), a UTF-8 text file."""
    return str(resources.files("attnlab.tasks").joinpath("words", NOVEL))


def bundled(name: str) -> str:
    """The text of a data file shipped in ``words/``."""
    # importlib.resources reads the files from an installed wheel as well as from a source checkout.
    return resources.files("attnlab.tasks").joinpath("words", name).read_text("utf-8")


@cache
def _words(category: str) -> tuple[str, ...]:
    return tuple(line.strip() for line in bundled(f"{category}.txt").splitlines() if line.strip())


def lexicon() -> dict[str, tuple[str, ...]]:
    """The shipped word lists by category (``nouns``, ``adjectives``, ``verbs``, ``adverbs``, ``prepositions``)."""
    return {category: _words(category) for category in CATEGORIES}


def sentence(rng: np.random.Generator, lex: dict[str, tuple[str, ...]]) -> str:
    """One grammatical sentence drawn from ``rng`` with words from ``lex``, ending in a period."""
    template = _TEMPLATES[rng.integers(len(_TEMPLATES))]

    def fill(slot: re.Match) -> str:
        words = lex[_SLOTS[slot.group(1)]]
        return words[rng.integers(len(words))]

    text = re.sub(r"\{(\w)\}", fill, template)
    text = re.sub(r"\b([Aa]) (?=[aeiou])", r"\1n ", text)
    return text[0].upper() + text[1:]


def sentences(rng: np.random.Generator, lex: dict[str, tuple[str, ...]], n: int) -> list[str]:
    """``n`` sentences drawn in order from ``rng``."""
    return [sentence(rng, lex) for _ in range(n)]


def split_sentences(text: str) -> tuple[str, ...]:
    """The sentences of a user's text: runs ending in '.', '!' or '?' followed by whitespace, whitespace
    collapsed, empty ones dropped."""
    return tuple(s for s in (" ".join(part.split()) for part in re.split(r"(?<=[.!?])\s+", text)) if s)


def generic_text(n_words: int, seed: int) -> str:
    """Held-out generic text of exactly ``n_words`` words (the last sentence may be cut), for b_auto calibration.

    Polynomial Concentration App. B calibrates b_auto on generic text that is part of no prompt suite; this draws
    from its own generator stream, so for the same seed it shares no sentence with any suite.
    """
    if isinstance(n_words, bool) or not isinstance(n_words, int) or n_words < 1:
        raise ArgumentError(f"n_words must be a positive int, got {n_words!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ArgumentError(f"seed must be a non-negative int, got {seed!r}")
    rng = np.random.default_rng([seed, GENERIC_STREAM])
    lex = lexicon()
    words: list[str] = []
    while len(words) < n_words:
        words.extend(sentence(rng, lex).split())
    return " ".join(words[:n_words])
