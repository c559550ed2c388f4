"""Shards from prepare batch exactly as TextStream does, are written atomically, and train and resume untokenized."""

from __future__ import annotations

import hashlib
import json
import re

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from attnlab.io import OutputError
from attnlab.model.config import ConfigError
from attnlab.train import checkpoint as ckpt
from attnlab.train import shards as shard_module
from attnlab.train import trainer as trainer_module
from attnlab.train.config import load
from attnlab.train.data import Batches, ByteTokenizer, DataError, TextStream, load_tokenizer, text_files
from attnlab.train.metrics import read_metrics
from attnlab.train.shards import ShardStream, prepare, read_meta, token_dtype
from attnlab.train.trainer import Trainer, train
from hostile_json import hostile, one_line
from offline import build_tokenizer

T = 8
SEED = 3


def _corpus(folder, n=9):
    """Files of random sizes and words (some non-ASCII, so bytes and a BPE split them differently), one empty."""
    rng = np.random.default_rng(1)
    words = ["the", "cat", "sat", "on", "mat", "def", "main():", "return", "0", "dog", "ran", "héllo", "✓"]
    (folder / "sub").mkdir(parents=True)
    for i in range(n):
        text = " ".join(rng.choice(words, size=int(rng.integers(20, 120))))
        (folder / ("sub" if i < 2 else "") / f"doc{i}.txt").write_text(text, encoding="utf-8")
    (folder / "empty.txt").write_text("")
    return folder


@pytest.fixture(scope="module")
def hf_tokenizer(tmp_path_factory):
    """A small byte-level BPE tokenizer folder written by save_pretrained (built offline)."""
    folder = tmp_path_factory.mktemp("tok") / "bpe"
    build_tokenizer(folder, "bpe")
    return str(folder)


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype == torch.long and torch.equal(x, y)


def _check_equal(text: TextStream, shards: ShardStream) -> None:
    assert isinstance(shards, Batches) and shards.vocab_size == text.vocab_size
    np.testing.assert_array_equal(shards.train_tokens, text.train_tokens)
    np.testing.assert_array_equal(shards.val_tokens, text.val_tokens)
    for step in (0, 1, 17):
        _same(shards.train_batch(step, 4), text.train_batch(step, 4))
        for rank in range(2):
            _same(shards.train_batch(step, 4, rank=rank, world=2), text.train_batch(step, 4, rank=rank, world=2))
    for batches in ((2,), (2, 2), (1, 3)):
        for rank in range(2):
            a, b = (
                shards.val_batches(2 * batches[0], *batches[1:], rank=rank, world=2),
                text.val_batches(2 * batches[0], *batches[1:], rank=rank, world=2),
            )
            assert len(a) == len(b)
            for x, y in zip(a, b):
                _same(x, y)
    shown = shards.describe()
    assert shown.pop("shards") == str(shards.folder)
    assert shown.pop("sha256") == {
        split: hashlib.sha256((shards.folder / name).read_bytes()).hexdigest()
        for split, name in shard_module.BINS.items()
    }
    assert shown == text.describe()


@pytest.mark.parametrize("spec", ["bytes", "hf"])
@pytest.mark.parametrize("max_tokens", [None, 300])
def test_shard_batches_equal_text_stream_batches(tmp_path, spec, max_tokens, request):
    spec = request.getfixturevalue("hf_tokenizer") if spec == "hf" else spec
    folder = _corpus(tmp_path / "corpus")
    meta = prepare(tmp_path / "shards", folder=folder, tokenizer=spec, val_fraction=0.3, max_tokens=max_tokens)
    text = TextStream(
        text_files(folder), load_tokenizer(spec), context=T, seed=SEED, val_fraction=0.3, max_tokens=max_tokens
    )
    _check_equal(text, ShardStream(tmp_path / "shards", context=T, seed=SEED))
    assert meta == read_meta(tmp_path / "shards") and meta["dtype"] == "uint16"
    assert meta["tokens"] == {"train": text.n_train_tokens, "val": text.n_val_tokens}
    assert meta["files"] == {"train": len(text.train_files), "val": len(text.val_files)}
    assert meta["tokenizer"] == {"name": spec, "vocab_size": text.vocab_size, "eos_id": text.tokenizer.eos_id}
    assert (tmp_path / "shards" / "train.bin").stat().st_size == 2 * text.n_train_tokens


def test_a_cap_at_read_time_is_the_text_streams_cap_and_a_single_file_splits_by_position(tmp_path):
    folder = _corpus(tmp_path / "corpus")
    prepare(tmp_path / "all", folder=folder, val_fraction=0.3)
    for cap in (50, 200):
        text = TextStream(text_files(folder), ByteTokenizer(), context=T, seed=SEED, val_fraction=0.3, max_tokens=cap)
        _check_equal(text, ShardStream(tmp_path / "all", context=T, seed=SEED, val_fraction=0.3, max_tokens=cap))
    one = tmp_path / "one"
    one.mkdir()
    (one / "only.txt").write_text("abcdefghij" * 30)
    meta = prepare(tmp_path / "single", folder=one, val_fraction=0.2, max_tokens=200)
    text = TextStream(text_files(one), ByteTokenizer(), context=T, seed=SEED, val_fraction=0.2, max_tokens=200)
    _check_equal(text, ShardStream(tmp_path / "single", context=T, seed=SEED))
    assert meta["split"] == "by position" and meta["tokens"] == {"train": 200, "val": 60}


def test_prepare_tokenizes_file_by_file_and_stops_at_the_cap(tmp_path, monkeypatch):
    folder = _corpus(tmp_path / "corpus")
    calls, encode = [], ByteTokenizer.encode_bytes

    def counted(self, data):
        calls.append(len(data))
        return encode(self, data)

    monkeypatch.setattr(ByteTokenizer, "encode_bytes", counted)
    prepare(tmp_path / "shards", folder=folder, val_fraction=0.3)
    files = text_files(folder)
    assert sorted(calls) == sorted((folder / f).stat().st_size for f in files.files)  # one document per call
    calls.clear()
    prepare(tmp_path / "capped", folder=folder, val_fraction=0.3, max_tokens=20)
    assert len(calls) == 2 and min(calls) >= 20  # the first document of each split already fills the cap


class _WideTokenizer(ByteTokenizer):
    """Bytes, with the end-of-document id past 16 bits: a vocabulary only uint32 holds."""

    name, vocab_size, eos_id = "wide", 70_000, 69_999


def test_dtype_is_uint16_up_to_65536_ids_else_uint32(tmp_path, monkeypatch):
    assert [token_dtype(v) for v in (257, 65_536, 65_537, 150_000)] == ["uint16", "uint16", "uint32", "uint32"]
    monkeypatch.setattr(shard_module, "load_tokenizer", lambda spec: _WideTokenizer())
    folder = _corpus(tmp_path / "corpus")
    meta = prepare(tmp_path / "shards", folder=folder, tokenizer="wide", val_fraction=0.3)
    text = TextStream(text_files(folder), _WideTokenizer(), context=T, seed=SEED, val_fraction=0.3)
    stream = ShardStream(tmp_path / "shards", context=T, seed=SEED)
    _check_equal(text, stream)
    assert meta["dtype"] == "uint32" and stream.train_tokens.dtype == np.dtype("<u4")
    assert (tmp_path / "shards" / "train.bin").stat().st_size == 4 * text.n_train_tokens
    assert (stream.train_tokens == 69_999).sum() == len(text.train_files) - 1


def test_the_shards_are_mapped_read_only(tmp_path):
    prepare(tmp_path / "shards", folder=_corpus(tmp_path / "corpus"), val_fraction=0.3)
    stream = ShardStream(tmp_path / "shards", context=T)
    assert isinstance(stream.train_tokens, np.memmap) and not stream.train_tokens.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        stream.train_tokens[0] = 1


def _contents(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_prepare_is_atomic_and_refuses_to_overwrite(tmp_path, monkeypatch):
    folder, out = _corpus(tmp_path / "corpus"), tmp_path / "shards"
    prepare(out, folder=folder, val_fraction=0.3)
    good = _contents(out)
    assert out.stat().st_mode == folder.stat().st_mode  # any new folder's mode, not a temporary folder's 0700
    with pytest.raises(OutputError, match="already exists; pass --overwrite"):
        prepare(out, folder=folder, val_fraction=0.3)

    calls = []
    encode = ByteTokenizer.encode_bytes

    def failing(self, data):
        calls.append(1)
        if len(calls) > 3:
            raise OSError(28, "No space left on device")
        return encode(self, data)

    monkeypatch.setattr(ByteTokenizer, "encode_bytes", failing)
    with pytest.raises(OSError, match="No space left"):
        prepare(out, folder=folder, val_fraction=0.1, overwrite=True)
    assert _contents(out) == good  # the old shards, untouched
    with pytest.raises(OSError, match="No space left"):
        prepare(tmp_path / "new", folder=folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "shards"]  # no half-written folder left

    monkeypatch.setattr(ByteTokenizer, "encode_bytes", encode)
    assert prepare(out, folder=folder, val_fraction=0.2, overwrite=True)["corpus"]["val_fraction"] == 0.2
    assert _contents(out) != good and sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "shards"]

    with pytest.raises(OutputError, match=r"holds files that prepare did not write \(doc2.txt, doc3.txt, "):
        prepare(folder, folder=folder, overwrite=True)  # a corpus given as --out is never deleted
    assert (folder / "doc2.txt").is_file()
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="is a file"):
        prepare(tmp_path / "file", folder=folder, overwrite=True)


def _break(folder, edit):
    meta = json.loads((folder / "meta.json").read_text())
    edit(meta)
    (folder / "meta.json").write_text(json.dumps(meta))


def test_bad_shard_folders_are_named(tmp_path):
    folder, out = _corpus(tmp_path / "corpus"), tmp_path / "shards"
    with pytest.raises(DataError, match="shard folder .* does not exist; allowed: a shard folder written by"):
        read_meta(out)
    prepare(out, folder=folder, val_fraction=0.3, max_tokens=200)
    with pytest.raises(DataError, match=r"split with val_fraction 0.3, not 0.1; allowed: val_fraction unset or 0.3"):
        ShardStream(out, context=T, val_fraction=0.1)
    with pytest.raises(DataError, match=r"hold at most 200 tokens per split .*allowed: max_tokens <= 200 or unset"):
        ShardStream(out, context=T, max_tokens=201)
    with pytest.raises(DataError, match=r"the train split has 200 tokens, fewer than context \+ 1 = 201"):
        ShardStream(out, context=200)
    bin_file = out / "train.bin"
    bin_file.write_bytes(bin_file.read_bytes()[:-2])
    with pytest.raises(DataError, match=r"train.bin holds 398 bytes, but meta.json says 200 uint16 tokens \(400 "):
        read_meta(out)
    bin_file.unlink()
    with pytest.raises(DataError, match="train.bin is missing"):
        read_meta(out)
    prepare(out, folder=folder, val_fraction=0.3, overwrite=True)
    _break(out, lambda m: m.update(dtype="uint32"))
    with pytest.raises(DataError, match="meta.json is inconsistent .*dtype 'uint32'"):
        read_meta(out)
    _break(out, lambda m: m.update(dtype="uint16", sha256={"train": "abc", "val": m["sha256"]["val"]}))
    with pytest.raises(DataError, match="meta.json is inconsistent .*sha256 \\{'train': 'abc'"):
        read_meta(out)
    _break(out, lambda m: m.pop("tokens"))
    with pytest.raises(DataError, match="meta.json lacks field 'tokens'"):
        read_meta(out)
    _break(out, lambda m: m.update(format=1))
    with pytest.raises(DataError, match="has format 1; this attnlab reads format 2: prepare the shards again"):
        read_meta(out)
    (out / "meta.json").write_text("{not json")
    with pytest.raises(DataError, match="meta.json is not valid JSON"):
        read_meta(out)
    (out / "meta.json").unlink()
    with pytest.raises(DataError, match="has no meta.json"):
        read_meta(out)


def test_config_takes_the_shards_vocab_and_refuses_what_conflicts_with_them(tmp_path, hf_tokenizer):
    out = tmp_path / "shards"
    prepare(out, folder=_corpus(tmp_path / "corpus"), tokenizer=hf_tokenizer, val_fraction=0.3)
    vocab = load_tokenizer(hf_tokenizer).vocab_size
    assert load(None, ["model.context=8", f"data.shards={out}"]).model.vocab == vocab
    assert load(None, ["model.context=8", f"data.shards={out}", f"model.vocab={vocab + 7}"]).model.vocab == vocab + 7
    with pytest.raises(
        ConfigError,
        match=rf"model.vocab \({vocab - 1}\) is smaller than the vocabulary of the shards "
        rf"in {re.escape(str(out))} \({vocab}, .*allowed: model.vocab >= {vocab}",
    ):
        load(None, ["model.context=8", f"data.shards={out}", f"model.vocab={vocab - 1}"])
    with pytest.raises(ConfigError, match=r"data.shards: shard folder .*missing' does not exist"):
        load(None, ["model.context=8", f"data.shards={tmp_path / 'missing'}"])
    for extra, named in (
        ("data.folder=/tmp", "data.folder"),
        ("data.patterns=['*.py']", "data.patterns"),
        (f"data.tokenizer={hf_tokenizer}", "data.tokenizer"),
    ):
        with pytest.raises(ConfigError, match=rf"{named} cannot be set with it .*allowed: data.shards without them"):
            load(None, ["model.context=8", f"data.shards={out}", extra])
    with pytest.raises(ConfigError, match="data.shards must be a folder written by `attnlab prepare`"):
        load(None, ["model.context=8", "data.shards=''"])


TINY = [
    "model.context=32",
    "model.layers=2",
    "model.heads=2",
    "model.d_model=32",
    "model.ffn_width=64",
    "train.batch=8",
    "train.warmup=2",
    "train.tensorboard=false",
    "train.steps=4",
    "train.eval_every=2",
    "train.checkpoint_every=2",
    "train.probes=false",
]


def test_a_run_on_shards_trains_and_resumes_as_on_text_without_tokenizing(tmp_path, monkeypatch):
    shards = tmp_path / "shards"
    prepare(shards, max_tokens=20_000)  # the standard library, as a run without data.folder reads it
    train(load(None, [*TINY, "data.max_tokens=20000"]), tmp_path / "text", progress=False)

    def never(*args, **kwargs):
        raise AssertionError("a run on shards tokenized or listed the corpus")

    for name in ("encode", "encode_bytes"):
        monkeypatch.setattr(ByteTokenizer, name, never)
    monkeypatch.setattr(trainer_module, "text_files", never)
    cfg = load(None, [*TINY, f"data.shards={shards}"])
    trainer = Trainer(cfg, tmp_path / "run", progress=False)
    saver = ckpt.save_checkpoint

    def failing(*args, **kwargs):  # the run dies at its second save, after step 4's update
        if ckpt.latest_checkpoint(tmp_path / "run") is not None:
            raise OSError(28, "No space left on device")
        return saver(*args, **kwargs)

    monkeypatch.setattr(ckpt, "save_checkpoint", failing)
    with pytest.raises(OSError, match="No space left"):
        trainer.run()
    monkeypatch.setattr(ckpt, "save_checkpoint", saver)
    resumed = Trainer(cfg, tmp_path / "run", resume=True, progress=False)
    assert resumed.step == 2 and isinstance(resumed.stream, ShardStream)
    resumed.run()
    a, b = (load_file(ckpt.latest_checkpoint(tmp_path / name) / "model.safetensors") for name in ("text", "run"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    losses = [
        [(r["kind"], r["step"], r.get("loss"), r.get("val_loss")) for r in read_metrics(tmp_path / name)]
        for name in ("text", "run")
    ]
    assert losses[0] == losses[1] and len(losses[0]) == 6  # 4 train and 2 eval records
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["data"]["shards"] == str(shards) and saved["data_stream"]["shards"] == str(shards)
    assert saved["data_stream"]["tokens"] == {"train": 20_000, "val": 20_000} and saved["model"]["vocab"] == 257


def test_a_resume_on_shards_prepared_again_with_other_content_is_refused(tmp_path):
    def write(folder, letter):  # the same files, sizes and token counts each time; other bytes
        folder.mkdir(exist_ok=True)
        for i in range(4):
            (folder / f"doc{i}.txt").write_text((letter * 7 + " ") * 300)
        return folder

    shards, run, corpus = tmp_path / "shards", tmp_path / "run", tmp_path / "corpus"
    prepare(shards, folder=write(corpus, "a"), val_fraction=0.25)
    cfg = load(None, [*TINY, "train.steps=2", f"data.shards={shards}"])
    train(cfg, run, progress=False)
    before = read_meta(shards)
    prepare(shards, folder=write(corpus, "b"), val_fraction=0.25, overwrite=True)
    after = read_meta(shards)
    assert after["tokens"] == before["tokens"] and after["sha256"] != before["sha256"]
    with pytest.raises(
        ckpt.CheckpointError,
        match=r"training data differs from the checkpoint's in 2 field\(s\):\n"
        r"  sha256.train: saved '[0-9a-f]{64}', current '[0-9a-f]{64}'\n"
        r"  sha256.val: saved",
    ):
        Trainer(cfg, run, resume=True, progress=False)
    prepare(shards, folder=write(corpus, "a"), val_fraction=0.25, overwrite=True)
    assert Trainer(cfg, run, resume=True, progress=False).step == 2  # the same content again: resumable


META = {
    "format": shard_module.FORMAT,
    "dtype": "uint16",
    "tokenizer": {"name": "bytes", "vocab_size": 257, "eos_id": 256},
    "tokens": {"train": 200, "val": 100},
    "files": {"train": 1, "val": 1},
    "sha256": {"train": "0" * 64, "val": "0" * 64},
    "split": "by file",
    "corpus": {"folder": "corpus", "max_tokens": None, "val_fraction": 0.3},
}


@pytest.mark.parametrize(("label", "data"), hostile(META, "tokenizer.vocab_size", "tokens"))
def test_a_hostile_meta_json_is_one_line(tmp_path, label, data):
    (tmp_path / "meta.json").write_bytes(data)
    with pytest.raises(DataError) as caught:
        read_meta(tmp_path)
    one_line(caught.value, tmp_path / "meta.json")
