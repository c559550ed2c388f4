"""Pre-tokenized, memory-mapped token shards: Zhu et al. 2026 App. J's packed-token data pipeline.

    >>> prepare("shards/stdlib", folder=None, tokenizer="bytes")     # once: tokenize, write, rename into place
    >>> stream = ShardStream("shards/stdlib", context=256, seed=0)   # every start, resume and rank: map only

``prepare`` tokenizes a corpus with ``data.token_pieces``, so with exactly ``TextStream``'s files, split,
document order and eos placement, and writes a shard folder: ``train.bin`` and ``val.bin`` (each split's
flat ids, little-endian, uint16 when the vocabulary fits in 16 bits, else uint32) and ``meta.json`` (the
format, tokenizer, dtype, token and file counts, each file's SHA-256, and the corpus settings used). ``ShardStream``
maps the
two files read-only and draws windows through ``data.TokenWindows``, so its batches equal ``TextStream``'s
for the same corpus, tokenizer, context, seed, val_fraction and max_tokens, bit for bit, and a start reads
only the windows it uses instead of tokenizing the corpus in every process.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from attnlab import io
from attnlab.batches import DataError
from attnlab.readback import ReadBackError, parse_object
from attnlab.train.data import (
    DEFAULT_VAL_FRACTION,
    Corpus,
    Tokenizer,
    TokenWindows,
    check_request,
    load_tokenizer,
    split_corpus,
    text_files,
    token_pieces,
)

FORMAT = 2  # 2: meta.json holds each .bin's SHA-256, which a resumed run compares
META = "meta.json"
BINS = {"train": "train.bin", "val": "val.bin"}
DTYPES = {"uint16": np.dtype("<u2"), "uint32": np.dtype("<u4")}
TMP = ".tmp-"  # a prepare in progress: .<name>.tmp-<pid>-XXXXXXXX beside the target
WHAT = "a shard folder written by `attnlab prepare`"


def token_dtype(vocab_size: int) -> str:
    """The name of the narrowest dtype in ``DTYPES`` that holds every id below ``vocab_size``."""
    return "uint16" if vocab_size <= 2**16 else "uint32"


def prepare(
    out: str | os.PathLike,
    *,
    folder: str | os.PathLike | None = None,
    tokenizer: str = "bytes",
    patterns: str | Sequence[str] | None = None,
    val_fraction: float = DEFAULT_VAL_FRACTION,
    max_tokens: int | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Tokenize the corpus (``data.text_files(folder, patterns)``) once into the shard folder ``out``; returns
    its meta.json.

    Files are tokenized and appended one at a time, so memory holds one document, not the corpus. All is
    written into a hidden folder beside ``out``, flushed to disk and renamed into place: a failure leaves no
    shard folder, or the previous one intact. An existing ``out`` is refused unless ``overwrite``, and even
    then unless it is empty or a shard folder (a corpus given by mistake is never deleted).
    """
    out = Path(out)
    _check_target(out, overwrite)
    if max_tokens is not None and max_tokens < 1:
        raise DataError(f"max_tokens {max_tokens} is below 1; allowed: a cap >= 1 on tokens per split, or None")
    corpus, tok = text_files(folder, patterns), load_tokenizer(tokenizer)
    out.parent.mkdir(parents=True, exist_ok=True)
    io.remove_stale(out.parent, f".{out.name}{TMP}")
    # mkdir rather than io.temp_dir: the shards get the mode any new folder gets, not mkdtemp's private 0700
    tmp = out.parent / f".{out.name}{TMP}{os.getpid()}-{secrets.token_hex(4)}"  # the pid: io.remove_stale
    tmp.mkdir()
    try:
        meta = _write(tmp, corpus, tok, val_fraction, max_tokens)
        io.swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return meta


def _check_target(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise io.OutputError(f"--out {out} is a file; allowed: a new folder, or a shard folder with --overwrite")
    if not out.is_dir():
        return
    if not overwrite:
        raise io.OutputError(
            f"{out} already exists; pass --overwrite to replace it (it stays intact until the new "
            "shards are complete), or choose another --out"
        )
    held = sorted(e.name for e in out.iterdir())
    # the new folder replaces the whole old one: a file of the user's beside the shards would go with it
    extra = [name for name in held if name not in (META, *BINS.values())]
    if extra or (held and not (out / META).is_file()):
        shown = extra or held
        raise io.OutputError(
            f"{out} holds files that prepare did not write ({', '.join(shown[:4])}"
            f"{', ...' if len(shown) > 4 else ''}); --overwrite replaces only "
            f"an empty folder or a shard folder ({META} and the .bin files alone): choose another --out"
        )


def _write(
    folder: Path, corpus: Corpus, tokenizer: Tokenizer, val_fraction: float, max_tokens: int | None
) -> dict[str, Any]:
    dtype = token_dtype(tokenizer.vocab_size)
    counts = dict.fromkeys(BINS, 0)
    digests = {split: hashlib.sha256() for split in BINS}
    with ExitStack() as stack:
        files = {split: stack.enter_context(open(folder / name, "xb")) for split, name in BINS.items()}
        for split, piece in token_pieces(corpus, tokenizer, val_fraction, max_tokens):
            # a wrong id would wrap silently in the narrower dtype, and be a wrong token ever after
            if len(piece) and (piece.min() < 0 or piece.max() >= tokenizer.vocab_size):
                raise DataError(
                    f"tokenizer {tokenizer.name!r} gave ids outside [0, {tokenizer.vocab_size}) "
                    f"(min {piece.min()}, max {piece.max()}); allowed: ids below its vocab_size"
                )
            data = piece.astype(DTYPES[dtype]).tobytes()
            files[split].write(data)
            digests[split].update(data)
            counts[split] += len(piece)
        for file in files.values():
            file.flush()
            os.fsync(file.fileno())
    for split, n in counts.items():
        if n < 2:
            raise DataError(
                f"the {split} split of {corpus.source!r} has {n} tokens; a window needs at least 2; "
                "allowed: a corpus with text on both sides of the split, or a larger val_fraction"
            )
    train, val = split_corpus(corpus, val_fraction)
    meta = {
        "format": FORMAT,
        "tokenizer": {"name": tokenizer.name, "vocab_size": tokenizer.vocab_size, "eos_id": tokenizer.eos_id},
        "dtype": dtype,
        "byteorder": "little",
        "tokens": counts,
        "sha256": {split: digest.hexdigest() for split, digest in digests.items()},
        "files": {"train": len(train), "val": len(val)},
        "split": "by position" if len(corpus.files) == 1 else "by file",
        "corpus": {
            "folder": corpus.source,
            "root": str(corpus.root),
            "patterns": list(corpus.patterns),
            "val_fraction": val_fraction,
            "max_tokens": max_tokens,
        },
    }
    with open(folder / META, "x", encoding="utf-8") as file:
        file.write(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        file.flush()
        os.fsync(file.fileno())
    io.fsync_dir(folder)
    return meta


def read_meta(folder: str | os.PathLike) -> dict[str, Any]:
    """The checked meta.json of a shard folder: every field ``ShardStream`` reads is present and consistent,
    and each .bin holds exactly the bytes its token count and dtype say (a truncated copy is caught here)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"shard folder {str(folder)!r} does not exist; allowed: {WHAT}")
    try:
        meta = parse_object((folder / META).read_bytes(), folder / META, allowed=WHAT)
    except FileNotFoundError:
        raise DataError(f"{folder} has no {META}; allowed: {WHAT}") from None
    except OSError as exc:
        raise DataError(f"{folder / META} is not readable ({exc.strerror or exc}); allowed: {WHAT}") from None
    except ReadBackError as exc:
        raise DataError(str(exc)) from None
    if meta.get("format") != FORMAT:
        found = meta.get("format")
        raise DataError(
            f"{folder / META} has format {found!r}; this attnlab reads format {FORMAT}: prepare the shards again"
        )
    try:
        vocab, eos, dtype = meta["tokenizer"]["vocab_size"], meta["tokenizer"]["eos_id"], meta["dtype"]
        counts, n_files = [meta["tokens"][split] for split in BINS], [meta["files"][split] for split in BINS]
        cap, fraction, split_by = meta["corpus"]["max_tokens"], meta["corpus"]["val_fraction"], meta["split"]
        digests = [meta["sha256"][split] for split in BINS]
    except KeyError as exc:
        raise DataError(f"{folder / META} lacks field {exc}; allowed: {WHAT}") from None
    except TypeError as exc:
        raise DataError(f"{folder / META} is not a shard meta.json ({exc}); allowed: {WHAT}") from None
    if not (
        _count(vocab, 1)
        and _count(eos, 0)
        and eos < vocab
        and dtype == token_dtype(vocab)
        and all(_count(n, 2) for n in counts)
        and all(_count(n, 1) for n in n_files)
        and (cap is None or _count(cap, 1))
        and _fraction(fraction)
        and split_by in ("by file", "by position")
        and all(isinstance(d, str) and len(d) == 64 for d in digests)
    ):
        raise DataError(
            f"{folder / META} is inconsistent (vocab_size {vocab!r}, eos_id {eos!r}, dtype {dtype!r}, "
            f"tokens {meta['tokens']!r}, files {meta['files']!r}, max_tokens {cap!r}, val_fraction "
            f"{fraction!r}, split {split_by!r}, sha256 {meta['sha256']!r}); allowed: {WHAT}"
        )
    for split, n in zip(BINS, counts):
        path, expected = folder / BINS[split], n * DTYPES[dtype].itemsize
        size = path.stat().st_size if path.is_file() else None
        if size != expected:
            held = "is missing" if size is None else f"holds {size} bytes"
            raise DataError(
                f"{path} {held}, but {META} says {n} {dtype} tokens ({expected} bytes): the folder is "
                "incomplete or damaged; prepare it again"
            )
    return meta


def _count(value: Any, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _fraction(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1


class ShardStream(TokenWindows):
    """``TokenWindows`` over a shard folder's ``train.bin`` and ``val.bin``, mapped read-only: nothing is
    tokenized, and only the windows a batch takes are read from disk.

    ``max_tokens`` cuts each split to its first ``max_tokens`` tokens, which is ``TextStream``'s array under
    that cap; it cannot exceed the cap the shards were prepared with. ``val_fraction`` None takes the shards'
    split; a number must be the one they were prepared with (a split cannot change without tokenizing again).
    """

    def __init__(
        self,
        folder: str | os.PathLike,
        context: int,
        seed: int = 0,
        val_fraction: float | None = None,
        max_tokens: int | None = None,
    ):
        check_request(context, seed, max_tokens)
        self.folder = Path(folder)
        self.meta = meta = read_meta(self.folder)
        prepared = meta["corpus"]
        if val_fraction is not None and val_fraction != prepared["val_fraction"]:
            raise DataError(
                f"the shards in {self.folder} were split with val_fraction {prepared['val_fraction']}, "
                f"not {val_fraction}; allowed: val_fraction unset or {prepared['val_fraction']}, or "
                f"prepare them again with --val-fraction {val_fraction}"
            )
        if max_tokens is not None and prepared["max_tokens"] is not None and max_tokens > prepared["max_tokens"]:
            raise DataError(
                f"the shards in {self.folder} hold at most {prepared['max_tokens']} tokens per split "
                f"(prepared with --max-tokens {prepared['max_tokens']}), fewer than max_tokens "
                f"{max_tokens}; allowed: max_tokens <= {prepared['max_tokens']} or unset, or prepare "
                "them again with a larger --max-tokens"
            )
        self.max_tokens = prepared["max_tokens"] if max_tokens is None else max_tokens
        dtype = DTYPES[meta["dtype"]]
        train, val = (
            np.memmap(self.folder / BINS[split], dtype=dtype, mode="r", shape=(meta["tokens"][split],))[:max_tokens]
            for split in BINS
        )
        super().__init__(train, val, meta["tokenizer"]["vocab_size"], context, seed)

    def describe(self) -> dict:
        """The stream's settings and sizes, for a run's config.json: ``TextStream.describe``'s keys, read from
        the shards' meta.json, plus the shard folder and its files' SHA-256 (which tell a resumed run whether
        the shards were prepared again with other content)."""
        meta, prepared = self.meta, self.meta["corpus"]
        return {
            "shards": str(self.folder),
            "folder": prepared["folder"],
            "root": prepared["root"],
            "patterns": prepared["patterns"],
            "tokenizer": meta["tokenizer"]["name"],
            "vocab_size": self.vocab_size,
            "context": self.context,
            "seed": self.seed,
            "val_fraction": prepared["val_fraction"],
            "max_tokens": self.max_tokens,
            "split": meta["split"],
            "files": meta["files"],
            "tokens": {"train": self.n_train_tokens, "val": self.n_val_tokens},
            "sha256": meta["sha256"],
        }
