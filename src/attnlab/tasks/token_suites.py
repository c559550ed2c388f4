"""The suites built from token ids and passages: induction, MQAR, copying and literary completion (Polynomial
Concentration App. B), each registered by its ``suite`` declaration."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from attnlab.tasks import text
from attnlab.tasks.planting import _screened_lexicon
from attnlab.tasks.suites import (
    _PASSAGE_SENTENCES,
    _TRIES,
    MIN_PASSAGE_TOKENS,
    Prompt,
    SuiteError,
    _cycle,
    _rng,
    _Tok,
    parse_passages,
    suite,
)


@suite(
    "induction",
    "a random-token segment and its repeat; predict the repeat's next token",
    "Polynomial Concentration App. B; Olsson et al. 2022",
    stream=2,
    default_length=1024,
)
def _induction(tok: _Tok, n_prompts: int, seed: int, length: int, pad: None) -> list[Prompt]:
    # Olsson et al.: a random segment, then its repeat cut so that the next token is the segment's own.
    body = length - len(tok.lead)
    if body < 3:
        raise SuiteError(
            f"induction: length {length} leaves {body} tokens after BOS; use length >= {3 + len(tok.lead)}"
        )
    segment = body // 2 + 1
    repeat = body - segment
    pool = tok.ordinary()
    if segment > pool.size:
        raise SuiteError(
            f"induction: length {length} needs {segment} distinct tokens but tokenizer {tok.name!r} has "
            f"{pool.size} ordinary ones; use length <= {2 * pool.size - 1 + len(tok.lead)}"
        )
    prompts = []
    for index in range(n_prompts):
        a = tuple(int(t) for t in _rng(seed, "induction", index).choice(pool, segment, replace=False))
        at = len(tok.lead) + repeat
        prompts.append(
            Prompt(
                tok.lead + a + a[:repeat],
                (a[repeat],),
                (at,),
                "induction",
                index,
                {"segment": segment, "repeat": repeat},
            )
        )
    return prompts


@suite(
    "mqar",
    "random-token key-value pairs, then queries; predict the last queried value",
    "Polynomial Concentration App. B; Arora et al. 2023",
    stream=3,
    default_length=1024,
)
def _mqar(tok: _Tok, n_prompts: int, seed: int, length: int, pad: None) -> list[Prompt]:
    # Arora et al. (Zoology): key-value pairs, then every key queried once in random order with its value
    # given, except the last query, whose value is the answer; keys and values are disjoint random tokens.
    body = length - len(tok.lead)
    pairs = (body + 1) // 4
    pool = tok.ordinary()
    if pairs < 1:
        raise SuiteError(f"mqar: length {length} holds no key-value pair and query; use length >= {3 + len(tok.lead)}")
    if 2 * pairs > pool.size:
        raise SuiteError(
            f"mqar: length {length} needs {2 * pairs} distinct tokens but tokenizer {tok.name!r} has "
            f"{pool.size} ordinary ones; use length <= {4 * (pool.size // 2) + 2 + len(tok.lead)}"
        )
    prompts = []
    for index in range(n_prompts):
        rng = _rng(seed, "mqar", index)
        drawn = [int(t) for t in rng.choice(pool, 2 * pairs, replace=False)]
        keys, values = drawn[:pairs], drawn[pairs:]
        order = [int(j) for j in rng.permutation(pairs)]
        store = tuple(t for j in range(pairs) for t in (keys[j], values[j]))
        queries = tuple(t for j in order[:-1] for t in (keys[j], values[j])) + (keys[order[-1]],)
        at = len(tok.lead) + 2 * order[-1] + 1
        prompts.append(Prompt(tok.lead + store + queries, (values[order[-1]],), (at,), "mqar", index, {"pairs": pairs}))
    return prompts


def _first_unique(ids: Sequence[int], start: int) -> int | None:
    """The first position >= start whose token occurs once in ``ids``."""
    counts = Counter(ids)
    return next((j for j in range(max(start, 1), len(ids)) if counts[ids[j]] == 1), None)


@suite(
    "copying",
    "a generated passage, random padding, then the passage again; continue it",
    "Polynomial Concentration App. B, Sec. 5.4",
    stream=4,
    default_pad=500,
)
def _copying(tok: _Tok, n_prompts: int, seed: int, length: int | None, pad: int | None) -> list[Prompt]:
    # Polynomial Concentration App. B's "copying with padding", on a generated passage instead of memorized novel
    # openings:
    # passage, random tokens, then at least half the passage again; the copy stops before a token that
    # occurs once in the passage, so only copying names the answer.
    lex, _ = _screened_lexicon(tok, "copying")
    pool = tok.ordinary()
    prompts = []
    for index in range(n_prompts):
        rng = _rng(seed, "copying", index)
        for _ in range(_TRIES):
            passage = " ".join(text.sentences(rng, lex, _PASSAGE_SENTENCES))
            ids = tok.ids(passage)
            copied = _first_unique(ids, len(ids) // 2)
            if copied is not None:
                break
        else:
            raise SuiteError(
                f"copying: no passage of prompt {index} had a token that occurs once, after {_TRIES} draws "
                f"with tokenizer {tok.name!r}; use a tokenizer with whole-word English tokens"
            )
        if tok.unk is not None and tok.unk in ids:
            raise SuiteError(
                f"copying: tokenizer {tok.name!r} maps part of a generated passage to its unknown token; "
                "use a tokenizer whose vocabulary covers English text"
            )
        noise = pad if pad is not None else length - len(tok.lead) - len(ids) - copied
        if noise < 0:
            raise SuiteError(
                f"copying: length {length} is shorter than prompt {index}'s passage and copy "
                f"({length - noise} tokens); use a larger length (passages vary), or pass pad instead"
            )
        filler = np.setdiff1d(pool, ids)
        padding = tuple(int(t) for t in rng.choice(filler, noise)) if noise else ()
        at = len(tok.lead) + copied
        meta = {"passage": passage, "pad": noise, "copied": copied}
        prompts.append(Prompt(tok.lead + ids + padding + ids[:copied], (ids[copied],), (at,), "copying", index, meta))
    return prompts


def bundled_passages() -> tuple[tuple[str, str], ...]:
    """The openings of public-domain novels that ship with attnlab, the literary suite's default texts."""
    return parse_passages(text.bundled("literary.txt"))


@suite(
    "literary",
    "random padding, then the opening of a known text cut part-way; predict its next token",
    "Polynomial Concentration App. B, Table 2",
    stream=10,
    default_pad=500,
)
def _literary(tok: _Tok, n_prompts: int, seed: int, length: int | None, pad: int | None) -> list[Prompt]:
    # App. B's literary completion: openings of well-known novels after random padding, scored on the next
    # token. A model that has read the text can answer; the prompt itself does not hold the answer, so the
    # suite measures memorized text unless the user passes texts the model cannot have seen.
    texts = tok.passages or bundled_passages()
    usable = [
        (title, ids)
        for (title, _), ids in zip(texts, tok.batch([t for _, t in texts]))
        if len(ids) >= MIN_PASSAGE_TOKENS and (tok.unk is None or tok.unk not in ids)
    ]
    if not usable:
        raise SuiteError(
            f"literary: no passage has {MIN_PASSAGE_TOKENS} tokens without the unknown token of "
            f"tokenizer {tok.name!r}; give longer passages, separated by blank lines"
        )
    pool = tok.ordinary()
    prompts = []
    for index, k in enumerate(_cycle(_rng(seed, "literary"), len(usable), n_prompts)):
        rng = _rng(seed, "literary", index)
        title, ids = usable[k]
        cut = int(rng.integers(len(ids) // 2, len(ids)))
        noise = pad if pad is not None else length - len(tok.lead) - cut
        if noise < 0:
            raise SuiteError(
                f"literary: length {length} is shorter than prompt {index}'s opening ({cut} tokens of "
                f"{title!r}); use a larger length, or pass pad instead"
            )
        padding = tuple(int(t) for t in rng.choice(np.setdiff1d(pool, ids), noise)) if noise else ()
        meta = {"title": title, "cut": cut, "pad": noise}
        prompts.append(Prompt(tok.lead + padding + ids[:cut], (ids[cut],), (), "literary", index, meta))
    return prompts
