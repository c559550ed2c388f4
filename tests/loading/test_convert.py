"""A GGUF file loads as the model it was written from (bit-identical logits, same tokens), converted once per
file content; a missing extra, a corrupt file or an unfetched name fails with one clear line; a cached conversion
made before the checks is checked again before it is served."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest
import torch

from attnlab import cli
from attnlab.hooks import load_model
from attnlab.loading import convert, fetch
from attnlab.loading.common import LoadError
from attnlab.loading.load import resolve_checkpoint

from .gguf_files import N_HEAD, N_KV, write_llama, write_llama_gguf, write_qwen2_gguf

pytest.importorskip("gguf")

TEXT = "The cat sat on the mat. 3f2a9c4e QX7K2M9A"


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gguf")
    model, tok = write_llama_gguf(folder / "tiny.gguf")
    model.config._attn_implementation = "eager"
    return folder / "tiny.gguf", model, tok


def test_gguf_loads_bit_identical_with_its_tokenizer(written, cache):
    path, model, tok = written
    loaded, loaded_tok = load_model(path)
    ids = tok(TEXT, return_tensors="pt")["input_ids"]
    assert torch.equal(loaded_tok(TEXT, return_tensors="pt")["input_ids"], ids)
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model(ids).logits)
    assert "messages" in loaded_tok.chat_template
    assert loaded.config._attn_implementation == "eager"


@pytest.fixture(scope="module")
def written_qwen2(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gguf_qwen2")
    model, tok = write_qwen2_gguf(folder / "qwen2.gguf")
    model.config._attn_implementation = "eager"
    return folder / "qwen2.gguf", model, tok


def test_qwen2_gguf_loads_bit_identical_with_its_biases_heads_and_tied_output(written_qwen2, cache):
    path, model, tok = written_qwen2
    loaded, loaded_tok = load_model(path)
    ids = tok(TEXT, return_tensors="pt")["input_ids"]
    assert torch.equal(loaded_tok(TEXT, return_tensors="pt")["input_ids"], ids)  # digits split one by one, as Qwen2's
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model(ids).logits)
    config = loaded.config
    assert config.model_type == "qwen2" and config._attn_implementation == "eager"
    assert (config.num_attention_heads, config.num_key_value_heads) == (N_HEAD, N_KV)
    assert config.rope_parameters["rope_theta"] == model.config.rope_parameters["rope_theta"] == 1e6
    assert config.tie_word_embeddings and loaded.lm_head.weight is loaded.model.embed_tokens.weight
    # Qwen2's config has no bias switch (transformers always builds QKV biases): the loaded values are the check
    for theirs, ours in zip(loaded.model.layers, model.model.layers, strict=True):
        for name in ("q_proj", "k_proj", "v_proj"):
            bias = getattr(theirs.self_attn, name).bias
            assert bias.abs().max() > 0 and torch.equal(bias, getattr(ours.self_attn, name).bias)


def test_conversion_draws_no_bar_of_transformers(written, cache, capfd):
    resolve_checkpoint(written[0])
    err = capfd.readouterr().err
    assert "de-quantizing" not in err and "\r" not in err


def test_conversion_is_cached_by_content(written, cache, tmp_path, monkeypatch):
    path = written[0]
    first = resolve_checkpoint(path, dtype=torch.float32)
    assert first.parent == cache / "converted" and first.name == f"{convert.fetch.sha256(path)}-float32"

    def no_conversion(*_):
        raise AssertionError("converted again")

    monkeypatch.setattr(convert, "_convert", no_conversion)
    assert resolve_checkpoint(path, dtype=torch.float32) == first
    assert resolve_checkpoint(path.parent, dtype=torch.float32) == first  # a folder holding one .gguf, no config.json
    copy = tmp_path / "edited.gguf"
    copy.write_bytes(path.read_bytes() + b"\0" * 32)  # other bytes, other cache entry
    with pytest.raises(AssertionError, match="converted again"):
        resolve_checkpoint(copy, dtype=torch.float32)


def test_a_conversion_that_lands_second_serves_the_first_ones_folder(written, cache, monkeypatch):
    """Two processes converting one file at once (two runs, two test workers): the one that finishes second finds
    the first one's complete folder in place, serves it, and leaves no stage folder behind."""
    path = written[0]
    real = convert._convert

    def raced(source, stage, *rest):
        real(source, stage, *rest)
        rival = convert.io.temp_dir(stage.parent, ".rival-")
        real(source, rival, *rest)
        (rival / convert.SOURCE).write_text(json.dumps({"rival": True}))
        rival.rename(stage.parent / f"{convert.fetch.sha256(source)}-float32")

    monkeypatch.setattr(convert, "_convert", raced)
    out = resolve_checkpoint(path, dtype=torch.float32)
    assert json.loads((out / convert.SOURCE).read_text()) == {"rival": True}
    assert [p.name for p in out.parent.iterdir()] == [out.name]


@pytest.mark.parametrize("kind", ["folder", "link"])
def test_a_cache_entry_attnlab_did_not_write_is_refused_and_left_as_it_is(written, cache, tmp_path, kind):
    """A folder (or a link) at the conversion's cache path without attnlab's stamp is not attnlab's: the load stops
    in one line naming it, and it, what it holds, what a link names and a file beside it stay as they were."""
    path = written[0]
    converted_dir = cache / "converted"
    converted_dir.mkdir(parents=True)
    beside = converted_dir / "notes.txt"
    beside.write_text("the user's")
    target = converted_dir / f"{convert.fetch.sha256(path)}-float32"
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "weights.txt").write_text("the user's")
    if kind == "folder":
        target.mkdir()
        (target / "weights.txt").write_text("the user's")
    else:
        target.symlink_to(mine, target_is_directory=True)
    with pytest.raises(LoadError, match=f"{target} is in attnlab's cache but holds no {convert.SOURCE}"):
        resolve_checkpoint(path, dtype=torch.float32)
    assert beside.read_text() == "the user's" and (target / "weights.txt").read_text() == "the user's"
    assert (mine / "weights.txt").read_text() == "the user's" and target.is_symlink() == (kind == "link")
    assert sorted(p.name for p in converted_dir.iterdir()) == sorted(["notes.txt", target.name])


def test_bfloat16_dtype(written, cache):
    loaded, _ = load_model(written[0], dtype="bfloat16", tokenizer=False)
    assert loaded.dtype == torch.bfloat16


def test_missing_extra_names_it(written, cache, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name, *a))
    with pytest.raises(LoadError, match=r"pip install 'attnlab\[gguf\]'"):
        resolve_checkpoint(written[0])


@pytest.mark.parametrize(
    "content, message",
    [
        (b"PK\x03\x04 not a gguf at all", "is not a GGUF file"),
        (b"GGUF\x03\x00\x00\x00" + b"\xff" * 40, "is not a complete GGUF file"),
    ],
)
def test_corrupt_gguf_is_one_line(tmp_path, cache, capsys, content, message):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(content)
    with pytest.raises(LoadError, match=message):
        resolve_checkpoint(bad)
    code = cli.main(["audit", "--model", str(bad), "--prompts", "2", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "out").exists()
    assert not list((cache / "converted").glob("*"))  # no half-converted folder


@pytest.mark.parametrize("keep", [0.02, 0.5, 0.999])
def test_a_gguf_cut_short_is_named_before_any_conversion(written, tmp_path, cache, keep):
    """A download or copy cut short (in the tensor table, in the data, one byte from the end) is refused by its
    extents, never converted."""
    data = written[0].read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: len(data) - 1] if keep > 0.99 else data[: int(len(data) * keep)])
    with pytest.raises(LoadError, match=r"(not a complete GGUF file|is cut short).*fetch or copy it again"):
        resolve_checkpoint(cut)
    assert not (cache / "converted").exists() or not list((cache / "converted").glob("*"))


def test_folder_with_several_gguf_files_asks_for_one(tmp_path, cache):
    for name in ("a.gguf", "b.gguf"):
        (tmp_path / name).write_bytes(b"GGUF")
    with pytest.raises(LoadError, match="holds 2 .gguf files"):
        resolve_checkpoint(tmp_path)


def test_unfetched_name_says_how_to_fetch(cache):
    with pytest.raises(LoadError, match="attnlab fetch smollm2"):
        resolve_checkpoint("smollm2")
    with pytest.raises(LoadError, match="neither a path nor a known model name"):
        resolve_checkpoint("no-such-model")


def test_a_cached_folder_from_before_the_checks_is_checked_again_then_stamped(written, cache):
    path, _, _ = written
    out = convert.converted(path)
    weights = out / "model.safetensors"
    stamped = json.loads((out / convert.SOURCE).read_text())
    assert stamped["checks"] == convert.CHECKS
    del stamped["checks"]  # as an older attnlab wrote it
    (out / convert.SOURCE).write_text(json.dumps(stamped))
    before = weights.stat().st_mtime_ns
    assert convert.converted(path) == out
    assert json.loads((out / convert.SOURCE).read_text())["checks"] == convert.CHECKS
    assert weights.stat().st_mtime_ns == before  # checked against its file, not converted again


def test_a_cached_folder_of_a_file_that_fails_the_checks_is_dropped(written, cache, tmp_path):
    path, model, tok = written
    good = convert.converted(path)
    bad = write_llama(
        tmp_path / "bad.gguf", model, tok, tensors=lambda a: {k: v for k, v in a.items() if "blk.1." not in k}
    )
    # an older attnlab converted it, filling the missing block at random, and cached the result unstamped
    out = good.parent / f"{fetch.digest(bad)}-float32"
    shutil.copytree(good, out)
    (out / convert.SOURCE).write_text(json.dumps({"gguf": str(bad), "sha256": fetch.digest(bad)}))
    with pytest.raises(LoadError, match="bad.gguf"):
        convert.converted(bad)
    assert not out.exists()
    assert (good / "model.safetensors").is_file() and convert.converted(path) == good  # the folder beside it stays
