"""A Hub id (org/name[@rev]) loads its snapshot from the local Hugging Face cache, never the network; else one line."""

from __future__ import annotations

import json
import os
import shutil
import socket

import pytest
import torch

from attnlab import cli
from attnlab.hooks import load_model, provenance
from attnlab.loading.load import LoadError, check_model, hub_cache, resolve_checkpoint
from checkpoints import save_checkpoint

COMMIT = "0123456789abcdef0123456789abcdef01234567"
TEXT = "the old cat sat on the mat"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return save_checkpoint(tmp_path_factory.mktemp("ckpt"))


def _cache_repo(cache, repo, source, *, commit=COMMIT, files=None):
    """``source``'s top-level files as huggingface_hub lays out a download: content-named blobs, a snapshot
    folder of symlinks to them, and refs/main holding the commit."""
    root = cache / f"models--{repo.replace('/', '--')}"
    snapshot = root / "snapshots" / commit
    (root / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True)
    for i, path in enumerate(sorted(p for p in source.iterdir() if p.is_file())):
        if files is not None and path.name not in files:
            continue
        blob = root / "blobs" / f"{commit[:8]}{i:04d}"
        shutil.copyfile(path, blob)
        (snapshot / path.name).symlink_to(os.path.relpath(blob, snapshot))
    (root / "refs").mkdir(exist_ok=True)
    (root / "refs" / "main").write_text(commit)
    return snapshot


@pytest.fixture
def hub(tmp_path, monkeypatch, checkpoint):
    """A Hugging Face cache in tmp_path holding org/name (the tiny checkpoint), HF_HUB_CACHE pointing at it,
    HF_HUB_OFFLINE set, and any network socket or name lookup failing the test."""
    cache = tmp_path / "hf-cache"
    snapshot = _cache_repo(cache, "org/name", checkpoint)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path / "attnlab-cache"))
    opened = []

    def refuse(what):
        def guard(*args, **kwargs):
            opened.append((what, args))
            raise OSError(f"network access in a test: {what}")

        return guard

    real_connect = socket.socket.connect

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            return refuse("connect")(address)
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    yield cache, snapshot
    assert not opened, opened


def _logits(model, tok):
    with torch.no_grad():
        return model(tok(TEXT, return_tensors="pt")["input_ids"]).logits


def test_a_cached_id_loads_as_the_checkpoint_by_path(hub, checkpoint):
    cache, snapshot = hub
    environ = dict(os.environ)
    model, tok = load_model("org/name")
    assert dict(os.environ) == environ  # nothing set beyond the call
    reference, _ = load_model(checkpoint)
    assert torch.equal(_logits(model, tok), _logits(reference, tok))
    assert resolve_checkpoint("org/name") == snapshot and check_model("org/name") == snapshot
    for spec in ("org/name@main", f"org/name@{COMMIT}"):
        assert resolve_checkpoint(spec) == snapshot
    record = provenance("org/name")
    assert record == {"model_path": str(snapshot.resolve()), "model_sha256": provenance(checkpoint)["model_sha256"]}


def test_the_cli_audits_a_cached_id_and_records_its_snapshot(hub, tmp_path, capsys):
    _, snapshot = hub
    out = tmp_path / "out"
    code = cli.main(
        [
            "audit",
            "--model",
            "org/name",
            "--prompts",
            "2",
            "--pad",
            "1",
            "--p",
            "2",
            "4",
            "--queries",
            "every:4",
            "--out",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr().err
    config = json.loads((out / "config.json").read_text())
    assert config["model"] == "org/name" and config["model_path"] == str(snapshot.resolve())
    assert len(config["model_sha256"]) == 64


@pytest.mark.parametrize(
    "spec, command",
    [
        ("org/missing", "hf download org/missing"),
        ("org/name@v9", "hf download org/name --revision v9"),
        ("org/name@" + "f" * 40, "hf download org/name --revision " + "f" * 40),
    ],
)
def test_an_id_not_in_the_cache_is_one_line_naming_cache_and_download(hub, tmp_path, capsys, spec, command):
    cache, _ = hub
    message = (
        f"model {spec!r} is neither a local path nor in the Hugging Face cache ({cache}); download it with: {command}"
    )
    with pytest.raises(LoadError) as caught:
        load_model(spec)
    assert str(caught.value) == message
    capsys.readouterr()
    code = cli.main(["audit", "--model", spec, "--prompts", "2", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and message in err[0], err
    assert "Traceback" not in err[0] and not (tmp_path / "out").exists()


def test_the_cache_is_found_as_huggingface_hub_finds_it(hub, tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hub_cache() == tmp_path / "home" / "hub"
    with pytest.raises(LoadError, match=f"nor in the Hugging Face cache \\({tmp_path / 'home' / 'hub'}\\)"):
        resolve_checkpoint("org/name")
    monkeypatch.delenv("HF_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub_cache() == tmp_path / "xdg" / "huggingface" / "hub"


def test_a_local_folder_named_like_an_id_comes_first(hub, tmp_path, monkeypatch, checkpoint):
    _, snapshot = hub
    work = tmp_path / "work"
    local = save_checkpoint(work / "org" / "name", seed=1)
    monkeypatch.chdir(work)
    assert resolve_checkpoint("org/name") == local.relative_to(work)
    model, tok = load_model("org/name")
    cached, _ = load_model(snapshot)
    own, _ = load_model(local)
    assert torch.equal(_logits(model, tok), _logits(own, tok))
    assert not torch.equal(_logits(model, tok), _logits(cached, tok))
    assert provenance("org/name")["model_path"] == str(local.resolve())


@pytest.mark.parametrize(
    "files, match",
    [
        ({"config.json", "tokenizer.json", "tokenizer_config.json"}, "has no weights"),
        ({"model.safetensors", "tokenizer.json"}, "has no config.json and no .gguf file"),
    ],
)
def test_a_cached_snapshot_without_weights_or_config_says_so(hub, checkpoint, files, match):
    cache, _ = hub
    snapshot = _cache_repo(cache, "org/partial", checkpoint, files=files)
    with pytest.raises(LoadError, match=match) as caught:
        load_model("org/partial")
    assert str(snapshot) in str(caught.value)


def test_strings_not_shaped_like_an_id_keep_the_path_error(hub):
    for spec in ("no-such-model", "a/b/c", "org/name.gguf", "./org/none"):
        with pytest.raises(LoadError, match="neither a path nor a known model name"):
            resolve_checkpoint(spec)


def test_resolving_ids_opens_no_socket_even_with_offline_mode_off(hub, monkeypatch):
    """The fixture's guard fails the test on any network access; here huggingface_hub's own offline switch is
    off too, so only attnlab's local_files_only keeps the calls local."""
    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    _, snapshot = hub
    assert resolve_checkpoint("org/name") == snapshot
    for spec in ("org/missing", "org/name@v9"):
        with pytest.raises(LoadError, match="is neither a local path nor in the Hugging Face cache"):
            resolve_checkpoint(spec)
    model, tok = load_model("org/name")
    assert model is not None and tok is not None


def test_a_snapshot_known_to_be_incomplete_says_so(hub):
    tree_cache = pytest.importorskip("huggingface_hub._tree_cache")
    cache, snapshot = hub
    entries = {
        name: tree_cache.TreeCacheEntry(size=1, blob_id="0" * 40)
        for name in ("config.json", "model-00002-of-00002.safetensors")
    }
    tree_cache.write_tree_cache(str(snapshot.parent.parent), COMMIT, entries)
    if tree_cache.read_tree_cache(str(snapshot.parent.parent), COMMIT) is None:
        pytest.skip("this huggingface_hub does not keep a tree listing in this form")
    with pytest.raises(
        LoadError,
        match=f"'org/name' is incomplete in the Hugging Face cache \\({cache}\\); "
        "download it with: hf download org/name$",
    ):
        resolve_checkpoint("org/name")
