"""What every prompt suite shares: the ``Prompt`` and ``Suite`` records, the suite registry (``suite`` declares an
entry next to its builder), the caller's tokenizer reduced to what the builders use, and ``build_suite``, which
builds a registered suite and audits every prompt as App. E's prompt audit asks: the planted answer tokenizes the
same in place and as the continuation, and occurs in ``input_ids`` only where it was planted. The builders
themselves are in ``niah`` (the haystack suites) and ``token_suites`` (induction, MQAR, copying, literary
completion), the haystack and planting of the text suites in ``planting``; ``scoring`` reads a generation against
a prompt.

The constructions follow Polynomial Concentration: App. B (induction, MQAR, copying, literary completion), App. E
(NIAH), App. X (two needles), App. Z (decoys), App. AA (pass key), App. AI (RULER ``niah_single_3`` and
``niah_multikey_3`` templates) and App. S (the answer key). Text suites are written as text and
tokenized whole with the caller's tokenizer; induction and MQAR draw random ordinary token ids.

Prompt ``index`` of a suite draws from its own numpy stream ``default_rng([seed, suite stream, index])``, so the
same (suite, tokenizer, seed, length, pad) gives the same prompts on every machine, whatever ``n_prompts`` is.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnlab.errors import Error
from attnlab.registry import Registry
from attnlab.tasks import text
from attnlab.tasks.seqtask import free_stream

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


class SuiteError(Error, ValueError):
    """A suite cannot be built or scored as asked; the message says what is wrong and what to do."""


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

    def __call__(
        self,
        tokenizer: Any,
        n_prompts: int,
        *,
        seed: int = 0,
        length: int | None = None,
        pad: int | None = None,
        **options: Any,
    ) -> list[Prompt]:
        return build_suite(self.name, tokenizer, n_prompts, seed=seed, length=length, pad=pad, **options)


SUITES: Registry[Suite] = Registry("suite")


def register_suite(entry: Suite, *, replace: bool = False) -> Suite:
    """Add a suite under its name, with its stream id fixed (stream 0 is ``text.generic_text``'s; a built-in
    suite keeps its number for good, a new one takes the next free number, never a reused one)."""
    taken = {name: s.stream for name, s in SUITES.items()}
    stream = free_stream("suite", entry.name, entry.stream, taken)
    return SUITES.register(entry.name, dataclasses.replace(entry, stream=stream), replace=replace)


def suite(
    name: str,
    summary: str,
    source: str,
    *,
    stream: int | None = None,
    max_new_tokens: int = 1,
    scoring: str = "first token",
    default_pad: int | None = None,
    default_length: int | None = None,
) -> Callable[[Callable[..., list[Prompt]]], Callable[..., list[Prompt]]]:
    """Declare the decorated builder ``(tok, n_prompts, seed, length, pad) -> prompts`` as suite ``name``."""

    def add(build: Callable[..., list[Prompt]]) -> Callable[..., list[Prompt]]:
        register_suite(
            Suite(name, summary, source, max_new_tokens, scoring, default_pad, default_length, build, stream)
        )
        return build

    return add


# Vocabulary padding: ids that exist so that the embedding has a round size, never seen in training.
PLACEHOLDER = re.compile(
    r"\[PAD\d+\]|<pad_?\d+>|<extra_id_\d+>|\[unused\d+\]|<unused\d+>|"
    r"<\|reserved_special_token_\d+\|>|<\|extra_\d+\|>"
)


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
        return np.array(
            [
                i
                for i, name in enumerate(names)
                if i not in skip and not (isinstance(name, str) and PLACEHOLDER.fullmatch(name))
            ],
            dtype=np.int64,
        )


_CHAT_SLOT = "ATTNLABPROMPT"  # stands for the prompt inside the chat template, to split the template around it


def _chat_frame(tokenizer: Any, name: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ids the tokenizer's chat template puts before and after one user message (with the generation
    prompt): every prompt is then read as an instruction-tuned model reads a user's turn."""
    if not getattr(tokenizer, "chat_template", None):
        raise SuiteError(f"chat: tokenizer {name} has no chat template; drop the chat option for a base model")
    framed = tokenizer.apply_chat_template(
        [{"role": "user", "content": _CHAT_SLOT}], tokenize=False, add_generation_prompt=True
    )
    if framed.count(_CHAT_SLOT) != 1:
        raise SuiteError(f"chat: the chat template of {name} does not keep a user message as it is")
    before, after = framed.split(_CHAT_SLOT)
    ids = [tuple(tokenizer(part, add_special_tokens=False)["input_ids"]) if part else () for part in (before, after)]
    return ids[0], ids[1]


def _adapt(
    tokenizer: Any,
    bos: bool = False,
    haystack: tuple[str, ...] = (),
    passages: tuple[tuple[str, str], ...] = (),
    chat: bool = False,
) -> _Tok:
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
    lead = next((full[:i] for i in range(len(full) - len(bare) + 1) if full[i : i + len(bare)] == bare), [])
    trail: tuple[int, ...] = ()
    if chat:
        lead, trail = _chat_frame(tokenizer, name)
    bos_id = getattr(tokenizer, "bos_token_id", None)
    if bos and (not lead or (bos_id is not None and lead[0] != bos_id)):
        if bos_id is None:
            raise SuiteError(f"bos: tokenizer {name} has no BOS token to start the prompts with")
        lead = [bos_id, *lead]
    return _Tok(
        tokenizer, name, tuple(lead), getattr(tokenizer, "unk_token_id", None), haystack, passages, tuple(trail)
    )


def _rng(seed: int, suite: str, *more: int) -> np.random.Generator:
    return np.random.default_rng([seed, SUITES[suite].stream, *more])


def _cycle(rng: np.random.Generator, size: int, n: int) -> np.ndarray:
    """n indices into a pool of ``size``: fresh permutations back to back, so n <= size never repeats."""
    return np.concatenate([rng.permutation(size) for _ in range(-(-n // size))])[:n]


def _occurrences(ids: Sequence[int], answer: Sequence[int]) -> list[int]:
    n = len(answer)
    return [i for i, t in enumerate(ids) if t == answer[0] and tuple(ids[i : i + n]) == tuple(answer)]


def _planted_only(ids: Sequence[int], answer: Sequence[int], positions: Sequence[int]) -> bool:
    return _occurrences(ids, answer) == [positions[0]]


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


def sizing(name: str, pad: int | None, length: int | None) -> tuple[int | None, int | None]:
    """The (pad, length) suite ``name`` builds with: those given, or the suite's defaults when neither is."""
    if pad is None and length is None:
        suite = _suite(name)
        return suite.default_pad, suite.default_length
    return pad, length


def build_suite(
    name: str,
    tokenizer: Any,
    n_prompts: int,
    *,
    seed: int = 0,
    length: int | None = None,
    pad: int | None = None,
    bos: bool = False,
    haystack: str | None = None,
    passages: str | None = None,
    chat: bool = False,
) -> list[Prompt]:
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
    pad, length = sizing(name, pad, length)
    sentences = ()
    if haystack is not None:
        if name not in HAYSTACK_SUITES:
            raise SuiteError(f"{name} has no haystack; a haystack text fills {', '.join(HAYSTACK_SUITES)}")
        sentences = text.split_sentences(haystack)
        if len(sentences) < MIN_HAYSTACK:
            raise SuiteError(f"the haystack text has {len(sentences)} sentences; {name} needs at least {MIN_HAYSTACK}")
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
        if prompt.answer_positions and not _planted_only(prompt.input_ids, prompt.answer_ids, prompt.answer_positions):
            raise SuiteError(
                f"{name}: prompt {prompt.index} holds its answer outside the planted position; "
                "report this with the tokenizer's name"
            )
    if tok.trail:
        prompts = [
            dataclasses.replace(p, input_ids=p.input_ids + tok.trail, meta={**p.meta, "trail": len(tok.trail)})
            for p in prompts
        ]
    return prompts
