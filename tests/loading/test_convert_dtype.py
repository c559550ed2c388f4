"""A GGUF file is converted in the dtype the run computes in, once per file and dtype, with a line saying which and
why: a float32 conversion is never served to a bfloat16 run nor the reverse, and an older attnlab's float32 folder
becomes the float32 entry instead of being converted again."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from attnlab.hooks import load_model
from attnlab.loading import convert, fetch
from attnlab.loading.common import LoadError

from .gguf_files import write_llama_gguf

pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf_dtype") / "tiny.gguf"
    write_llama_gguf(path)
    return path


def _entry(cache, path, dtype: str):
    return cache / "converted" / f"{fetch.sha256(path)}-{dtype}"


def _stored(folder) -> set[str]:
    """The dtypes of the tensors in a conversion's weight file, as its safetensors header names them."""
    from safetensors import safe_open

    with safe_open(folder / "model.safetensors", framework="pt") as f:
        return {f.get_slice(key).get_dtype() for key in f.keys()}  # noqa: SIM118 (a handle, not a dict)


def _no_conversion(*_):
    raise AssertionError("converted again")


def test_each_run_converts_into_the_dtype_it_computes_in_and_says_so(gguf, cache):
    said = []
    model, _ = load_model(gguf, dtype="bfloat16", tokenizer=False, log=said.append)
    half = _entry(cache, gguf, "bfloat16")
    assert model.dtype == torch.bfloat16 and _stored(half) == {"BF16"}
    assert json.loads((half / convert.SOURCE).read_text())["dtype"] == "bfloat16"
    assert any(
        line.startswith(f"converting {gguf.name} (")
        and f"to bfloat16 in {half}, the dtype this run computes in (--dtype bfloat16)" in line
        for line in said
    ), said
    said.clear()
    model, _ = load_model(gguf, device="cpu", dtype="auto", tokenizer=False, log=said.append)
    full = _entry(cache, gguf, "float32")
    assert model.dtype == torch.float32 and _stored(full) == {"F32"}
    assert any(f"to float32 in {full}, the dtype this run computes in (--dtype auto on the CPU)" in s for s in said)
    assert any(s.startswith(f"converted {gguf.name} in ") and "of float32 on disk" in s for s in said), said
    assert (half / "model.safetensors").stat().st_size < 0.6 * (full / "model.safetensors").stat().st_size
    assert sorted(p.name for p in (cache / "converted").iterdir()) == sorted([half.name, full.name])


def test_two_dtypes_never_share_an_entry(gguf, cache, monkeypatch):
    half = convert.converted(gguf, torch.bfloat16)
    full = convert.converted(gguf, torch.float32)
    monkeypatch.setattr(convert, "_convert", _no_conversion)
    said = []
    assert convert.converted(gguf, torch.bfloat16, log=said.append) == half != full
    assert convert.converted(gguf, torch.float32) == full
    assert said == [f"using the bfloat16 conversion of {gguf.name} cached in {half}, stamped by attnlab's checks"]
    with pytest.raises(AssertionError, match="converted again"):  # neither is served to a float16 run
        convert.converted(gguf, torch.float16)


def test_the_bfloat16_conversion_computes_what_the_float32_one_read_in_bfloat16_does(gguf, cache):
    """Writing the run's dtype changes no weight the run computes with: the cast happens once, at conversion, to
    the same values loading a float32 conversion in bfloat16 gives."""
    direct, tok = load_model(gguf, dtype="bfloat16")
    via, _ = load_model(convert.converted(gguf, torch.float32), dtype="bfloat16", tokenizer=False)
    ids = tok("The cat sat on the mat.", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert torch.equal(direct(ids).logits, via(ids).logits)


def test_an_entry_stamped_with_another_dtype_is_converted_anew(gguf, cache):
    full = convert.converted(gguf, torch.float32)
    half = _entry(cache, gguf, "bfloat16")
    shutil.copytree(full, half)  # float32 weights under the bfloat16 name, stamped float32
    assert convert.converted(gguf, torch.bfloat16) == half
    assert _stored(half) == {"BF16"} and json.loads((half / convert.SOURCE).read_text())["dtype"] == "bfloat16"


def test_an_older_attnlabs_float32_folder_becomes_the_float32_entry(gguf, cache, monkeypatch):
    """Before the dtype was in the key, attnlab converted to float32 under the file's sha256 alone, with a stamp
    naming no dtype: an upgrade moves that folder to the float32 entry rather than converting again, and never
    serves it to a bfloat16 run."""
    full = convert.converted(gguf, torch.float32)
    legacy = full.parent / fetch.sha256(gguf)
    full.rename(legacy)
    stamp = json.loads((legacy / convert.SOURCE).read_text())
    del stamp["dtype"]
    (legacy / convert.SOURCE).write_text(json.dumps(stamp))
    monkeypatch.setattr(convert, "_convert", _no_conversion)
    assert convert.converted(gguf, torch.float32) == full and not legacy.exists() and _stored(full) == {"F32"}
    with pytest.raises(AssertionError, match="converted again"):
        convert.converted(gguf, torch.bfloat16)


def test_an_unstamped_folder_under_the_old_name_is_left_as_it_is(gguf, cache):
    legacy = cache / "converted" / fetch.sha256(gguf)
    legacy.mkdir(parents=True)
    (legacy / "weights.txt").write_text("the user's")
    assert convert.converted(gguf, torch.float32) == _entry(cache, gguf, "float32")
    assert [p.name for p in legacy.iterdir()] == ["weights.txt"]


def test_a_dtype_a_checkpoint_cannot_hold_is_refused_in_one_line(gguf, cache):
    with pytest.raises(LoadError, match="converts to float32, bfloat16, float16, got torch.int8"):
        convert.converted(gguf, torch.int8)
    assert not (cache / "converted").exists()


def test_a_link_under_the_old_name_is_not_followed_nor_moved(gguf, cache, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / convert.SOURCE).write_text(json.dumps({"sha256": fetch.sha256(gguf)}))
    (elsewhere / "weights.txt").write_text("the user's")
    legacy = cache / "converted" / fetch.sha256(gguf)
    legacy.parent.mkdir(parents=True)
    legacy.symlink_to(elsewhere, target_is_directory=True)
    assert convert.converted(gguf, torch.float32) == _entry(cache, gguf, "float32")
    assert legacy.is_symlink() and sorted(p.name for p in elsewhere.iterdir()) == [convert.SOURCE, "weights.txt"]


def test_a_link_at_an_entry_stamped_with_another_dtype_is_unlinked_and_its_target_kept(gguf, cache, tmp_path):
    full = convert.converted(gguf, torch.float32)
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(full, elsewhere)  # a user's folder that holds attnlab's float32 stamp
    (elsewhere / "notes.txt").write_text("the user's")
    before = sorted(p.name for p in elsewhere.iterdir())
    half = _entry(cache, gguf, "bfloat16")
    half.symlink_to(elsewhere, target_is_directory=True)
    assert convert.converted(gguf, torch.bfloat16) == half
    assert not half.is_symlink() and _stored(half) == {"BF16"}
    assert sorted(p.name for p in elsewhere.iterdir()) == before and _stored(elsewhere) == {"F32"}
