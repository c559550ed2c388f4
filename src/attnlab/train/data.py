"""Training data streams for attnlab's decoder: offline, deterministic and stateless by step.

    >>> corpus = text_files(None)                      # the Python standard library's own sources
    >>> stream = TextStream(corpus, load_tokenizer("bytes"), context=256, seed=0, max_tokens=2_000_000)
    >>> inputs, targets = stream.train_batch(step, batch=64, rank=rank, world=world)

The global batch of step ``s`` is a pure function of ``(seed, s)``: its window starts are
``np.random.default_rng([seed, s]).integers(0, n_train - context, size=batch)``. Resuming at step ``s``
therefore needs no iterator state, and rank ``r`` of ``w`` takes rows ``[r*B/w, (r+1)*B/w)`` of that same
global batch, so a single-process run and a ``w``-process run see the same global batch at every step.
``TokenWindows`` holds that rule once; ``TextStream`` fills it by tokenizing (``token_pieces``) and
``shards.ShardStream`` by mapping what ``attnlab prepare`` wrote with the same ``token_pieces``.
Nothing here downloads: corpora are local folders and tokenizers are ``"bytes"`` or a local folder.
"""

from __future__ import annotations

import fnmatch
import hashlib
import math
import os
import sysconfig
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from attnlab.batches import DataError, rank_rows

DEFAULT_PATTERNS = ("*.txt", "*.md", "*.py")
STDLIB_PATTERNS = ("*.py",)
# Installed third-party packages are not the standard library, and the regression tests (``test``,
# ``idle_test``...) are a large, oddly encoded share of it that teaches little about ordinary code.
STDLIB_SKIP = frozenset({"site-packages", "dist-packages", "test", "tests", "idle_test"})
DEFAULT_VAL_FRACTION = 0.05


class Tokenizer(Protocol):
    """What the streams need from a tokenizer: ids for text, an end-of-document id, the vocabulary size."""

    name: str
    vocab_size: int
    eos_id: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def encode_bytes(self, data: bytes) -> np.ndarray: ...


class ByteTokenizer:
    """UTF-8 bytes as ids 0..255 plus the end-of-document id 256 (vocabulary 257)."""

    name = "bytes"
    vocab_size = 257
    eos_id = 256
    eos_text = "<|endoftext|>"

    def encode(self, text: str) -> list[int]:
        """The UTF-8 bytes of ``text``, one id per byte."""
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``: bytes decoded with ``errors="replace"``, each eos written as ``eos_text``."""
        pieces, run = [], []
        for i in ids:
            if i == self.eos_id:
                pieces += [bytes(run).decode("utf-8", errors="replace"), self.eos_text]
                run = []
            else:
                run.append(i)
        return "".join(pieces) + bytes(run).decode("utf-8", errors="replace")

    def encode_bytes(self, data: bytes) -> np.ndarray:
        """The ids of a file's raw bytes, without a Python loop (the stdlib corpus is megabytes)."""
        return np.frombuffer(data, dtype=np.uint8).astype(np.int32)


class HFTokenizer:
    """A local Hugging Face tokenizer behind the same interface as ``ByteTokenizer``.

    ``eos_id`` is the tokenizer's eos token, or else its bos token (either one marks a document
    boundary); a tokenizer with neither is refused. Documents are encoded without special tokens, since
    the stream itself places ``eos_id`` between them. ``vocab_size`` counts added tokens too.
    """

    def __init__(self, tokenizer, name: str):
        eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.bos_token_id
        if eos is None:
            raise DataError(
                f"tokenizer {name!r} has neither an eos nor a bos token, so documents cannot be "
                "separated; use a tokenizer with an eos token, or 'bytes'"
            )
        self.tokenizer, self.name, self.eos_id, self.vocab_size = tokenizer, name, int(eos), len(tokenizer)

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``, without special tokens."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        """The tokenizer's own decoding of ``ids``."""
        return self.tokenizer.decode(list(ids))

    def encode_bytes(self, data: bytes) -> np.ndarray:
        """The ids of a file's bytes read as UTF-8 with ``errors="replace"``."""
        return np.asarray(self.encode(data.decode("utf-8", errors="replace")), dtype=np.int32)


def load_tokenizer(spec: str) -> Tokenizer:
    """``"bytes"`` gives ``ByteTokenizer``; any other spec is a local Hugging Face tokenizer folder."""
    if spec == "bytes":
        return ByteTokenizer()
    if not Path(spec).is_dir():
        raise DataError(
            f"tokenizer {spec!r} is neither 'bytes' nor an existing folder; allowed: 'bytes' or a "
            "local tokenizer folder written by save_pretrained (nothing is downloaded)"
        )
    # Imported here: transformers takes seconds to import and byte-level runs never need it.
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(spec, local_files_only=True)
    except (OSError, ValueError) as err:
        raise DataError(
            f"cannot load a tokenizer from folder {spec!r} ({err}); allowed: 'bytes' or a local "
            "tokenizer folder written by save_pretrained"
        ) from err
    return HFTokenizer(tokenizer, spec)


@dataclass(frozen=True)
class Corpus:
    """The files of a corpus: ``files`` are POSIX paths relative to ``root``, sorted."""

    root: Path
    files: tuple[str, ...]
    patterns: tuple[str, ...]
    source: str  # "stdlib" or the folder as given


def text_files(folder: str | Path | None = None, patterns: str | Sequence[str] | None = None) -> Corpus:
    """The regular files under ``folder`` (recursively) whose names match any of ``patterns``.

    ``patterns`` are file-name globs (one string or several), ``DEFAULT_PATTERNS`` (``*.txt``, ``*.md``,
    ``*.py``) by default.
    Hidden files and folders (name starting with ".") are skipped, so ``.git`` or ``.venv`` never enter.
    ``folder=None`` is the default corpus: the running Python's standard library,
    ``sysconfig.get_paths()["stdlib"]``, ``*.py`` files, without the folders in ``STDLIB_SKIP``
    (installed packages and the regression tests).
    """
    if folder is None:
        root, skip, source, default = Path(sysconfig.get_paths()["stdlib"]), STDLIB_SKIP, "stdlib", STDLIB_PATTERNS
    else:
        root, skip, source, default = Path(folder), frozenset(), str(folder), DEFAULT_PATTERNS
    patterns = default if patterns is None else (patterns,) if isinstance(patterns, str) else tuple(patterns)
    if not root.is_dir():
        raise DataError(
            f"corpus folder {str(root)!r} does not exist; allowed: an existing folder of text "
            "files, or None for the Python standard library"
        )
    files = sorted(_walk(root, patterns, skip))
    if not files:
        raise DataError(
            f"corpus folder {str(root)!r} has no regular files matching {', '.join(patterns)} "
            "(hidden files skipped); allowed: a folder with at least one such file, or other "
            "patterns"
        )
    return Corpus(root, tuple(files), patterns, source)


def _walk(root: Path, patterns: tuple[str, ...], skip: frozenset[str]) -> list[str]:
    found = []
    for here, dirs, names in os.walk(root):
        # Pruned in place so os.walk never descends into them: site-packages alone can be 10x the stdlib.
        dirs[:] = [d for d in dirs if d not in skip and not d.startswith(".")]
        rel = Path(here).relative_to(root)
        for name in names:
            if (
                not name.startswith(".")
                and any(fnmatch.fnmatch(name, p) for p in patterns)
                and Path(here, name).is_file()
            ):
                found.append((rel / name).as_posix())
    return found


def file_hash(rel_path: str) -> float:
    """A number in [0, 1) from the relative path's blake2b digest: the same on every machine and run."""
    digest = hashlib.blake2b(rel_path.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def split_files(files: Sequence[str], val_fraction: float = DEFAULT_VAL_FRACTION) -> tuple[list[str], list[str]]:
    """(train, validation) relative paths, each sorted: validation holds the files hashing below
    ``val_fraction``. With two or more files each side gets at least one: an empty validation side takes
    the smallest-hash file, an empty train side the largest-hash one. The split depends only on the paths,
    never on their order.
    """
    _check_fraction(val_fraction)
    ranked = sorted(set(files), key=lambda f: (file_hash(f), f))
    n_val = sum(file_hash(f) < val_fraction for f in ranked)
    if len(ranked) >= 2:
        n_val = min(max(n_val, 1), len(ranked) - 1)
    return sorted(ranked[n_val:]), sorted(ranked[:n_val])


def _check_fraction(val_fraction: float) -> None:
    if not 0 < val_fraction < 1:
        raise DataError(f"val_fraction {val_fraction} is outside (0, 1); allowed: a fraction such as 0.05")


def split_corpus(corpus: Corpus, val_fraction: float = DEFAULT_VAL_FRACTION) -> tuple[list[str], list[str]]:
    """(train, validation) files: ``split_files``'s, or for a single-file corpus that file on both sides
    (``token_pieces`` then splits its tokens by position)."""
    if len(corpus.files) == 1:
        return list(corpus.files), list(corpus.files)
    return split_files(corpus.files, val_fraction)


def token_pieces(
    corpus: Corpus, tokenizer: Tokenizer, val_fraction: float = DEFAULT_VAL_FRACTION, max_tokens: int | None = None
) -> Iterator[tuple[str, np.ndarray]]:
    """The corpus's tokens as ``("train" | "val", int32 ids)`` pieces, every train piece first; joined per split
    they are the split's flat array.

    A split's files (``split_corpus``) are tokenized one at a time in sorted order, ``eos_id`` before every
    document but the first, and tokenizing stops once ``max_tokens`` are reached (the last piece is cut
    there), so a writer can stream a corpus larger than memory. A single-file corpus is split by position
    instead: its last ``val_fraction`` of tokens (rounded up) is validation, each side cut at ``max_tokens``.
    """
    _check_fraction(val_fraction)
    if len(corpus.files) == 1:
        tokens = tokenizer.encode_bytes((corpus.root / corpus.files[0]).read_bytes())
        cut = len(tokens) - math.ceil(len(tokens) * val_fraction)
        yield "train", tokens[:cut][:max_tokens]
        yield "val", tokens[cut:][:max_tokens]
        return
    for split, files in zip(("train", "val"), split_corpus(corpus, val_fraction)):
        for piece in _documents(corpus.root, files, tokenizer, max_tokens):
            yield split, piece


def _documents(root: Path, files: Sequence[str], tokenizer: Tokenizer, max_tokens: int | None) -> Iterator[np.ndarray]:
    eos = np.array([tokenizer.eos_id], dtype=np.int32)
    total = 0
    for i, rel in enumerate(files):
        if max_tokens is not None and total >= max_tokens:
            return
        ids = tokenizer.encode_bytes((root / rel).read_bytes())
        piece = (np.concatenate([eos, ids]) if i else ids)[: None if max_tokens is None else max_tokens - total]
        total += len(piece)
        yield piece


def check_request(context: int, seed: int, max_tokens: int | None) -> None:
    """Refuse a window length, seed or cap no stream can serve, before any tokenizing or mapping."""
    if context < 1 or seed < 0 or (max_tokens is not None and max_tokens < 1):
        raise DataError(
            f"context {context}, seed {seed}, max_tokens {max_tokens}: allowed are context >= 1, "
            "seed >= 0 and max_tokens >= 1 or None"
        )


@runtime_checkable
class Batches(Protocol):
    """The interface the trainer draws batches from: ``TextStream``, ``shards.ShardStream`` and the synthetic
    task streams implement it. ``train_batch(step, ...)`` must be a pure function of (seed, step), and
    ``val_batches`` the same fixed list on every call; both follow the same rank-slicing rule."""

    vocab_size: int

    def train_batch(
        self, step: int, batch: int, rank: int = 0, world: int = 1
    ) -> tuple[torch.Tensor, torch.Tensor]: ...

    def val_batches(
        self, batch: int, n_batches: int | None = None, rank: int = 0, world: int = 1
    ) -> list[tuple[torch.Tensor, torch.Tensor]]: ...

    def describe(self) -> dict: ...


class TokenWindows:
    """Windows of ``context + 1`` tokens from two flat token arrays, train and validation: the one sampling
    rule every text stream follows, whether its arrays were tokenized (``TextStream``) or mapped from disk
    (``shards.ShardStream``). Inputs are ``window[:-1]``, targets ``window[1:]``, both torch.long of shape
    (rows, context). The arrays may be any integer dtype and any sequence numpy can index by an array of
    positions (a read-only ``np.memmap`` included); only the rows a batch takes are read.
    """

    def __init__(self, train_tokens: np.ndarray, val_tokens: np.ndarray, vocab_size: int, context: int, seed: int):
        self.train_tokens, self.val_tokens = train_tokens, val_tokens
        self.vocab_size, self.context, self.seed = vocab_size, context, seed
        for split, tokens in (("train", train_tokens), ("validation", val_tokens)):
            if len(tokens) < context + 1:
                raise DataError(
                    f"the {split} split has {len(tokens)} tokens, fewer than context + 1 = "
                    f"{context + 1}; allowed: a shorter context, a larger corpus, val_fraction or "
                    "max_tokens"
                )

    @property
    def n_train_tokens(self) -> int:
        return len(self.train_tokens)

    @property
    def n_val_tokens(self) -> int:
        return len(self.val_tokens)

    def train_batch(self, step: int, batch: int, rank: int = 0, world: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """Rank ``rank``'s rows of step ``step``'s global batch of ``batch`` windows, starts drawn uniformly
        from ``np.random.default_rng([seed, step])`` over every start with a full window."""
        if step < 0:
            raise DataError(f"step {step} is negative; allowed: step >= 0")
        lo, hi = rank_rows(batch, rank, world)
        starts = np.random.default_rng([self.seed, step]).integers(0, self.n_train_tokens - self.context, size=batch)
        return self._windows(self.train_tokens, starts[lo:hi])

    def val_batches(
        self, batch: int, n_batches: int | None = None, rank: int = 0, world: int = 1
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Up to ``n_batches`` (all when None) full batches of disjoint validation windows, rank-sliced.

        The split is cut into consecutive windows of ``context + 1`` tokens; the ``n_batches * batch``
        used are spread evenly over them, so a capped evaluation still samples the whole split.
        """
        lo, hi = rank_rows(batch, rank, world)
        n_windows = self.n_val_tokens // (self.context + 1)
        available = n_windows // batch
        if available == 0:
            raise DataError(
                f"the validation split has {n_windows} windows of context + 1 = {self.context + 1} "
                f"tokens, fewer than batch {batch}; allowed: a smaller batch or context, or a larger "
                "val_fraction"
            )
        count = available if n_batches is None else min(n_batches, available)
        # floor(i * n / k) is strictly increasing for k <= n, so the chosen windows never repeat.
        starts = (np.arange(count * batch) * n_windows // (count * batch)) * (self.context + 1)
        return [self._windows(self.val_tokens, rows[lo:hi]) for rows in starts.reshape(count, batch)]

    def _windows(self, tokens: np.ndarray, starts: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        # int64 in numpy: torch has no long view of a shard's uint16/uint32 ids
        windows = torch.from_numpy(np.asarray(tokens[starts[:, None] + np.arange(self.context + 1)], dtype=np.int64))
        return windows[:, :-1], windows[:, 1:]


class TextStream(TokenWindows):
    """``TokenWindows`` over a corpus tokenized in memory at construction.

    Each split's files are tokenized once, in sorted order, into one flat int32 array with ``eos_id``
    between documents; ``max_tokens`` caps each split's array (tokenizing stops once the cap is reached,
    so a small run on the stdlib stays fast). Files are split with ``split_files``; a single-file corpus
    is split by position instead, its last ``val_fraction`` of tokens being validation (``token_pieces``).
    """

    def __init__(
        self,
        corpus: Corpus,
        tokenizer: Tokenizer,
        context: int,
        seed: int = 0,
        val_fraction: float = DEFAULT_VAL_FRACTION,
        max_tokens: int | None = None,
    ):
        check_request(context, seed, max_tokens)
        _check_fraction(val_fraction)
        self.corpus, self.tokenizer = corpus, tokenizer
        self.val_fraction, self.max_tokens = val_fraction, max_tokens
        self.train_files, self.val_files = split_corpus(corpus, val_fraction)
        pieces: dict[str, list[np.ndarray]] = {"train": [], "val": []}
        for split, piece in token_pieces(corpus, tokenizer, val_fraction, max_tokens):
            pieces[split].append(piece)
        train, val = (np.concatenate(p) if p else np.zeros(0, dtype=np.int32) for p in pieces.values())
        super().__init__(train, val, tokenizer.vocab_size, context, seed)

    def describe(self) -> dict:
        """The stream's settings and sizes, for a run's config.json."""
        return {
            "folder": self.corpus.source,
            "root": str(self.corpus.root),
            "patterns": list(self.corpus.patterns),
            "tokenizer": self.tokenizer.name,
            "vocab_size": self.vocab_size,
            "context": self.context,
            "seed": self.seed,
            "val_fraction": self.val_fraction,
            "max_tokens": self.max_tokens,
            "split": "by position" if len(self.corpus.files) == 1 else "by file",
            "files": {"train": len(self.train_files), "val": len(self.val_files)},
            "tokens": {"train": self.n_train_tokens, "val": self.n_val_tokens},
        }
