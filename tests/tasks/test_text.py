"""Generated text is grammatical over the shipped word lists (articles agree with the next word), reproducible from
its generator, and generic text is exactly n words, each length a prefix of every longer one."""

from __future__ import annotations

import numpy as np
import pytest

from attnlab.tasks.text import CATEGORIES, CUE_WORDS, generic_text, lexicon, sentence, sentences

FUNCTION_WORDS = {"the", "a", "an", "every", "was", "and", "my", "your", "nobody", "her", "their", "his", "one"}


def _words(text):
    return [w.strip(",.").lower() for w in text.split()]


def test_sentences_use_the_lexicon_and_agree_in_articles():
    lex = lexicon()
    vocabulary = {w for ws in lex.values() for w in ws} | FUNCTION_WORDS
    for s in sentences(np.random.default_rng(0), lex, 400):
        assert s[0].isupper() and s.endswith(".") and s.count(".") == 1, s
        words = _words(s)
        assert set(words) <= vocabulary, set(words) - vocabulary
        for article, following in zip(words, words[1:]):
            if article in ("a", "an"):
                assert (article == "an") == (following[0] in "aeiou"), s
        assert not any(cue in w for w in words for cue in CUE_WORDS if w not in FUNCTION_WORDS), s


def test_a_small_lexicon_bounds_every_slot():
    lex = {c: (f"{c[:3]}x",) for c in CATEGORIES}
    lex["nouns"] = ("owl",)
    for s in sentences(np.random.default_rng(1), lex, 100):
        content = [w for w in _words(s) if w not in FUNCTION_WORDS]
        assert content and set(content) <= {"owl", "adjx", "verx", "advx", "prex"}, s


def test_sentences_are_successive_draws_of_one_generator():
    lex = lexicon()
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    assert sentences(a, lex, 5) == [sentence(b, lex) for _ in range(5)]
    assert sentences(a, lex, 5) != sentences(np.random.default_rng(7), lex, 5)


@pytest.mark.parametrize("seed", [0, 3])
def test_generic_text_has_exactly_n_words_and_grows_by_prefix(seed):
    long = generic_text(300, seed).split()
    assert len(long) == 300
    for n in (1, 7, 120, 299):
        assert generic_text(n, seed).split() == long[:n]


@pytest.mark.parametrize(
    "n_words, seed, match",
    [
        (0, 0, "n_words must be a positive int"),
        (True, 0, "n_words"),
        (2.0, 0, "n_words"),
        (5, -1, "seed must be a non-negative int"),
        (5, False, "seed"),
        (5, 1.5, "seed"),
    ],
)
def test_generic_text_refuses_bad_arguments(n_words, seed, match):
    with pytest.raises(ValueError, match=match):
        generic_text(n_words, seed)
