"""How the text suites build a prompt: the shipped lexicon screened for the caller's tokenizer, the nouns that
continue a template as one token (a needle or a RULER key), haystacks generated or taken from the user's text and
filled up to a length, and the answer planted so that it tokenizes the same in place and as the continuation and
occurs nowhere else (Polynomial Concentration App. E, AA, AI). The builders that use them are in ``niah`` (the
haystack suites) and ``token_suites`` (literary completion screens the lexicon too).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from attnlab.tasks import text
from attnlab.tasks.suites import _TRIES, RULER_INTRO, RULER_NEEDLE, RULER_QUESTION, SuiteError, _planted_only, _Tok

_CHUNK = 64  # haystack sentences tokenized per batch while filling up to a target length
Lexicon = dict[str, tuple[str, ...]]  # word lists by category, as text.lexicon() gives them


def _require_known(tok: _Tok, suite: str, template: str) -> None:
    if tok.unk is None:
        return
    pieces = template.split()
    bad = [p for p, ids in zip(pieces, tok.batch([" " + p for p in pieces])) if tok.unk in ids]
    if bad:
        raise SuiteError(
            f"{suite}: tokenizer {tok.name!r} maps {', '.join(map(repr, bad[:4]))} of the template to its "
            "unknown token; use a tokenizer whose vocabulary covers English text"
        )


def _screened_lexicon(tok: _Tok, suite: str) -> tuple[Lexicon, dict[str, tuple[int, ...]]]:
    """The shipped words this tokenizer encodes without its unknown token, and each word's ids as " word"."""
    lex = text.lexicon()
    words = sorted({w for ws in lex.values() for w in ws})
    enc = dict(zip(words, tok.batch([" " + w for w in words])))
    known = {c: tuple(w for w in ws if enc[w] and tok.unk not in enc[w]) for c, ws in lex.items()}
    for category, ws in known.items():
        if not ws:
            raise SuiteError(
                f"{suite}: tokenizer {tok.name!r} encodes none of the built-in {category} without its unknown "
                "token, so it cannot read generated text; use a tokenizer with an English vocabulary"
            )
    return known, enc


def _without(lex: Lexicon, enc: dict[str, tuple[int, ...]], *tokens: int) -> Lexicon:
    """``lex`` less every word whose tokens include one of ``tokens`` (the needles' own words among them)."""
    return {c: tuple(w for w in ws if not set(tokens) & set(enc[w])) for c, ws in lex.items()}


def _single_token_nouns(tok: _Tok, suite: str, nouns: Sequence[str], context: str) -> list[tuple[str, int]]:
    """(noun, token) for nouns that continue ``context`` as exactly one token, in list order."""
    base = tok.ids(context)
    outs = tok.batch([f"{context} {noun}" for noun in nouns])
    pool = [
        (noun, ids[-1])
        for noun, ids in zip(nouns, outs)
        if len(ids) == len(base) + 1 and ids[:-1] == base and ids[-1] != tok.unk
    ]
    if not pool:
        raise SuiteError(
            f"{suite}: tokenizer {tok.name!r} encodes none of the {len(nouns)} built-in nouns as one token after "
            f"{context!r}, and the needle must be one token; use a tokenizer with whole-word English tokens"
        )
    return pool


def _noun_pool(
    tok: _Tok, suite: str, template: str, context: str, need: int = 1
) -> tuple[Lexicon, dict[str, tuple[int, ...]], list[tuple[str, int]]]:
    """What a suite that plants nouns draws from: the screened lexicon, each word's ids, and (noun, token) for
    the nouns that continue ``context`` as one token; a SuiteError when fewer than ``need`` do."""
    _require_known(tok, suite, template)
    lex, enc = _screened_lexicon(tok, suite)
    pool = _single_token_nouns(tok, suite, lex["nouns"], context)
    if len(pool) < need:
        raise SuiteError(
            f"{suite}: tokenizer {tok.name!r} encodes {len(pool)} built-in nouns as one token after "
            f"{context!r}; the suite plants {need}"
        )
    return lex, enc, pool


def _ruler_pool(tok: _Tok, suite: str, need: int = 1):
    """``_noun_pool`` for the RULER templates (App. AI): keys are nouns after 'uuids for'."""
    template = RULER_INTRO + RULER_NEEDLE + RULER_QUESTION
    return _noun_pool(tok, suite, template.replace("{key}", ""), RULER_NEEDLE.split(" {key}")[0], need)


def _hay(tok: _Tok, rng: np.random.Generator, lex: Lexicon, n: int) -> list[str]:
    """``n`` haystack sentences: generated, or consecutive ones of the user's text from a random start
    (wrapping around), so a passage reads as it was written."""
    if not tok.haystack:
        return text.sentences(rng, lex, n)
    start = int(rng.integers(len(tok.haystack)))
    return [tok.haystack[(start + i) % len(tok.haystack)] for i in range(n)]


def _fill(
    tok: _Tok, rng: np.random.Generator, lex: Lexicon, base: int, pad: int | None, length: int | None
) -> list[str]:
    """Haystack sentences: exactly ``pad``, or as many as keep ``base`` + their tokens within ``length``."""
    if pad is not None:
        return _hay(tok, rng, lex, pad)
    hay: list[str] = []
    while True:
        chunk = _hay(tok, rng, lex, _CHUNK)
        for sent, ids in zip(chunk, tok.batch([" " + s for s in chunk])):
            base += len(ids)
            if base > length:
                return hay
            hay.append(sent)


def _encode_planted(tok: _Tok, head: str, value: str, tail: str):
    """(input_ids, answer_ids, answer_positions) of head+value+tail, or None where the tokenizer splits
    ``value`` differently in place than as the continuation of the whole prompt."""
    h, hv, full, cont = tok.batch([head, head + value, head + value + tail, head + value + tail + value])
    if hv[: len(h)] != h or full[: len(hv)] != hv or cont[: len(full)] != full:
        return None
    planted, answer = hv[len(h) :], cont[len(full) :]
    if not answer or planted != answer:
        return None
    start = len(tok.lead) + len(h)
    return tok.lead + full, answer, tuple(range(start, start + len(answer)))


Layout = Callable[[list[str], int, str], tuple[str, str]]


def _plant(
    tok: _Tok,
    suite: str,
    index: int,
    rng: np.random.Generator,
    lex: Lexicon,
    draw: Callable,
    layout: Layout,
    pad: int | None,
    length: int | None,
    counts: dict[int, int],
):
    """Build one text prompt; returns ((input_ids, answer_ids, positions), value, sentences, depth).

    ``layout(haystack, depth, value)`` gives the text before and after " value"; ``counts`` are tokens that
    must occur exactly so often (a RULER key: in the needle and twice in the question).
    """
    for _ in range(_TRIES):
        value = draw(rng)
        base = 0
        if length is not None:
            head, tail = layout([], 0, value)
            base = len(tok.lead) + len(tok.ids(f"{head} {value}{tail}"))
            if base > length:
                raise SuiteError(
                    f"{suite}: length {length} is shorter than the template alone ({base} tokens with "
                    f"tokenizer {tok.name!r}); use length >= {base}, or pass pad instead"
                )
        hay = _fill(tok, rng, lex, base, pad, length)
        at = rng.random()
        while True:
            depth = _boundary(at, hay)
            head, tail = layout(hay, depth, value)
            built = _encode_planted(tok, head, " " + value, tail)
            if built is None or length is None or len(built[0]) <= length or not hay:
                break
            hay = hay[:-1]  # sentences tokenized alone can merge differently in place; drop until it fits
        if (
            built is not None
            and (length is None or len(built[0]) <= length)
            and (tok.unk is None or tok.unk not in built[0])
            and _planted_only(*built)
            and all(built[0].count(t) == c for t, c in counts.items())
        ):
            return built, value, len(hay), depth
    raise SuiteError(
        f"{suite}: prompt {index} still had its answer outside the planted position, an unknown token, or an "
        f"answer split differently in place, after {_TRIES} draws with tokenizer {tok.name!r}; use a "
        "tokenizer that keeps English words whole, or another seed"
    )


def _boundary(fraction: float, hay: list[str]) -> int:
    return int(fraction * (len(hay) + 1))
