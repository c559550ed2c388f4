"""Training data is a pure function of (seed, step), rank slices tile the global batch, and splits are fixed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab.train.data import (
    Batches,
    ByteTokenizer,
    DataError,
    HFTokenizer,
    TextStream,
    file_hash,
    load_tokenizer,
    split_files,
    text_files,
)

T = 8
BYTES = ByteTokenizer()


def _folder(tmp_path, n=12, size=200):
    """``n`` small files of random letters (so every window's content is unique), two in a subfolder, plus
    files to ignore."""
    (tmp_path / "sub").mkdir()
    letters = np.random.default_rng(0).integers(97, 123, size=(n, size), dtype=np.uint8)
    for i in range(n):
        name = f"sub/doc{i:02d}.txt" if i < 2 else f"doc{i:02d}.md"
        (tmp_path / name).write_bytes(letters[i].tobytes())
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    (tmp_path / ".hidden.txt").write_text("never read")
    return tmp_path


def _stream(folder, **kw):
    return TextStream(text_files(folder), BYTES, context=T, **{"seed": 3, "val_fraction": 0.3, **kw})


def _flat(folder, files):
    """The reference flat array: file bytes in the given order with 256 between documents."""
    parts = []
    for i, rel in enumerate(files):
        parts += ([256] if i else []) + list((folder / rel).read_bytes())
    return np.array(parts)


def test_byte_round_trip_including_non_ascii():
    text = "héllo wörld ✓ 日本語 \n\t"
    ids = BYTES.encode(text)
    assert max(ids) < 256 and len(ids) == len(text.encode("utf-8"))
    assert BYTES.decode(ids) == text
    assert BYTES.decode(ids + [BYTES.eos_id] + ids) == text + BYTES.eos_text + text
    assert (BYTES.vocab_size, BYTES.eos_id) == (257, 256)
    assert BYTES.encode_bytes("é".encode()).tolist() == list("é".encode())


def test_files_skip_hidden_and_unmatched_and_are_sorted(tmp_path):
    corpus = text_files(_folder(tmp_path))
    assert list(corpus.files) == sorted(corpus.files) and len(corpus.files) == 12
    assert "sub/doc00.txt" in corpus.files and "image.png" not in corpus.files
    assert ".hidden.txt" not in corpus.files
    assert text_files(tmp_path, patterns="*.txt").files == ("sub/doc00.txt", "sub/doc01.txt")


def test_eos_sits_between_documents_and_flat_arrays_match_the_files(tmp_path):
    stream = _stream(_folder(tmp_path))
    for files, tokens in ((stream.train_files, stream.train_tokens), (stream.val_files, stream.val_tokens)):
        np.testing.assert_array_equal(tokens, _flat(tmp_path, files))
        assert (tokens == 256).sum() == len(files) - 1 and tokens[0] != 256 and tokens[-1] != 256


def test_split_is_deterministic_order_free_disjoint_and_complete(tmp_path):
    files = list(text_files(_folder(tmp_path)).files)
    train, val = split_files(files, 0.3)
    assert (train, val) == split_files(files[::-1], 0.3)
    assert not set(train) & set(val) and sorted(train + val) == sorted(files) and train and val
    assert all(file_hash(f) < 0.3 for f in val) or len(val) == 1
    # A fraction below every hash still gives validation one file: the smallest-hash one.
    tiny = min(file_hash(f) for f in files) / 2
    assert split_files(files, tiny)[1] == [min(files, key=file_hash)]
    assert split_files(files, 0.999999)[0] == [max(files, key=file_hash)]


def test_single_file_is_split_by_position(tmp_path):
    (tmp_path / "only.txt").write_text("x" * 100)
    stream = TextStream(text_files(tmp_path), BYTES, context=T, val_fraction=0.2)
    assert (stream.n_train_tokens, stream.n_val_tokens) == (80, 20)
    assert stream.describe()["split"] == "by position"


def test_train_batch_is_a_slice_at_the_documented_offsets(tmp_path):
    stream = _stream(_folder(tmp_path))
    flat = _flat(tmp_path, stream.train_files)
    inputs, targets = stream.train_batch(step=5, batch=6)
    starts = np.random.default_rng([3, 5]).integers(0, len(flat) - T, size=6)
    expected = torch.tensor(np.stack([flat[s : s + T + 1] for s in starts]))
    assert inputs.dtype == targets.dtype == torch.long and inputs.shape == (6, T)
    assert torch.equal(inputs, expected[:, :-1]) and torch.equal(targets, expected[:, 1:])
    assert torch.equal(inputs[:, 1:], targets[:, :-1])


def test_same_step_same_batch_and_steps_differ(tmp_path):
    stream = _stream(_folder(tmp_path))
    again = _stream(tmp_path)
    assert torch.equal(stream.train_batch(7, 4)[0], again.train_batch(7, 4)[0])
    assert not torch.equal(stream.train_batch(7, 4)[0], stream.train_batch(8, 4)[0])
    assert not torch.equal(stream.train_batch(7, 4)[0], _stream(tmp_path, seed=4).train_batch(7, 4)[0])


def test_rank_slices_tile_the_single_process_batch(tmp_path):
    stream = _stream(_folder(tmp_path))
    whole = stream.train_batch(2, 6)
    parts = [stream.train_batch(2, 6, rank=r, world=2) for r in range(2)]
    for i in range(2):
        assert torch.equal(torch.cat([p[i] for p in parts]), whole[i])
    with pytest.raises(DataError, match="not a positive multiple of world size 4"):
        stream.train_batch(2, 6, rank=0, world=4)
    with pytest.raises(DataError, match="rank 2 of world 2"):
        stream.train_batch(2, 6, rank=2, world=2)


def _val_starts(stream, batches):
    """Where each validation row lies in the flat validation array (contents are unique, see ``_folder``)."""
    flat, starts = stream.val_tokens, []
    for inputs, targets in batches:
        assert torch.equal(inputs[:, 1:], targets[:, :-1])
        for row in torch.cat([inputs, targets[:, -1:]], dim=1).numpy():
            starts += [s for s in range(len(flat) - T) if (flat[s : s + T + 1] == row).all()]
    return starts


def test_val_batches_are_fixed_disjoint_and_rank_sliced(tmp_path):
    stream = _stream(_folder(tmp_path))
    n_windows = stream.n_val_tokens // (T + 1)
    batches = stream.val_batches(2)
    assert len(batches) == n_windows // 2
    assert all(torch.equal(a[0], b[0]) for a, b in zip(batches, stream.val_batches(2)))
    starts = _val_starts(stream, batches)
    assert starts == [i * (T + 1) for i in range(len(batches) * 2)]
    capped = stream.val_batches(2, n_batches=2)
    capped_starts = _val_starts(stream, capped)
    assert len(capped) == 2 and len(set(capped_starts)) == 4 and set(capped_starts) <= set(starts)
    assert max(capped_starts) >= n_windows // 2 * (T + 1)  # spread over the split, not its first windows
    sliced = [stream.val_batches(2, n_batches=2, rank=r, world=2) for r in range(2)]
    assert torch.equal(torch.cat([sliced[0][1][0], sliced[1][1][0]]), capped[1][0])
    with pytest.raises(DataError, match="fewer than batch 1000"):
        stream.val_batches(1000)


def test_corpus_errors_name_the_problem(tmp_path):
    with pytest.raises(DataError, match="has no regular files matching"):
        text_files(tmp_path)
    (tmp_path / "notes.rst").write_text("not matched")
    with pytest.raises(DataError, match=r"\*\.txt, \*\.md, \*\.py"):
        text_files(tmp_path)
    with pytest.raises(DataError, match="does not exist"):
        text_files(tmp_path / "missing")
    (tmp_path / "a.txt").write_text("short")
    (tmp_path / "b.txt").write_text("tiny")
    with pytest.raises(DataError, match=r"split has \d+ tokens, fewer than context \+ 1 = 65"):
        TextStream(text_files(tmp_path), BYTES, context=64)
    assert issubclass(DataError, ValueError)


def test_describe_and_protocol(tmp_path):
    stream = _stream(_folder(tmp_path), max_tokens=50)
    info = stream.describe()
    assert isinstance(stream, Batches) and stream.vocab_size == 257
    assert info["tokens"] == {"train": 50, "val": 50} and info["tokenizer"] == "bytes"
    assert info["files"]["train"] + info["files"]["val"] == 12 and info["folder"] == str(tmp_path)


def test_stdlib_default_corpus():
    corpus = text_files(None)
    assert len(corpus.files) > 100 and "json/__init__.py" in corpus.files
    assert not any(part in ("site-packages", "test") for f in corpus.files for part in f.split("/"))
    stream = TextStream(corpus, BYTES, context=64, max_tokens=5000)
    assert stream.n_train_tokens == stream.n_val_tokens == 5000


def test_tokenizer_specs(tmp_path):
    with pytest.raises(DataError, match="neither 'bytes' nor an existing folder"):
        load_tokenizer(str(tmp_path / "no-such-tokenizer"))
    assert isinstance(load_tokenizer("bytes"), ByteTokenizer)


class _FakeHF(list):
    """Just the attributes HFTokenizer reads for its eos choice; its length stands for the vocabulary."""

    def __init__(self, eos, bos):
        super().__init__(range(10))
        self.eos_token_id, self.bos_token_id = eos, bos


def test_hf_eos_falls_back_to_bos_then_errors():
    assert HFTokenizer(_FakeHF(3, 0), "t").eos_id == 3
    assert HFTokenizer(_FakeHF(None, 0), "t").eos_id == 0
    with pytest.raises(DataError, match="neither an eos nor a bos token"):
        HFTokenizer(_FakeHF(None, None), "t")


def test_local_hf_tokenizer_by_path(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    docs = ["the cat sat on the mat", "def main(): return 0", "the dog ran"]
    raw = Tokenizer(models.BPE(unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    raw.train_from_iterator(
        docs * 5, trainers.BpeTrainer(vocab_size=80, special_tokens=["<unk>", "</s>"], show_progress=False)
    )
    PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="</s>", unk_token="<unk>").save_pretrained(tmp_path / "tok")
    tok = load_tokenizer(str(tmp_path / "tok"))
    assert tok.eos_id == 1 and tok.vocab_size == raw.get_vocab_size() and tok.name == str(tmp_path / "tok")
    assert tok.decode(tok.encode("the cat sat")) == "the cat sat"

    corpus_dir = tmp_path / "corpus"
    corpus_dir.mkdir()
    for i, doc in enumerate(docs):
        (corpus_dir / f"{i}.txt").write_text(" ".join([doc] * 4))
    stream = TextStream(text_files(corpus_dir), tok, context=4, val_fraction=0.3)
    expected = [tok.encode((corpus_dir / f).read_text()) for f in stream.train_files]
    assert stream.train_tokens.tolist() == sum(([tok.eos_id] + e for e in expected[1:]), expected[0])
    assert stream.train_batch(0, 2)[0].max() < tok.vocab_size
