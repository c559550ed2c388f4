"""Retrieval tasks as ``Task``s (conventions in ``seqtask``): MQMTAR and Max Retrieval of Vasylenko et al. 2025
(Vasylenko et al. 2025 §5.1, App. G.1, Fig. 10, App. H.3-H.4), Zoology-style MQAR (Arora et al.
2023, the MQAR of Polynomial Concentration App. B), and small-vocabulary NIAH and induction streams.

Where Vasylenko et al. 2025 is silent we follow the data generator its authors published with the paper (cited as
"the authors' generator"), and say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np

from attnlab.tasks.seqtask import VOCABULARY, Task, TaskBatch, distinct, generative, need, register, task_rng


@dataclass(frozen=True)
class MQAR(Task):
    """Multi-query associative recall after Zoology (Arora et al. 2023; Polynomial Concentration, App. B):
    key-value pairs, then the keys queried again among filler.

    Row: ``<bos> k_1 v_1 .. k_D v_D`` then a query region of ``length - 2D`` tokens of filler 0 in which
    every key is queried once, in random order, as ``k v`` in a two-token slot; the value after each query
    key is scored (teacher forcing: the model sees ``k``, predicts ``v``). Keys are ids ``1..keys``, values
    ``keys+1..2*keys``, both distinct within a row as in Zoology; ``<bos>`` = ``2*keys + 1``.
    ``D = num_pairs``, or ``max(1, length // 16)`` when None, so pairs scale with length as in Zoology's
    usual (length, pairs) grid (64, 4), (128, 8), (256, 16) (it then takes 64 pairs at 512). Query slots are
    uniform over the region; Zoology draws them from a power law that puts most queries right after the
    pairs, which would hide long-range recall at long lengths.
    """

    name: str = "mqar"
    keys: int = 4096
    num_pairs: int | None = None
    kind: ClassVar[str] = "generative"
    source: ClassVar[str] = "Zoology (Arora et al. 2023); Polynomial Concentration App. B; Vasylenko et al. 2025 §5.1"
    layout: ClassVar[str] = "<bos> (k v)^D then filler 0 with each key queried once as 'k v'; v after a query scored"

    def __post_init__(self):
        need(
            self.keys >= 1 and (self.num_pairs is None or 1 <= self.num_pairs <= self.keys),
            f"mqar: keys = {self.keys}, num_pairs = {self.num_pairs}; allowed: keys >= 1 and num_pairs None or "
            "1 <= num_pairs <= keys (keys are distinct in a row)",
        )

    @property
    def vocab_size(self) -> int:
        return 2 * self.keys + 2

    @property
    def specials(self) -> dict[str, int]:
        return {"filler": 0, "bos": 2 * self.keys + 1}

    @property
    def min_length(self) -> int:
        return 4 if self.num_pairs is None else 4 * self.num_pairs

    @property
    def max_length(self) -> int | None:
        return 16 * self.keys + 15 if self.num_pairs is None else None

    def sizes(self, length: int) -> dict[str, int]:
        pairs = self.num_pairs or max(1, length // 16)
        return {"pairs": pairs, "queries": pairs, "query_slots": (length - 2 * pairs) // 2}

    def draw(self, rng: np.random.Generator, n: int, length: int) -> TaskBatch:
        size = self.sizes(length)
        d, rows = size["pairs"], np.arange(n)[:, None]
        k = distinct(rng, n, self.keys, d) + 1
        v = distinct(rng, n, self.keys, d) + self.keys + 1
        seq = np.zeros((n, length + 1), dtype=np.int64)
        seq[:, 0] = self.specials["bos"]
        seq[:, 1 : 2 * d + 1 : 2], seq[:, 2 : 2 * d + 2 : 2] = k, v
        pos = 1 + 2 * d + 2 * np.sort(distinct(rng, n, size["query_slots"], d), axis=1)
        order = rng.permuted(np.tile(np.arange(d), (n, 1)), axis=1)
        seq[rows, pos], seq[rows, pos + 1] = np.take_along_axis(k, order, 1), np.take_along_axis(v, order, 1)
        answer = np.zeros_like(seq, dtype=bool)
        answer[rows, pos + 1] = True
        return generative(seq, answer)


register(MQAR(), stream=2)


@lru_cache(maxsize=16)
def _strings(alphabet: int, width: int, count: int | None, role: int) -> np.ndarray | None:
    """The fixed string vocabulary of an MQMTAR role (0 keys, 1 values): ``count`` distinct strings of
    ``width`` alphabet indices, as (count, width), or None for all ``alphabet ** width`` of them. It belongs
    to the task, like the authors' 10K vocabulary, so it does not change with the batch seed."""
    if count is None:
        return None
    rng = task_rng("mqmtar", VOCABULARY, role, alphabet, width, count)
    return _digits(rng.choice(alphabet**width, size=count, replace=False), alphabet, width)


def _digits(index: np.ndarray, alphabet: int, width: int) -> np.ndarray:
    """Base-``alphabet`` digits of ``index``, most significant first: shape ``index.shape + (width,)``."""
    return (index[..., None] // alphabet ** np.arange(width - 1, -1, -1)) % alphabet


@dataclass(frozen=True)
class MQMTAR(Task):
    """Multi-query multi-token associative recall (Vasylenko et al. 2025, §5.1, App. G.1, Fig. 10,
    H.4).

    Row: ``<bos>``, a context of ``C = length - 2 - queries * (2 + key_len + value_len)`` tokens holding
    ``P`` pairs ``key 1 value`` (``key_len`` + 1 + ``value_len`` = 5 tokens, G.1) scattered in random order
    among empty tokens 0, then ``queries`` queries ``3 key``, the separator ``2``, and the scored answer
    ``3 value`` per query, then a scored ``<eos>``. G.1's specials are kept: 0 empty space, 1 key-value
    delimiter, 3 query delimiter, "also used to separate values in the target sequence"; 2 is the
    source/target separator of the authors' generator (which writes the query delimiter as 2 and the
    separator after its alphabet). Alphabet tokens are ``4..alphabet+3``; ``<bos> <eos>`` follow them.

    ``P = min(floor(density * C / 5), vocabulary)``: G.1's "density of key-value pairs is 80% of the total
    number of tokens", counted over the context, and at most the string vocabulary, so that keys stay
    distinct in a row (the authors cap the pair count the same way; past the cap the context just gets
    emptier). Keys and values are distinct within a row, drawn from two fixed vocabularies of ``kv_vocab``
    strings each (G.1: "we limited the size of the key/value vocabulary to 10K"; None = every string).
    Queries pick pairs uniformly with replacement, as in the authors' generator, and need ``P >= queries``.
    The seed's "length" (ID 64) counts the context only; ``length`` here is the whole row.
    """

    name: str = "mqmtar"
    alphabet: int = 256
    key_len: int = 2
    value_len: int = 2
    queries: int = 4
    density: float = 0.8
    kv_vocab: int | None = 10_000
    kind: ClassVar[str] = "generative"
    source: ClassVar[str] = "Vasylenko et al. 2025 §5.1, App. G.1, Fig. 10, Table 5, App. H.4"
    layout: ClassVar[str] = "<bos> context(pairs 'key 1 value' among 0s) (3 key)^Q 2 | (3 value)^Q <eos>"
    paper_units: ClassVar[str] = "context tokens before the queries (the authors' generator: seq_len of them)"

    def __post_init__(self):
        need(
            self.alphabet >= 2 and self.key_len >= 1 and self.value_len >= 1 and self.queries >= 1,
            f"mqmtar: alphabet {self.alphabet}, key_len {self.key_len}, value_len {self.value_len}, queries "
            f"{self.queries}; allowed: alphabet >= 2 and key_len, value_len, queries >= 1",
        )
        need(0 < self.density <= 1, f"mqmtar: density {self.density}; allowed: 0 < density <= 1")
        # String indices are int64: alphabet ** width must fit.
        need(
            self.alphabet ** max(self.key_len, self.value_len) < 2**62,
            f"mqmtar: alphabet ** max(key_len, value_len) = {self.alphabet ** max(self.key_len, self.value_len)}"
            "; allowed: below 2 ** 62",
        )
        every = self.alphabet ** min(self.key_len, self.value_len)
        need(
            self.queries <= (every if self.kv_vocab is None else self.kv_vocab) <= every,
            f"mqmtar: kv_vocab {self.kv_vocab}, queries {self.queries}; allowed: queries <= kv_vocab (None: all "
            f"{every} strings) <= alphabet ** min(key_len, value_len) = {every}",
        )

    @property
    def vocab_size(self) -> int:
        return self.alphabet + 6

    @property
    def specials(self) -> dict[str, int]:
        return {"empty": 0, "kv": 1, "sep": 2, "query": 3, "bos": self.alphabet + 4, "eos": self.alphabet + 5}

    @property
    def _frame(self) -> int:
        """Tokens of a row outside the context: <bos>, queries, separator, answers, <eos>."""
        return 2 + self.queries * (2 + self.key_len + self.value_len)

    def _pairs(self, context: int) -> int:
        every = self.alphabet ** min(self.key_len, self.value_len)
        # The epsilon keeps 0.8 * 25 / 5 at 4 despite binary rounding.
        vocab = every if self.kv_vocab is None else self.kv_vocab
        return min(int(self.density * context / (self.key_len + self.value_len + 1) + 1e-9), vocab)

    @property
    def min_length(self) -> int:
        context = int(np.ceil(self.queries * (self.key_len + self.value_len + 1) / self.density))
        while self._pairs(context) < self.queries:
            context += 1
        while context > 0 and self._pairs(context - 1) >= self.queries:
            context -= 1
        return context + self._frame

    def sizes(self, length: int) -> dict[str, int]:
        context = length - self._frame
        return {"context": context, "pairs": self._pairs(context), "queries": self.queries}

    def row_length(self, n: int) -> int:
        return n + self._frame

    def draw(self, rng: np.random.Generator, n: int, length: int) -> TaskBatch:
        size = self.sizes(length)
        c, p, q, kl, vl = size["context"], size["pairs"], self.queries, self.key_len, self.value_len
        unit, rows, sp = kl + vl + 1, np.arange(n)[:, None], self.specials
        keys, values = self._draw_strings(rng, n, p, kl, 0), self._draw_strings(rng, n, p, vl, 1)
        # Pairs and single empties in a random order; a pair starts where the sizes before it end.
        is_pair = rng.permuted(np.tile(np.arange(p + c - unit * p) < p, (n, 1)), axis=1)
        sizes = np.where(is_pair, unit, 1)
        start = 1 + (np.cumsum(sizes, axis=1) - sizes)[is_pair].reshape(n, p)
        seq = np.zeros((n, length + 1), dtype=np.int64)
        seq[:, 0] = sp["bos"]
        seq[rows, start + kl] = sp["kv"]
        for j in range(kl):
            seq[rows, start + j] = keys[:, :, j]
        for j in range(vl):
            seq[rows, start + kl + 1 + j] = values[:, :, j]
        pick = rng.integers(0, p, size=(n, q))[:, :, None]
        delim = np.full((n, q, 1), sp["query"])
        asked = np.concatenate([delim, np.take_along_axis(keys, pick, 1)], axis=2).reshape(n, -1)
        told = np.concatenate([delim, np.take_along_axis(values, pick, 1)], axis=2).reshape(n, -1)
        a0 = 1 + c + q * (1 + kl) + 1
        seq[:, 1 + c : a0 - 1], seq[:, a0 - 1] = asked, sp["sep"]
        seq[:, a0:length], seq[:, length] = told, sp["eos"]
        answer = np.zeros_like(seq, dtype=bool)
        answer[:, a0:] = True
        return generative(seq, answer)

    def _draw_strings(self, rng: np.random.Generator, n: int, count: int, width: int, role: int) -> np.ndarray:
        """(n, count, width) token ids: ``count`` distinct strings per row from the role's vocabulary."""
        table = _strings(self.alphabet, width, self.kv_vocab, role)
        pool = self.alphabet**width if table is None else len(table)
        index = distinct(rng, n, pool, count)
        return 4 + (_digits(index, self.alphabet, width) if table is None else table[index])


register(MQMTAR(), stream=1)


@dataclass(frozen=True)
class MaxRetrieval(Task):
    """Max Retrieval (Vasylenko et al. 2025, §5.1, App. G.1, H.3, Table 8; after Velickovic et al.
    2025): report a feature of the item with the largest priority.

    Velickovic et al. train one attention head over MLP-encoded items to predict a feature of the maximum
    item, 16 items in training and up to 4096 at test (Table 8). Here the same task in tokens: ``<bos>``,
    ``m = (length - 3) // 2`` items ``p c`` (priority ids ``0..priorities-1``, distinct within a row so the
    maximum is unique; class ids ``priorities..priorities+classes-1``, uniform), ``<sep>``, then the scored
    class of the top-priority item and ``<eos>``. Asking for the class, not the maximum itself, keeps the
    answer uniform at every length (a maximum of many draws piles up at the top priority) and makes the
    model find the one top item, as the seed's sharp-attention reading needs. ``<bos> <sep> <eos>`` follow
    the classes.
    """

    name: str = "max_retrieval"
    priorities: int = 4096
    classes: int = 16
    kind: ClassVar[str] = "generative"
    source: ClassVar[str] = "Vasylenko et al. 2025 §5.1, App. G.1, App. H.3 (Table 8); Velickovic et al. 2025"
    layout: ClassVar[str] = "<bos> (p c)^m <sep> c_of_max_p <eos>, m = (length - 3) // 2"

    def __post_init__(self):
        need(
            self.priorities >= 1 and self.classes >= 2,
            f"max_retrieval: priorities {self.priorities}, classes {self.classes}; allowed: priorities >= 1, "
            "classes >= 2",
        )

    @property
    def vocab_size(self) -> int:
        return self.priorities + self.classes + 3

    @property
    def specials(self) -> dict[str, int]:
        top = self.priorities + self.classes
        return {"bos": top, "sep": top + 1, "eos": top + 2}

    @property
    def min_length(self) -> int:
        return 5

    @property
    def max_length(self) -> int | None:
        return 2 * self.priorities + 4  # m = priorities items, one spare token

    def sizes(self, length: int) -> dict[str, int]:
        return {"items": (length - 3) // 2}

    def draw(self, rng: np.random.Generator, n: int, length: int) -> TaskBatch:
        m, sp = (length - 3) // 2, self.specials
        prio = distinct(rng, n, self.priorities, m)
        cls = self.priorities + rng.integers(0, self.classes, size=(n, m))
        seq = np.full((n, length + 1), sp["eos"], dtype=np.int64)
        seq[:, 0], seq[:, 2 * m + 1] = sp["bos"], sp["sep"]
        seq[:, 1 : 2 * m + 1 : 2], seq[:, 2 : 2 * m + 1 : 2] = prio, cls
        seq[:, 2 * m + 2] = cls[np.arange(n), prio.argmax(axis=1)]
        answer = np.zeros_like(seq, dtype=bool)
        answer[:, 2 * m + 2 : 2 * m + 4] = True
        return generative(seq, answer)


register(MaxRetrieval(), stream=3)


@dataclass(frozen=True)
class _Planted(Task):
    """A random-token stream with one planted bigram ``key value`` and the key again at the end.

    Row: ``<bos>``, ``length - 5`` haystack tokens with ``key value`` inserted at a depth uniform over
    ``0..length-5`` haystack tokens, then ``key``, the scored ``value`` and ``<eos>``. The key occurs only
    at the plant and the query, so the answer is defined; ``value`` may also occur in the haystack.
    """

    symbols: int = 16
    kind: ClassVar[str] = "generative"
    source: ClassVar[str] = "in the manner of Polynomial Concentration App. B, E (induction, NIAH)"

    @property
    def min_length(self) -> int:
        return 6

    def sizes(self, length: int) -> dict[str, int]:
        return {"haystack": length - 5}

    def plant(self, rng: np.random.Generator, n: int, hay: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(keys (n,), values (n,), haystack (n, hay)) of a batch."""
        raise NotImplementedError

    def draw(self, rng: np.random.Generator, n: int, length: int) -> TaskBatch:
        hay = length - 5
        key, value, stream = self.plant(rng, n, hay)
        depth = rng.integers(0, hay + 1, size=(n, 1))
        j = np.arange(hay + 2)
        body = np.take_along_axis(stream, np.clip(j - 2 * (j > depth + 1), 0, hay - 1), axis=1)
        body = np.where(j == depth, key[:, None], np.where(j == depth + 1, value[:, None], body))
        sp = self.specials
        seq = np.concatenate(
            [np.full((n, 1), sp["bos"]), body, key[:, None], value[:, None], np.full((n, 1), sp["eos"])], axis=1
        ).astype(np.int64)
        answer = np.zeros_like(seq, dtype=bool)
        answer[:, length - 1 :] = True
        return generative(seq, answer)


@dataclass(frozen=True)
class NIAHSmall(_Planted):
    """Needle in a haystack with a small vocabulary (after Polynomial Concentration
    App. E): the needle's key comes from its own ``keys`` ids (``symbols..symbols+keys-1``), never in the
    haystack, like the cue of a NIAH template; haystack and value are uniform over the ``symbols`` data
    ids. ``<bos> <eos>`` follow the keys. Row as in ``_Planted``: ``<bos> hay.. K V hay.. K V <eos>`` with
    the needle at a uniform depth."""

    name: str = "niah_small"
    keys: int = 4
    layout: ClassVar[str] = "<bos> hay[:d] K V hay[d:] K V <eos>; K from key ids, d uniform in 0..length-5"

    def __post_init__(self):
        need(
            self.symbols >= 1 and self.keys >= 1,
            f"niah_small: symbols {self.symbols}, keys {self.keys}; allowed: symbols >= 1 and keys >= 1",
        )

    @property
    def vocab_size(self) -> int:
        return self.symbols + self.keys + 2

    @property
    def specials(self) -> dict[str, int]:
        return {"bos": self.symbols + self.keys, "eos": self.symbols + self.keys + 1}

    def plant(self, rng: np.random.Generator, n: int, hay: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        key = self.symbols + rng.integers(0, self.keys, size=n)
        return key, rng.integers(0, self.symbols, size=n), rng.integers(0, self.symbols, size=(n, hay))


register(NIAHSmall(), stream=12)


@dataclass(frozen=True)
class InductionSmall(_Planted):
    """In-context induction with a small vocabulary (after Polynomial Concentration App. B,
    H): a random stream over ``symbols`` data ids where the bigram ``A B`` was planted (``B != A``) and
    ``A`` occurs nowhere else, ending in ``A``; the answer is ``B`` (the seed's planted-B induction, in
    ids). ``<bos> <eos>`` = ``symbols``, ``symbols + 1``.
    Row as in ``_Planted``: ``<bos> s.. A B s.. A B <eos>`` with the bigram at a uniform depth."""

    name: str = "induction_small"
    layout: ClassVar[str] = "<bos> s[:d] A B s[d:] A B <eos>; A absent from s, d uniform in 0..length-5"

    def __post_init__(self):
        need(self.symbols >= 2, f"induction_small: symbols {self.symbols}; allowed: symbols >= 2 (A and B != A)")

    @property
    def vocab_size(self) -> int:
        return self.symbols + 2

    @property
    def specials(self) -> dict[str, int]:
        return {"bos": self.symbols, "eos": self.symbols + 1}

    def plant(self, rng: np.random.Generator, n: int, hay: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a = rng.integers(0, self.symbols, size=n)
        # Uniform over the symbols other than A: draw from one fewer and step over A.
        b = rng.integers(0, self.symbols - 1, size=n)
        s = rng.integers(0, self.symbols - 1, size=(n, hay))
        return a, b + (b >= a), s + (s >= a[:, None])


register(InductionSmall(), stream=13)
