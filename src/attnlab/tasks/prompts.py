"""Tokenizer-agnostic, deterministic prompt suites: NIAH (single, two-needle, adversarial-decoy), pass-key and UUID
NIAH, multi-key RULER, induction, MQAR, copying and literary completion.

The constructions follow Polynomial Concentration: App. B (induction, MQAR, copying, literary completion), App. E
(NIAH), App. X (two needles), App. Z (decoys), App. AA (pass key), App. AI (RULER ``niah_single_3`` and
``niah_multikey_3`` templates) and App. S (the answer key). Text suites are written as text and
tokenized whole with the caller's tokenizer; induction and MQAR draw random ordinary token ids.

Every prompt is audited as App. E's prompt audit asks: the planted answer tokenizes the same in place and
as the continuation, and occurs in ``input_ids`` only where it was planted. Prompt ``index`` of a suite
draws from its own numpy stream ``default_rng([seed, suite stream, index])``, so the same (suite,
tokenizer, seed, length, pad) gives the same prompts on every machine, whatever ``n_prompts`` is.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from ..registry import Registry
from . import text
from .seqtask import free_stream

# The fixed text of the templates, as in the seed (App. E, AA, AI); ``{key}`` is the RULER key noun.
NIAH_CUE = "The secret word is"
PASSKEY_CUE = "The pass key is"
RULER_INTRO = (
    "Some special magic uuids are hidden within the following text. Make sure to memorize it. "
    "I will quiz you about the uuids afterwards.\n"
)
RULER_NEEDLE = "One of the special magic uuids for {key} is:"
NIAH_ORDINALS = ("first", "second")  # App. X: the two needles, and the cue that names one
DECOY_MODIFIERS = ("fake", "decoy", "real")  # App. Z: two decoys, then the real needle the cue asks for
MULTIKEY_PAIRS = 4  # App. AI.4: (key, UUID) pairs per multi-key prompt
RULER_QUESTION = (
    "\nWhat are all the special magic uuids for {key} mentioned in the provided text? "
    "The special magic uuids for {key} mentioned in the provided text are"
)

_TRIES = 8  # fresh haystacks/values per prompt before a tokenizer is declared unable to host the suite
_CHUNK = 64  # haystack sentences tokenized per batch while filling up to a target length
_PASSAGE_SENTENCES = 4
_PASSKEY_ALPHABET = tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_PASSKEY_CHARS = 8


@dataclass(frozen=True)
class Prompt:
    """One prompt of a suite.

    ``input_ids`` is what the model reads, with the tokenizer's BOS when it adds one. ``answer_ids`` is the
    expected continuation: its first token decides single-token suites, the whole of it multi-token ones.
    ``answer_positions`` are the positions in ``input_ids`` where the answer was planted (the answer key
    of Polynomial Concentration App. S); for induction and copying, the position after the query token's first
    occurrence; empty where the prompt does not hold its answer (literary completion: the model must know the
    text).
    ``meta`` holds what was drawn (needle, key, value, haystack sentences as ``pad``...); suites that plant
    wrong answers on purpose list them as ``decoys`` (text) and ``decoy_ids`` (their tokens in place).
    """

    input_ids: tuple[int, ...]
    answer_ids: tuple[int, ...]
    answer_positions: tuple[int, ...]
    suite: str
    index: int
    meta: dict = field(hash=False)


class SuiteError(ValueError):
    """A suite cannot be built or scored as asked; the message says what is wrong and what to do."""


Lexicon = dict[str, tuple[str, ...]]  # word lists by category, as text.lexicon() gives them


@dataclass(frozen=True)
class Suite:
    """A registered suite; calling it is ``build_suite(name, ...)``.

    ``scoring`` is "first token" (exact match of the first generated token, App. E) or "substring" (the
    planted value inside the decoded generation, App. AA/AI). Suites with a ``default_pad`` take ``pad``
    (haystack sentences, or random padding tokens for copying); the others take only ``length``. ``stream``
    is the suite's fixed id, the second word of every seed it draws (``tasks.seqtask.free_stream``).
    """

    name: str
    summary: str
    source: str
    max_new_tokens: int
    scoring: str
    default_pad: int | None
    default_length: int | None
    build: Callable[..., list[Prompt]] = field(repr=False)
    stream: int | None = None

    def __call__(self, tokenizer: Any, n_prompts: int, *, seed: int = 0, length: int | None = None,
                 pad: int | None = None, **options: Any) -> list[Prompt]:
        return build_suite(self.name, tokenizer, n_prompts, seed=seed, length=length, pad=pad, **options)


SUITES: Registry[Suite] = Registry("suite")


def register_suite(entry: Suite, *, replace: bool = False) -> Suite:
    """Add a suite under its name, with its stream id fixed (stream 0 is ``text.generic_text``'s; a built-in
    suite keeps its number for good, a new one takes the next free number, never a reused one)."""
    taken = {name: s.stream for name, s in SUITES.items()}
    stream = free_stream("suite", entry.name, entry.stream, taken)
    return SUITES.register(entry.name, dataclasses.replace(entry, stream=stream), replace=replace)


def suite(name: str, summary: str, source: str, *, stream: int | None = None, max_new_tokens: int = 1,
          scoring: str = "first token", default_pad: int | None = None,
          default_length: int | None = None) -> Callable[[Callable[..., list[Prompt]]], Callable[..., list[Prompt]]]:
    """Declare the decorated builder ``(tok, n_prompts, seed, length, pad) -> prompts`` as suite ``name``."""
    def add(build: Callable[..., list[Prompt]]) -> Callable[..., list[Prompt]]:
        register_suite(Suite(name, summary, source, max_new_tokens, scoring, default_pad, default_length, build,
                             stream))
        return build

    return add


# Vocabulary padding: ids that exist so that the embedding has a round size, never seen in training.
PLACEHOLDER = re.compile(r"\[PAD\d+\]|<pad_?\d+>|<extra_id_\d+>|\[unused\d+\]|<unused\d+>|"
                         r"<\|reserved_special_token_\d+\|>|<\|extra_\d+\|>")


@dataclass(frozen=True)
class _Tok:
    """The caller's Hugging Face tokenizer, reduced to what the suites use."""

    hf: Any = field(repr=False)
    name: str
    lead: tuple[int, ...]  # what add_special_tokens=True puts before the text (BOS), often ()
    unk: int | None
    haystack: tuple[str, ...] = ()  # the user's sentences, filling NIAH haystacks instead of generated ones
    passages: tuple[tuple[str, str], ...] = ()  # (title, text) of the texts literary completion opens
    trail: tuple[int, ...] = ()  # what the chat template puts after the user's message (its generation prompt)

    def batch(self, texts: Sequence[str]) -> list[tuple[int, ...]]:
        # verbose=False: long prompts past model_max_length are intended here, not a mistake to warn about.
        out = self.hf(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
        return [tuple(ids) for ids in out]

    def ids(self, text_: str) -> tuple[int, ...]:
        return self.batch([text_])[0]

    def ordinary(self) -> np.ndarray:
        """Ids of the base vocabulary that are neither special nor added tokens, nor the placeholders a vocabulary
        is padded with to a round size, which the model never saw in training (``PLACEHOLDER``: Qwen's GGUF
        [PAD151921], T5's <extra_id_0>, BERT's [unused0], Llama 3's reserved tokens)."""
        size = getattr(self.hf, "vocab_size", None) or len(self.hf)
        skip = set(self.hf.all_special_ids) | set(self.hf.get_added_vocab().values())
        names = self.hf.convert_ids_to_tokens(list(range(size)))
        return np.array([i for i, name in enumerate(names)
                         if i not in skip and not (isinstance(name, str) and PLACEHOLDER.fullmatch(name))],
                        dtype=np.int64)


_CHAT_SLOT = "ATTNLABPROMPT"  # stands for the prompt inside the chat template, to split the template around it


def _chat_frame(tokenizer: Any, name: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ids the tokenizer's chat template puts before and after one user message (with the generation
    prompt): every prompt is then read as an instruction-tuned model reads a user's turn."""
    if not getattr(tokenizer, "chat_template", None):
        raise SuiteError(f"chat: tokenizer {name} has no chat template; drop the chat option for a base model")
    framed = tokenizer.apply_chat_template([{"role": "user", "content": _CHAT_SLOT}], tokenize=False,
                                           add_generation_prompt=True)
    if framed.count(_CHAT_SLOT) != 1:
        raise SuiteError(f"chat: the chat template of {name} does not keep a user message as it is")
    before, after = framed.split(_CHAT_SLOT)
    ids = [tuple(tokenizer(part, add_special_tokens=False)["input_ids"]) if part else () for part in (before, after)]
    return ids[0], ids[1]


def _adapt(tokenizer: Any, bos: bool = False, haystack: tuple[str, ...] = (),
           passages: tuple[tuple[str, str], ...] = (), chat: bool = False) -> _Tok:
    """The tokenizer as the suites use it; ``bos``: start every prompt with its BOS token even where the
    tokenizer adds none itself; ``haystack``: the user's sentences for NIAH haystacks; ``passages``: the
    texts literary completion opens; ``chat``: frame every prompt as a user message of the chat template."""
    name = str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)
    try:
        bare = list(tokenizer("a", add_special_tokens=False)["input_ids"])
        full = list(tokenizer("a", add_special_tokens=True)["input_ids"])
    except (TypeError, KeyError, AttributeError) as err:
        raise SuiteError(
            f"expected a Hugging Face tokenizer (tokenizer(text, add_special_tokens=...) -> input_ids), "
            f"got {type(tokenizer).__name__}: {err}"
        ) from None
    lead = next((full[:i] for i in range(len(full) - len(bare) + 1) if full[i:i + len(bare)] == bare), [])
    trail: tuple[int, ...] = ()
    if chat:
        lead, trail = _chat_frame(tokenizer, name)
    bos_id = getattr(tokenizer, "bos_token_id", None)
    if bos and (not lead or (bos_id is not None and lead[0] != bos_id)):
        if bos_id is None:
            raise SuiteError(f"bos: tokenizer {name} has no BOS token to start the prompts with")
        lead = [bos_id, *lead]
    return _Tok(tokenizer, name, tuple(lead), getattr(tokenizer, "unk_token_id", None), haystack, passages,
                tuple(trail))


def _rng(seed: int, suite: str, *more: int) -> np.random.Generator:
    return np.random.default_rng([seed, SUITES[suite].stream, *more])


def _cycle(rng: np.random.Generator, size: int, n: int) -> np.ndarray:
    """n indices into a pool of ``size``: fresh permutations back to back, so n <= size never repeats."""
    return np.concatenate([rng.permutation(size) for _ in range(-(-n // size))])[:n]


def _occurrences(ids: Sequence[int], answer: Sequence[int]) -> list[int]:
    n = len(answer)
    return [i for i, t in enumerate(ids) if t == answer[0] and tuple(ids[i:i + n]) == tuple(answer)]


def _planted_only(ids: Sequence[int], answer: Sequence[int], positions: Sequence[int]) -> bool:
    return _occurrences(ids, answer) == [positions[0]]


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
        (noun, ids[-1]) for noun, ids in zip(nouns, outs)
        if len(ids) == len(base) + 1 and ids[:-1] == base and ids[-1] != tok.unk
    ]
    if not pool:
        raise SuiteError(
            f"{suite}: tokenizer {tok.name!r} encodes none of the {len(nouns)} built-in nouns as one token after "
            f"{context!r}, and the needle must be one token; use a tokenizer with whole-word English tokens"
        )
    return pool


def _noun_pool(tok: _Tok, suite: str, template: str, context: str,
               need: int = 1) -> tuple[Lexicon, dict[str, tuple[int, ...]], list[tuple[str, int]]]:
    """What a suite that plants nouns draws from: the screened lexicon, each word's ids, and (noun, token) for
    the nouns that continue ``context`` as one token; a SuiteError when fewer than ``need`` do."""
    _require_known(tok, suite, template)
    lex, enc = _screened_lexicon(tok, suite)
    pool = _single_token_nouns(tok, suite, lex["nouns"], context)
    if len(pool) < need:
        raise SuiteError(f"{suite}: tokenizer {tok.name!r} encodes {len(pool)} built-in nouns as one token after "
                         f"{context!r}; the suite plants {need}")
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


def _fill(tok: _Tok, rng: np.random.Generator, lex: Lexicon, base: int, pad: int | None,
          length: int | None) -> list[str]:
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
    if hv[:len(h)] != h or full[:len(hv)] != hv or cont[:len(full)] != full:
        return None
    planted, answer = hv[len(h):], cont[len(full):]
    if not answer or planted != answer:
        return None
    start = len(tok.lead) + len(h)
    return tok.lead + full, answer, tuple(range(start, start + len(answer)))


Layout = Callable[[list[str], int, str], tuple[str, str]]


def _plant(tok: _Tok, suite: str, index: int, rng: np.random.Generator, lex: Lexicon, draw: Callable,
           layout: Layout, pad: int | None, length: int | None, counts: dict[int, int]):
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


def _boundary(fraction: float, hay: list[str]) -> int:
    return int(fraction * (len(hay) + 1))


def _ruler_layout(key: str, hay: list[str], depth: int, value: str) -> tuple[str, str]:
    # App. AI: the needle sits at a random sentence boundary of the haystack.
    needle = RULER_NEEDLE.format(key=key) + _SLOT + "."
    return _around(RULER_INTRO + _interleave(hay, [(depth, needle)]) + RULER_QUESTION.format(key=key))


def _multikey_layout(key: str, others: Sequence[tuple[str, str, float]], hay: list[str], depth: int,
                     value: str) -> tuple[str, str]:
    # App. AI.4 (RULER niah_multikey_3): every (key, UUID) needle at its own random sentence boundary; the
    # question names one key.
    needles = [(depth, RULER_NEEDLE.format(key=key) + _SLOT + ".")] + [
        (_boundary(f, hay), RULER_NEEDLE.format(key=k) + f" {v}.") for k, v, f in others]
    return _around(RULER_INTRO + _interleave(hay, needles) + RULER_QUESTION.format(key=key))


def _two_needle_layout(needles: tuple[str, str], asked: int, hay: list[str], depth: int,
                       value: str) -> tuple[str, str]:
    # App. X: the first needle opens the prompt, the second sits at a random sentence boundary, and the cue
    # names one of them by its ordinal.
    said = [f"The {o} secret word is" + (_SLOT if i == asked else f" {w}") + "."
            for i, (o, w) in enumerate(zip(NIAH_ORDINALS, needles))]
    body = _interleave(hay, [(depth, said[1])])
    return _around(said[0] + (" " + body if body else "") + f" The {NIAH_ORDINALS[asked]} secret word is")


def _decoy_layout(decoys: tuple[str, str], hay: list[str], depth: int, value: str) -> tuple[str, str]:
    # App. Z: two decoy plants and the real one open the prompt, in this order; the cue asks for the real one.
    plants = [f"The {m} secret word is {w}." for m, w in zip(DECOY_MODIFIERS, decoys)]
    plants.append(f"The {DECOY_MODIFIERS[-1]} secret word is{_SLOT}.")
    return _around(" ".join(plants + hay) + f" The {DECOY_MODIFIERS[-1]} secret word is")


# Defaults: pad 128 is the matched NIAH and pass-key setting (App. E/F, AA); copying's pad 500 is Sec. 5.4;
# length 1024 keeps induction and MQAR in-distribution for every audit model, Pythia's 2048 included.
@suite("niah", "'The secret word is X. [haystack] The secret word is' with X a one-token noun",
       "Polynomial Concentration App. E", stream=1, default_pad=128)
def _niah(tok: _Tok, n_prompts: int, seed: int, length: int | None, pad: int | None) -> list[Prompt]:
    lex, enc, pool = _noun_pool(tok, "niah", NIAH_CUE, NIAH_CUE)
    prompts = []
    for index, k in enumerate(_cycle(_rng(seed, "niah"), len(pool), n_prompts)):
        needle, token = pool[k]
        built, _, sentences, _ = _plant(
            tok, "niah", index, _rng(seed, "niah", index), _without(lex, enc, token),
            lambda rng, needle=needle: needle, partial(_cue_layout, NIAH_CUE), pad, length, {},
        )
        prompts.append(Prompt(*built, "niah", index, {"needle": needle, "pad": sentences}))
    return prompts


def _passkey(rng: np.random.Generator) -> str:
    return "".join(rng.choice(_PASSKEY_ALPHABET, _PASSKEY_CHARS))


@suite("passkey_niah", "'The pass key is X. [haystack] The pass key is' with an 8-character key",
       "Polynomial Concentration App. AA", stream=6, max_new_tokens=24, scoring="substring", default_pad=128)
def _passkey_niah(tok: _Tok, n_prompts: int, seed: int, length: int | None, pad: int | None) -> list[Prompt]:
    _require_known(tok, "passkey_niah", PASSKEY_CUE)
    lex, _ = _screened_lexicon(tok, "passkey_niah")
    prompts = []
    for index in range(n_prompts):
        built, value, sentences, _ = _plant(
            tok, "passkey_niah", index, _rng(seed, "passkey_niah", index), lex, _passkey,
            partial(_cue_layout, PASSKEY_CUE), pad, length, {},
        )
        prompts.append(Prompt(*built, "passkey_niah", index, {"pass_key": value, "pad": sentences}))
    return prompts


def _uuid(rng: np.random.Generator) -> str:
    return str(uuid.UUID(bytes=rng.bytes(16), version=4))


@suite("uuid_niah", "RULER niah_single_3: recall the UUID planted for a key noun",
       "Polynomial Concentration App. AI; Hsieh et al. 2024", stream=5, max_new_tokens=56, scoring="substring",
       default_pad=128)
def _uuid_niah(tok: _Tok, n_prompts: int, seed: int, length: int | None, pad: int | None) -> list[Prompt]:
    lex, enc, pool = _ruler_pool(tok, "uuid_niah")
    prompts = []
    for index, k in enumerate(_cycle(_rng(seed, "uuid_niah"), len(pool), n_prompts)):
        key, token = pool[k]
        built, value, sentences, depth = _plant(
            tok, "uuid_niah", index, _rng(seed, "uuid_niah", index), _without(lex, enc, token), _uuid,
            partial(_ruler_layout, key), pad, length, {token: 3},
        )
        meta = {"key": key, "value": value, "depth": depth, "pad": sentences}
        prompts.append(Prompt(*built, "uuid_niah", index, meta))
    return prompts


def _decoy_meta(tok: _Tok, words: Sequence[str]) -> dict:
    return {"decoys": tuple(words), "decoy_ids": tuple(tok.batch([" " + w for w in words]))}


@suite("niah_multi", "two needles, 'The first/second secret word is X.'; the cue asks for one by its ordinal",
       "Polynomial Concentration App. X", stream=7, default_pad=32)
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
            tok, "niah_multi", index, rng, lex_, lambda rng, w=words[asked]: w,
            partial(_two_needle_layout, words, asked), pad, length, {pair[1 - asked][1]: 1},
        )
        meta = {"needles": words, "asked": NIAH_ORDINALS[asked], "depth": depth, "pad": sentences,
                **_decoy_meta(tok, [words[1 - asked]])}
        prompts.append(Prompt(*built, "niah_multi", index, meta))
    return prompts


@suite("niah_decoy", "'The fake/decoy/real secret word is X/Y/Z.', a haystack, then 'The real secret word is'",
       "Polynomial Concentration App. Z", stream=8, default_pad=128)
def _niah_decoy(tok: _Tok, n_prompts: int, seed: int, length: int | None, pad: int | None) -> list[Prompt]:
    lex, enc, pool = _noun_pool(tok, "niah_decoy", f"{NIAH_CUE} {' '.join(DECOY_MODIFIERS)}", NIAH_CUE,
                                len(DECOY_MODIFIERS))
    prompts = []
    for index in range(n_prompts):
        rng = _rng(seed, "niah_decoy", index)
        *decoys, real = [pool[int(k)] for k in rng.choice(len(pool), len(DECOY_MODIFIERS), replace=False)]
        lex_ = _without(lex, enc, *(t for _, t in (*decoys, real)))
        words = tuple(w for w, _ in decoys)
        built, _, sentences, _ = _plant(
            tok, "niah_decoy", index, rng, lex_, lambda rng, w=real[0]: w, partial(_decoy_layout, words), pad,
            length, {t: 1 for _, t in decoys},
        )
        meta = {"needle": real[0], "pad": sentences, **_decoy_meta(tok, words)}
        prompts.append(Prompt(*built, "niah_decoy", index, meta))
    return prompts


@suite("ruler_multikey", f"RULER niah_multikey_3: {MULTIKEY_PAIRS} (key, UUID) needles; recall the UUID of one key",
       "Polynomial Concentration App. AI.4; Hsieh et al. 2024", stream=9, max_new_tokens=56, scoring="substring",
       default_pad=128)
def _ruler_multikey(tok: _Tok, n_prompts: int, seed: int, length: int | None, pad: int | None) -> list[Prompt]:
    lex, enc, pool = _ruler_pool(tok, "ruler_multikey", MULTIKEY_PAIRS)
    prompts = []
    for index in range(n_prompts):
        rng = _rng(seed, "ruler_multikey", index)
        (key, token), *rest = [pool[int(k)] for k in rng.choice(len(pool), MULTIKEY_PAIRS, replace=False)]
        others = [(k, _uuid(rng), float(rng.random())) for k, _ in rest]
        lex_ = _without(lex, enc, token, *(t for _, t in rest))
        built, value, sentences, depth = _plant(
            tok, "ruler_multikey", index, rng, lex_, _uuid, partial(_multikey_layout, key, others), pad, length,
            {token: 3, **{t: 1 for _, t in rest}},
        )
        meta = {"key": key, "value": value, "depth": depth, "pad": sentences, "keys": (key, *(k for k, _ in rest)),
                **_decoy_meta(tok, [v for _, v, _ in others])}
        prompts.append(Prompt(*built, "ruler_multikey", index, meta))
    return prompts


@suite("induction", "a random-token segment and its repeat; predict the repeat's next token",
       "Polynomial Concentration App. B; Olsson et al. 2022", stream=2, default_length=1024)
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
        prompts.append(Prompt(
            tok.lead + a + a[:repeat], (a[repeat],), (at,), "induction", index,
            {"segment": segment, "repeat": repeat},
        ))
    return prompts


@suite("mqar", "random-token key-value pairs, then queries; predict the last queried value",
       "Polynomial Concentration App. B; Arora et al. 2023", stream=3, default_length=1024)
def _mqar(tok: _Tok, n_prompts: int, seed: int, length: int, pad: None) -> list[Prompt]:
    # Arora et al. (Zoology): key-value pairs, then every key queried once in random order with its value
    # given, except the last query, whose value is the answer; keys and values are disjoint random tokens.
    body = length - len(tok.lead)
    pairs = (body + 1) // 4
    pool = tok.ordinary()
    if pairs < 1:
        raise SuiteError(
            f"mqar: length {length} holds no key-value pair and query; use length >= {3 + len(tok.lead)}"
        )
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
        prompts.append(Prompt(
            tok.lead + store + queries, (values[order[-1]],), (at,), "mqar", index, {"pairs": pairs},
        ))
    return prompts


def _first_unique(ids: Sequence[int], start: int) -> int | None:
    """The first position >= start whose token occurs once in ``ids``."""
    counts = Counter(ids)
    return next((j for j in range(max(start, 1), len(ids)) if counts[ids[j]] == 1), None)


@suite("copying", "a generated passage, random padding, then the passage again; continue it",
       "Polynomial Concentration App. B, Sec. 5.4", stream=4, default_pad=500)
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


MIN_PASSAGE_TOKENS = 16  # a literary opening needs some text to be recognised by before the cut


def parse_passages(text_: str) -> tuple[tuple[str, str], ...]:
    """(title, text) of each passage of a text: passages are separated by blank lines; lines starting with
    '#' are comments, except that a '## title' line names the passage it opens (untitled: 'passage N')."""
    out = []
    for block in re.split(r"\n\s*\n", text_):
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        titles = [line[3:].split("|")[0].strip() for line in lines if line.startswith("## ")]
        body = " ".join(line for line in lines if not line.startswith("#"))
        if body:
            out.append((titles[0] if titles else f"passage {len(out) + 1}", " ".join(body.split())))
    return tuple(out)


def bundled_passages() -> tuple[tuple[str, str], ...]:
    """The openings of public-domain novels that ship with attnlab, the literary suite's default texts."""
    return parse_passages(text.bundled("literary.txt"))


@suite("literary", "random padding, then the opening of a known text cut part-way; predict its next token",
       "Polynomial Concentration App. B, Table 2", stream=10, default_pad=500)
def _literary(tok: _Tok, n_prompts: int, seed: int, length: int | None, pad: int | None) -> list[Prompt]:
    # App. B's literary completion: openings of well-known novels after random padding, scored on the next
    # token. A model that has read the text can answer; the prompt itself does not hold the answer, so the
    # suite measures memorized text unless the user passes texts the model cannot have seen.
    texts = tok.passages or bundled_passages()
    usable = [(title, ids) for (title, _), ids in zip(texts, tok.batch([t for _, t in texts]))
              if len(ids) >= MIN_PASSAGE_TOKENS and (tok.unk is None or tok.unk not in ids)]
    if not usable:
        raise SuiteError(f"literary: no passage has {MIN_PASSAGE_TOKENS} tokens without the unknown token of "
                         f"tokenizer {tok.name!r}; give longer passages, separated by blank lines")
    pool = tok.ordinary()
    prompts = []
    for index, k in enumerate(_cycle(_rng(seed, "literary"), len(usable), n_prompts)):
        rng = _rng(seed, "literary", index)
        title, ids = usable[k]
        cut = int(rng.integers(len(ids) // 2, len(ids)))
        noise = pad if pad is not None else length - len(tok.lead) - cut
        if noise < 0:
            raise SuiteError(f"literary: length {length} is shorter than prompt {index}'s opening ({cut} tokens of "
                             f"{title!r}); use a larger length, or pass pad instead")
        padding = tuple(int(t) for t in rng.choice(np.setdiff1d(pool, ids), noise)) if noise else ()
        meta = {"title": title, "cut": cut, "pad": noise}
        prompts.append(Prompt(tok.lead + padding + ids[:cut], (ids[cut],), (), "literary", index, meta))
    return prompts


def _suite(name: str) -> Suite:
    if name not in SUITES:
        raise SuiteError(f"unknown suite {name!r}; choose one of: {', '.join(SUITES)}")
    return SUITES[name]


def _check_int(what: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise SuiteError(f"{what} must be an int >= {low}, got {value!r}")


HAYSTACK_SUITES = ("niah", "uuid_niah", "passkey_niah", "niah_multi", "niah_decoy", "ruler_multikey")
PASSAGE_SUITES = ("literary",)
MIN_HAYSTACK = 8  # sentences: fewer would repeat within one prompt's haystack at the smallest pads


def build_suite(name: str, tokenizer: Any, n_prompts: int, *, seed: int = 0, length: int | None = None,
                pad: int | None = None, bos: bool = False, haystack: str | None = None,
                passages: str | None = None, chat: bool = False) -> list[Prompt]:
    """``n_prompts`` prompts of suite ``name`` for a Hugging Face ``tokenizer``.

    ``pad`` counts haystack sentences (NIAH suites; Polynomial Concentration uses 0, 8, 32, 128, 512) or random padding
    tokens (copying). ``length`` is the target total of ``input_ids``: exact for induction and copying,
    within 3 tokens for MQAR, and short by less than one haystack sentence for the NIAH suites. Pass one of
    the two; with neither, the suite's default applies. ``bos`` starts every prompt with the tokenizer's BOS
    token where it adds none itself (SmolLM2's adds none), so that position 0, where attention sinks, holds
    the same kind of token for every model. ``haystack`` is a text whose sentences fill the haystacks of
    the NIAH suites instead of generated ones (Polynomial Concentration App. AI's post-cutoff haystack: text
    the model cannot have seen). ``passages`` is a text of blank-line-separated passages that literary
    completion opens instead of the bundled novel openings (``parse_passages``): a text the model has not
    seen tells memorization from reading. ``chat`` frames every prompt as one user message of the
    tokenizer's chat template with its generation prompt after it (``length`` counts the frame's opening, as
    it counts a BOS, but not the generation prompt; scoring is unchanged, so a first-token suite still needs
    the answer as the first generated token).
    Raises SuiteError on anything it cannot build.
    """
    suite = _suite(name)
    _check_int("n_prompts", n_prompts, 1)
    _check_int("seed", seed, 0)
    if length is not None:
        _check_int("length", length, 1)
    if pad is not None:
        if suite.default_pad is None:
            raise SuiteError(f"{name} takes length, not pad: its prompts have no padding")
        _check_int("pad", pad, 0)
        if length is not None:
            raise SuiteError(f"{name}: pass pad or length, not both")
    if pad is None and length is None:
        pad, length = suite.default_pad, suite.default_length
    sentences = ()
    if haystack is not None:
        if name not in HAYSTACK_SUITES:
            raise SuiteError(f"{name} has no haystack; a haystack text fills {', '.join(HAYSTACK_SUITES)}")
        sentences = text.split_sentences(haystack)
        if len(sentences) < MIN_HAYSTACK:
            raise SuiteError(f"the haystack text has {len(sentences)} sentences; {name} needs at least "
                             f"{MIN_HAYSTACK}")
    texts = ()
    if passages is not None:
        if name not in PASSAGE_SUITES:
            raise SuiteError(f"{name} opens no passage; passages are read by {', '.join(PASSAGE_SUITES)}")
        texts = parse_passages(passages)
        if not texts:
            raise SuiteError(f"the passages text holds no passage; {name} needs passages separated by blank lines")
    tok = _adapt(tokenizer, bos, sentences, texts, chat)
    prompts = suite.build(tok, int(n_prompts), int(seed), length, pad)
    for prompt in prompts:
        if prompt.answer_positions and not _planted_only(prompt.input_ids, prompt.answer_ids,
                                                          prompt.answer_positions):
            raise SuiteError(f"{name}: prompt {prompt.index} holds its answer outside the planted position; "
                             "report this with the tokenizer's name")
    if tok.trail:
        prompts = [dataclasses.replace(p, input_ids=p.input_ids + tok.trail, meta={**p.meta, "trail": len(tok.trail)})
                   for p in prompts]
    return prompts


# A chat model answers in a sentence ("The secret word is shell."): its prompts are scored on the first words it
# generates, this many tokens, instead of on the first token.
CHAT_NEW_TOKENS = 16


def max_new_tokens(name: str, chat: bool = False) -> int:
    """Tokens to generate when scoring suite ``name``: 1 for single-token suites, 24 (App. AA) or 56 (App. AI); at
    least ``CHAT_NEW_TOKENS`` for prompts framed by a chat template (``chat``)."""
    own = _suite(name).max_new_tokens
    return max(own, CHAT_NEW_TOKENS) if chat else own


def is_chat(prompt: Prompt) -> bool:
    """Whether ``prompt`` is framed as a user message of a chat template (``build_suite(..., chat=True)``)."""
    return "trail" in prompt.meta


def answer_keys(prompt: Prompt) -> dict[int, int]:
    """Query position -> the key position holding its answer (Polynomial Concentration App. S's answer key).

    Every suite's last input position answers from ``answer_positions[0]``; a prompt without one (literary
    completion) has no answer key. Induction has an answer at every position of the repeat: the token after
    the current token's first occurrence, the planted B of App. H, one segment length back plus one.
    """
    if not prompt.answer_positions:
        return {}
    last = len(prompt.input_ids) - 1
    keys = {last: prompt.answer_positions[0]}
    if prompt.suite == "induction":
        segment, repeat = prompt.meta["segment"], prompt.meta["repeat"]
        end = len(prompt.input_ids) - prompt.meta.get("trail", 0)
        keys.update({q: q - segment + 1 for q in range(end - repeat, end)})
    return keys


def _generated(prompt: Prompt, generated_ids: Any) -> list[int]:
    flat = np.asarray(generated_ids.tolist() if hasattr(generated_ids, "tolist") else list(generated_ids))
    if flat.ndim != 1:
        raise SuiteError(f"generated_ids must be one prompt's 1-D token ids, got shape {flat.shape}")
    return [int(t) for t in flat[:max_new_tokens(prompt.suite, is_chat(prompt))]]


def decoy_hit(prompt: Prompt, generated_ids: Any, tokenizer: Any = None) -> bool | None:
    """Whether a generation names one of the wrong answers the prompt plants on purpose (Polynomial
    Concentration App. Z's decoy tracking): the first token is a decoy's first token (first-token suites), or
    a decoy's text is inside the decoded generation (substring suites). None for a prompt without decoys."""
    if not prompt.meta.get("decoys"):
        return None
    return _names(prompt, generated_ids, prompt.meta["decoy_ids"], tokenizer, "decoy_hit")


def _names(prompt: Prompt, generated_ids: Any, targets: Sequence[Sequence[int]], tokenizer: Any, caller: str) -> bool:
    """Whether a generation names one of ``targets`` (token ids in place) as the prompt's suite scores: its
    first token is a target's first token, or a target, decoded, is inside the decoded generation. A chat-framed
    prompt of a single-token suite is read as a sentence: a target, decoded, as a whole word among its first
    ``CHAT_NEW_TOKENS`` tokens."""
    suite = _suite(prompt.suite)
    ids = _generated(prompt, generated_ids)
    if suite.scoring == "first token" and not is_chat(prompt):
        return bool(ids) and any(ids[0] == t[0] for t in targets)
    if tokenizer is None:
        raise SuiteError(f"{prompt.suite} is scored on decoded text: call {caller}(prompt, generated_ids, tokenizer)")
    said = tokenizer.decode(ids)
    if suite.scoring == "first token":
        words = [tokenizer.decode([t[0]]).strip() for t in targets]
        return any(word and re.search(rf"(?<!\w){re.escape(word)}(?!\w)", said) for word in words)
    return any(tokenizer.decode(list(t)).strip() in said for t in targets)


def answer_correct(prompt: Prompt, generated_ids: Any, tokenizer: Any = None) -> bool:
    """Exact match of a generation (the new token ids only) against the prompt's answer.

    Single-token suites compare the first generated token with ``answer_ids[0]`` (App. E). ``uuid_niah`` and
    ``passkey_niah`` need ``tokenizer``: the planted value, as the tokenizer decodes ``answer_ids``, must be a
    substring of the decoded first ``max_new_tokens(suite)`` tokens (App. AA, AI).
    """
    return _names(prompt, generated_ids, [prompt.answer_ids], tokenizer, "answer_correct")
