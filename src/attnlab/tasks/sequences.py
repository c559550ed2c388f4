"""Sequence tasks of Vasylenko et al. 2025 §5.1, App. G.1, Table 5, Fig. 10: Copy,
Reverse, Sort, 2Back, Local Count and Flip-Flop, as ``Task``s (conventions in ``seqtask``).

Where the seed is silent we follow the data generator the seed's authors published with the paper (its
§Reproducibility points to it; cited below as "the authors' generator"), and say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from attnlab.tasks.seqtask import Task, TaskBatch, classification, generative, need, register


@dataclass(frozen=True)
class _Transduction(Task):
    """``<bos> x_1..x_m <sep> y_1..y_m <eos>`` with ``m = (length - 2) // 2`` source tokens drawn
    uniformly, with repeats, from ``symbols`` data ids ``0..symbols-1``; the answer ``y`` (and ``<eos>``) is
    scored. Vasylenko et al. 2025 App. G.1: "a small vocabulary size of 32 ... since models must handle such
    repetitions"; Table 5's vocabulary counts data tokens only (Flip-Flop: 4 there, "4 main and 3 special" in App.
    H), so the specials come on top: ``<bos> <sep> <eos>`` = ``symbols .. symbols + 2``. The seed's "length" (ID 64)
    counts source tokens; here a sequence of ``length`` tokens holds ``m = (length - 2) // 2`` of them, so scaling
    ``length`` by k scales ``m`` by about k.
    """

    symbols: int = 32
    kind: ClassVar[str] = "generative"
    source: ClassVar[str] = "Vasylenko et al. 2025 §5.1, App. G.1, Table 5"
    layout: ClassVar[str] = "<bos> x_1..x_m <sep> y_1..y_m <eos>, m = (length - 2) // 2"
    paper_units: ClassVar[str] = "source tokens m (the authors' generator draws m = seq_len)"

    def __post_init__(self):
        need(self.symbols >= 2, f"{self.name}: symbols = {self.symbols}; allowed: symbols >= 2")

    @property
    def vocab_size(self) -> int:
        return self.symbols + 3

    @property
    def specials(self) -> dict[str, int]:
        s = self.symbols
        return {"bos": s, "sep": s + 1, "eos": s + 2}

    @property
    def min_length(self) -> int:
        return 4

    def sizes(self, length: int) -> dict[str, int]:
        return {"source_tokens": (length - 2) // 2}

    def row_length(self, n: int) -> int:
        return 2 * n + 2

    def answer(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def draw(self, rng: np.random.Generator, n: int, length: int) -> TaskBatch:
        m = (length - 2) // 2
        sp = self.specials
        x = rng.integers(0, self.symbols, size=(n, m))
        seq = np.full((n, length + 1), sp["eos"], dtype=np.int64)
        seq[:, 0], seq[:, m + 1] = sp["bos"], sp["sep"]
        seq[:, 1 : m + 1], seq[:, m + 2 : 2 * m + 2] = x, self.answer(x)
        answer = np.zeros_like(seq, dtype=bool)
        answer[:, m + 2 : 2 * m + 3] = True
        return generative(seq, answer)


@dataclass(frozen=True)
class Copy(_Transduction):
    """Copy (Vasylenko et al. 2025, §5.1, App. G.1): the answer is the source itself; row as in
    ``_Transduction``."""

    name: str = "copy"

    def answer(self, x: np.ndarray) -> np.ndarray:
        return x


register(Copy(), stream=4)


@dataclass(frozen=True)
class Reverse(_Transduction):
    """Reverse (Vasylenko et al. 2025, §5.1, App. G.1): the answer is the source backwards; row as in
    ``_Transduction``."""

    name: str = "reverse"

    def answer(self, x: np.ndarray) -> np.ndarray:
        return x[:, ::-1]


register(Reverse(), stream=5)


@dataclass(frozen=True)
class Sort(_Transduction):
    """Sort (Vasylenko et al. 2025, §5.1, App. G.1): the answer is the source in ascending
    order; row as in ``_Transduction``."""

    name: str = "sort"

    def answer(self, x: np.ndarray) -> np.ndarray:
        return np.sort(x, axis=1)


register(Sort(), stream=6)


@dataclass(frozen=True)
class TwoBack(Task):
    """2Back (Vasylenko et al. 2025, App. G.1, Fig. 10, H.1): classify each token by the token two
    positions earlier.

    Row: ``<bos> 0 x_1 .. x_{length-2}`` with ``x`` uniform over ``1..symbols-1``; Fig. 10 adds "a special
    token 0 ... at the beginning of the sequence to ensure the model has something to predict at the first
    two positions", so the class of the first two positions after ``<bos>`` is 0 and of every later position
    ``t`` it is ``ids[t - 2]`` (the special 0 itself included, as in the authors' generator). Every position
    but ``<bos>`` is scored. ``symbols`` counts the special 0 (Fig. 10: 10; Table 5 trains with 16); classes
    are data ids, ``<bos>`` = ``symbols``.
    """

    name: str = "2back"
    symbols: int = 10
    kind: ClassVar[str] = "classification"
    source: ClassVar[str] = "Vasylenko et al. 2025 App. G.1, Fig. 10, App. H.1"
    layout: ClassVar[str] = "<bos> 0 x_1..x_{length-2}; class of position t is ids[t-2], 0 for t <= 2"
    paper_units: ClassVar[str] = "random tokens after the special 0 (the authors' generator: seq_len of them)"

    def __post_init__(self):
        need(self.symbols >= 2, f"2back: symbols = {self.symbols}; allowed: symbols >= 2 (the special 0 and more)")

    @property
    def vocab_size(self) -> int:
        return self.symbols + 1

    @property
    def specials(self) -> dict[str, int]:
        return {"bos": self.symbols}

    @property
    def min_length(self) -> int:
        return 3

    def sizes(self, length: int) -> dict[str, int]:
        return {"random_tokens": length - 2}

    def row_length(self, n: int) -> int:
        return n + 2

    def draw(self, rng: np.random.Generator, n: int, length: int) -> TaskBatch:
        ids = np.zeros((n, length), dtype=np.int64)
        ids[:, 0] = self.symbols
        ids[:, 2:] = rng.integers(1, self.symbols, size=(n, length - 2))
        labels = np.zeros_like(ids)
        labels[:, 3:] = ids[:, 1:-2]
        return classification(ids, labels)


register(TwoBack(), stream=7)


@dataclass(frozen=True)
class LocalCount(Task):
    """Local Count (Vasylenko et al. 2025, App. G.1, Fig. 10, H.2): classify each token by how many
    times it has occurred so far in its current cluster (run).

    Row: ``<bos>`` then clusters filling ``length - 1`` positions (the last one cut at the end); a cluster
    repeats one of ``symbols`` data ids ``0..symbols-1`` a number of times uniform over ``1..max_repeat``
    (G.1: "uniformly from U(1, 48)"), and consecutive clusters differ in symbol, since equal neighbours would
    merge into one cluster. The class is the 0-based occurrence index within the cluster (the authors'
    generator counts from 0), so classes are ``0..max_repeat-1``. Defaults are Fig. 10's (vocabulary 8,
    at most 4 repetitions); App. G.1 / Table 5 train with ``symbols=16, max_repeat=48``.
    ``<bos>`` = ``max(symbols, max_repeat)`` so it is neither a symbol nor a class.
    """

    name: str = "local_count"
    symbols: int = 8
    max_repeat: int = 4
    kind: ClassVar[str] = "classification"
    source: ClassVar[str] = "Vasylenko et al. 2025 App. G.1, Fig. 10, App. H.2"
    layout: ClassVar[str] = "<bos> clusters w^r (w != previous w, r ~ U{1..max_repeat}); class = 0-based index in w^r"
    paper_units: ClassVar[str] = "counted tokens (the authors' generator fills about seq_len of them)"

    def __post_init__(self):
        need(
            self.symbols >= 2 and self.max_repeat >= 1,
            f"local_count: symbols = {self.symbols}, max_repeat = {self.max_repeat}; allowed: symbols >= 2 "
            "(neighbouring clusters differ) and max_repeat >= 1",
        )

    @property
    def vocab_size(self) -> int:
        return max(self.symbols, self.max_repeat) + 1

    @property
    def specials(self) -> dict[str, int]:
        return {"bos": max(self.symbols, self.max_repeat)}

    @property
    def min_length(self) -> int:
        return 2

    def sizes(self, length: int) -> dict[str, int]:
        return {"counted_tokens": length - 1}

    def row_length(self, n: int) -> int:
        return n + 1

    def draw(self, rng: np.random.Generator, n: int, length: int) -> TaskBatch:
        span = length - 1
        # span clusters always suffice, since each covers at least one position.
        runs = rng.integers(1, self.max_repeat + 1, size=(n, span))
        first = rng.integers(0, self.symbols, size=(n, 1))
        steps = rng.integers(1, self.symbols, size=(n, span - 1))
        symbol = np.concatenate([first, first + np.cumsum(steps, axis=1)], axis=1) % self.symbols
        starts = np.cumsum(runs, axis=1) - runs
        is_start = np.zeros((n, span), dtype=bool)
        rows, cols = np.nonzero(starts < span)
        is_start[rows, starts[rows, cols]] = True
        cluster = np.cumsum(is_start, axis=1) - 1
        pos = np.arange(span)
        ids = np.full((n, length), max(self.symbols, self.max_repeat), dtype=np.int64)
        ids[:, 1:] = np.take_along_axis(symbol, cluster, axis=1)
        labels = np.zeros_like(ids)
        labels[:, 1:] = pos - np.maximum.accumulate(np.where(is_start, pos, 0), axis=1)
        return classification(ids, labels)


register(LocalCount(), stream=8)


@dataclass(frozen=True)
class FlipFlop(Task):
    """Flip-Flop (Vasylenko et al. 2025, App. G.1, Table 5, after Liu et al. 2023): recall the bit
    of the last write.

    Row: ``<bos>`` then ``k = (length - 1) // 2`` instructions, each followed by a bit except the last; the
    first instruction is ``w`` (so a bit is always stored), the last is ``r``, and each one between is ``w``
    with probability ``p_write`` and ``i`` otherwise (G.1: 10% sparse, 80% dense; G.1's example has one
    ``r``, at the end, as in the authors' generator). The answer after ``r`` is the bit that followed the
    last ``w``; it and ``<eos>`` are scored (exact match). Ids: bits 0/1, ``w i r`` = 2 3 4, then
    ``<bos> <eos>`` = 5 6: 7 tokens, the size App. H reports ("4 main and 3 special"; the seed does not say
    which are which).
    """

    name: str = "flipflop_sparse"
    p_write: float = 0.1
    kind: ClassVar[str] = "generative"
    source: ClassVar[str] = "Vasylenko et al. 2025 App. G.1, Table 5, App. H (Tables 11-13)"
    layout: ClassVar[str] = "<bos> w b (w|i b)* r ANSWER <eos>, (length - 1) // 2 instructions"
    paper_units: ClassVar[str] = "instruction and bit tokens (the authors' generator: seq_len // 2 instructions)"

    def __post_init__(self):
        need(0 < self.p_write < 1, f"{self.name}: p_write = {self.p_write}; allowed: 0 < p_write < 1")

    @property
    def vocab_size(self) -> int:
        return 7

    @property
    def specials(self) -> dict[str, int]:
        return {"w": 2, "i": 3, "r": 4, "bos": 5, "eos": 6}

    @property
    def min_length(self) -> int:
        return 5

    def sizes(self, length: int) -> dict[str, int]:
        return {"instructions": (length - 1) // 2}

    def row_length(self, n: int) -> int:
        return 2 * (n // 2) + 1

    def draw(self, rng: np.random.Generator, n: int, length: int) -> TaskBatch:
        k = (length - 1) // 2
        sp = self.specials
        cmd = np.where(rng.random((n, k)) < self.p_write, sp["w"], sp["i"])
        cmd[:, 0], cmd[:, -1] = sp["w"], sp["r"]
        bits = rng.integers(0, 2, size=(n, k))
        last_write = k - 1 - np.argmax((cmd == sp["w"])[:, ::-1], axis=1)
        seq = np.full((n, length + 1), sp["eos"], dtype=np.int64)
        seq[:, 0] = sp["bos"]
        seq[:, 1 : 2 * k + 1 : 2], seq[:, 2 : 2 * k + 1 : 2] = cmd, bits
        # The slot after r carries the answer, not a fresh bit.
        seq[:, 2 * k] = bits[np.arange(n), last_write]
        answer = np.zeros_like(seq, dtype=bool)
        answer[:, 2 * k : 2 * k + 2] = True
        return generative(seq, answer)


register(FlipFlop(name="flipflop_sparse", p_write=0.1), stream=9)
register(FlipFlop(name="flipflop_dense", p_write=0.8), stream=10)
