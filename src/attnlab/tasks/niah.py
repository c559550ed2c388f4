"""The haystack suites: NIAH with one needle, two needles or decoys, pass-key and UUID NIAH, and multi-key RULER
(Polynomial Concentration App. E, X, Z, AA, AI), each registered by its ``suite`` declaration."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from functools import partial

import numpy as np

from attnlab.tasks.planting import (
    _boundary,
    _noun_pool,
    _plant,
    _require_known,
    _ruler_pool,
    _screened_lexicon,
    _without,
)
from attnlab.tasks.suites import (
    _PASSKEY_ALPHABET,
    _PASSKEY_CHARS,
    DECOY_MODIFIERS,
    MULTIKEY_PAIRS,
    NIAH_CUE,
    NIAH_ORDINALS,
    PASSKEY_CUE,
    RULER_INTRO,
    RULER_NEEDLE,
    RULER_QUESTION,
    Prompt,
    _cycle,
    _rng,
    _Tok,
    suite,
)


def _cue_layout(cue: str, hay: list[str], depth: int, value: str) -> tuple[str, str]:
    # App. E / AA: the needle sentence opens the prompt and the cue closes it.
    return cue, "." + "".join(" " + s for s in hay) + " " + cue


_SLOT = "\0"  # where " value" goes in a layout's text; the text is split there into head and tail


def _around(text_: str) -> tuple[str, str]:
    head, tail = text_.split(_SLOT)
    return head, tail


def _interleave(hay: list[str], needles: Sequence[tuple[int, str]]) -> str:
    """The haystack sentences with each (boundary, sentence) needle inserted before sentence ``boundary``
    (``len(hay)``: after the last), joined by single spaces."""
    at: dict[int, list[str]] = {}
    for boundary, needle in needles:
        at.setdefault(boundary, []).append(needle)
    return " ".join([*(part for i, s in enumerate(hay) for part in (*at.get(i, ()), s)), *at.get(len(hay), ())])


def _ruler_layout(key: str, hay: list[str], depth: int, value: str) -> tuple[str, str]:
    # App. AI: the needle sits at a random sentence boundary of the haystack.
    needle = RULER_NEEDLE.format(key=key) + _SLOT + "."
    return _around(RULER_INTRO + _interleave(hay, [(depth, needle)]) + RULER_QUESTION.format(key=key))


def _multikey_layout(
    key: str, others: Sequence[tuple[str, str, float]], hay: list[str], depth: int, value: str
) -> tuple[str, str]:
    # App. AI.4 (RULER niah_multikey_3): every (key, UUID) needle at its own random sentence boundary; the
    # question names one key.
    needles = [(depth, RULER_NEEDLE.format(key=key) + _SLOT + ".")] + [
        (_boundary(f, hay), RULER_NEEDLE.format(key=k) + f" {v}.") for k, v, f in others
    ]
    return _around(RULER_INTRO + _interleave(hay, needles) + RULER_QUESTION.format(key=key))


def _two_needle_layout(needles: tuple[str, str], asked: int, hay: list[str], depth: int, value: str) -> tuple[str, str]:
    # App. X: the first needle opens the prompt, the second sits at a random sentence boundary, and the cue
    # names one of them by its ordinal.
    said = [
        f"The {o} secret word is" + (_SLOT if i == asked else f" {w}") + "."
        for i, (o, w) in enumerate(zip(NIAH_ORDINALS, needles))
    ]
    body = _interleave(hay, [(depth, said[1])])
    return _around(said[0] + (" " + body if body else "") + f" The {NIAH_ORDINALS[asked]} secret word is")


def _decoy_layout(decoys: tuple[str, str], hay: list[str], depth: int, value: str) -> tuple[str, str]:
    # App. Z: two decoy plants and the real one open the prompt, in this order; the cue asks for the real one.
    plants = [f"The {m} secret word is {w}." for m, w in zip(DECOY_MODIFIERS, decoys)]
    plants.append(f"The {DECOY_MODIFIERS[-1]} secret word is{_SLOT}.")
    return _around(" ".join(plants + hay) + f" The {DECOY_MODIFIERS[-1]} secret word is")


# Defaults: pad 128 is the matched NIAH and pass-key setting (App. E/F, AA); copying's pad 500 is Sec. 5.4;
# length 1024 keeps induction and MQAR in-distribution for every audit model, Pythia's 2048 included.
@suite(
    "niah",
    "'The secret word is X. [haystack] The secret word is' with X a one-token noun",
    "Polynomial Concentration App. E",
    stream=1,
    default_pad=128,
)
def _niah(tok: _Tok, n_prompts: int, seed: int, length: int | None, pad: int | None) -> list[Prompt]:
    lex, enc, pool = _noun_pool(tok, "niah", NIAH_CUE, NIAH_CUE)
    prompts = []
    for index, k in enumerate(_cycle(_rng(seed, "niah"), len(pool), n_prompts)):
        needle, token = pool[k]
        built, _, sentences, _ = _plant(
            tok,
            "niah",
            index,
            _rng(seed, "niah", index),
            _without(lex, enc, token),
            lambda rng, needle=needle: needle,
            partial(_cue_layout, NIAH_CUE),
            pad,
            length,
            {},
        )
        prompts.append(Prompt(*built, "niah", index, {"needle": needle, "pad": sentences}))
    return prompts


def _passkey(rng: np.random.Generator) -> str:
    return "".join(rng.choice(_PASSKEY_ALPHABET, _PASSKEY_CHARS))


@suite(
    "passkey_niah",
    "'The pass key is X. [haystack] The pass key is' with an 8-character key",
    "Polynomial Concentration App. AA",
    stream=6,
    max_new_tokens=24,
    scoring="substring",
    default_pad=128,
)
def _passkey_niah(tok: _Tok, n_prompts: int, seed: int, length: int | None, pad: int | None) -> list[Prompt]:
    _require_known(tok, "passkey_niah", PASSKEY_CUE)
    lex, _ = _screened_lexicon(tok, "passkey_niah")
    prompts = []
    for index in range(n_prompts):
        built, value, sentences, _ = _plant(
            tok,
            "passkey_niah",
            index,
            _rng(seed, "passkey_niah", index),
            lex,
            _passkey,
            partial(_cue_layout, PASSKEY_CUE),
            pad,
            length,
            {},
        )
        prompts.append(Prompt(*built, "passkey_niah", index, {"pass_key": value, "pad": sentences}))
    return prompts


def _uuid(rng: np.random.Generator) -> str:
    return str(uuid.UUID(bytes=rng.bytes(16), version=4))


@suite(
    "uuid_niah",
    "RULER niah_single_3: recall the UUID planted for a key noun",
    "Polynomial Concentration App. AI; Hsieh et al. 2024",
    stream=5,
    max_new_tokens=56,
    scoring="substring",
    default_pad=128,
)
def _uuid_niah(tok: _Tok, n_prompts: int, seed: int, length: int | None, pad: int | None) -> list[Prompt]:
    lex, enc, pool = _ruler_pool(tok, "uuid_niah")
    prompts = []
    for index, k in enumerate(_cycle(_rng(seed, "uuid_niah"), len(pool), n_prompts)):
        key, token = pool[k]
        built, value, sentences, depth = _plant(
            tok,
            "uuid_niah",
            index,
            _rng(seed, "uuid_niah", index),
            _without(lex, enc, token),
            _uuid,
            partial(_ruler_layout, key),
            pad,
            length,
            {token: 3},
        )
        meta = {"key": key, "value": value, "depth": depth, "pad": sentences}
        prompts.append(Prompt(*built, "uuid_niah", index, meta))
    return prompts


def _decoy_meta(tok: _Tok, words: Sequence[str]) -> dict:
    return {"decoys": tuple(words), "decoy_ids": tuple(tok.batch([" " + w for w in words]))}


@suite(
    "niah_multi",
    "two needles, 'The first/second secret word is X.'; the cue asks for one by its ordinal",
    "Polynomial Concentration App. X",
    stream=7,
    default_pad=32,
)
def _niah_multi(tok: _Tok, n_prompts: int, seed: int, length: int | None, pad: int | None) -> list[Prompt]:
    lex, enc, pool = _noun_pool(tok, "niah_multi", f"{NIAH_CUE} {' '.join(NIAH_ORDINALS)}", NIAH_CUE, 2)
    prompts = []
    for index in range(n_prompts):
        rng = _rng(seed, "niah_multi", index)
        pair = [pool[int(k)] for k in rng.choice(len(pool), 2, replace=False)]
        asked = int(rng.integers(2))
        words = (pair[0][0], pair[1][0])
        lex_ = _without(lex, enc, *(t for _, t in pair))
        built, _, sentences, depth = _plant(
            tok,
            "niah_multi",
            index,
            rng,
            lex_,
            lambda rng, w=words[asked]: w,
            partial(_two_needle_layout, words, asked),
            pad,
            length,
            {pair[1 - asked][1]: 1},
        )
        meta = {
            "needles": words,
            "asked": NIAH_ORDINALS[asked],
            "depth": depth,
            "pad": sentences,
            **_decoy_meta(tok, [words[1 - asked]]),
        }
        prompts.append(Prompt(*built, "niah_multi", index, meta))
    return prompts


@suite(
    "niah_decoy",
    "'The fake/decoy/real secret word is X/Y/Z.', a haystack, then 'The real secret word is'",
    "Polynomial Concentration App. Z",
    stream=8,
    default_pad=128,
)
def _niah_decoy(tok: _Tok, n_prompts: int, seed: int, length: int | None, pad: int | None) -> list[Prompt]:
    lex, enc, pool = _noun_pool(
        tok, "niah_decoy", f"{NIAH_CUE} {' '.join(DECOY_MODIFIERS)}", NIAH_CUE, len(DECOY_MODIFIERS)
    )
    prompts = []
    for index in range(n_prompts):
        rng = _rng(seed, "niah_decoy", index)
        *decoys, real = [pool[int(k)] for k in rng.choice(len(pool), len(DECOY_MODIFIERS), replace=False)]
        lex_ = _without(lex, enc, *(t for _, t in (*decoys, real)))
        words = tuple(w for w, _ in decoys)
        built, _, sentences, _ = _plant(
            tok,
            "niah_decoy",
            index,
            rng,
            lex_,
            lambda rng, w=real[0]: w,
            partial(_decoy_layout, words),
            pad,
            length,
            {t: 1 for _, t in decoys},
        )
        meta = {"needle": real[0], "pad": sentences, **_decoy_meta(tok, words)}
        prompts.append(Prompt(*built, "niah_decoy", index, meta))
    return prompts


@suite(
    "ruler_multikey",
    f"RULER niah_multikey_3: {MULTIKEY_PAIRS} (key, UUID) needles; recall the UUID of one key",
    "Polynomial Concentration App. AI.4; Hsieh et al. 2024",
    stream=9,
    max_new_tokens=56,
    scoring="substring",
    default_pad=128,
)
def _ruler_multikey(tok: _Tok, n_prompts: int, seed: int, length: int | None, pad: int | None) -> list[Prompt]:
    lex, enc, pool = _ruler_pool(tok, "ruler_multikey", MULTIKEY_PAIRS)
    prompts = []
    for index in range(n_prompts):
        rng = _rng(seed, "ruler_multikey", index)
        (key, token), *rest = [pool[int(k)] for k in rng.choice(len(pool), MULTIKEY_PAIRS, replace=False)]
        others = [(k, _uuid(rng), float(rng.random())) for k, _ in rest]
        lex_ = _without(lex, enc, token, *(t for _, t in rest))
        built, value, sentences, depth = _plant(
            tok,
            "ruler_multikey",
            index,
            rng,
            lex_,
            _uuid,
            partial(_multikey_layout, key, others),
            pad,
            length,
            {token: 3, **{t: 1 for _, t in rest}},
        )
        meta = {
            "key": key,
            "value": value,
            "depth": depth,
            "pad": sentences,
            "keys": (key, *(k for k, _ in rest)),
            **_decoy_meta(tok, [v for _, v, _ in others]),
        }
        prompts.append(Prompt(*built, "ruler_multikey", index, meta))
    return prompts
