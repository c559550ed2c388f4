"""Run configs load from YAML and TOML with --set overrides, every bad field fails by name, value and what is
allowed, and hostile files (a key twice, aliases, tags, deep nesting) end in one line."""

from __future__ import annotations

import json

import pytest

from attnlab.model.config import ConfigError
from attnlab.readback import ReadBackError
from attnlab.train.config import RunConfig, apply_overrides, load, read_run_config, read_run_tables
from hostile_json import hostile, one_line

YAML = """
model: {context: 32, layers: 2, rowmap: [softmax, entmax_a1.5]}
data: {max_tokens: 1000, patterns: "*.txt"}
train: {steps: 10, betas: [0.9, 0.99]}
intervention: {upper_qk_lr: 0.25}
"""

TOML = """
[model]
context = 32
layers = 2
rowmap = ["softmax", "entmax_a1.5"]
[data]
max_tokens = 1000
patterns = ["*.txt"]
[train]
steps = 10
betas = [0.9, 0.99]
[intervention]
upper_qk_lr = 0.25
"""


def test_yaml_and_toml_give_the_same_config(tmp_path):
    (tmp_path / "a.yaml").write_text(YAML)
    (tmp_path / "a.toml").write_text(TOML)
    a, b = load(tmp_path / "a.yaml"), load(tmp_path / "a.toml")
    assert a == b
    assert a.train.betas == (0.9, 0.99) and a.data.patterns == ("*.txt",) and a.intervention.active
    assert RunConfig.from_dict(a.to_dict()) == a


def test_overrides_are_typed_and_create_tables(tmp_path):
    (tmp_path / "a.yaml").write_text(YAML)
    cfg = load(
        tmp_path / "a.yaml",
        [
            "train.lr=3e-4",
            "train.precision=bf16",
            "model.rowmap=[relu_p4_b1, softmax]",
            "intervention.release=fixed",
            "data.folder=/tmp",
        ],
    )
    assert cfg.train.lr == 3e-4 and cfg.train.precision == "bf16" and cfg.model.rowmap == ("relu_p4_b1", "softmax")
    assert cfg.intervention.release == "fixed" and cfg.data.folder == "/tmp"
    assert load(None, ["model.context=8"]).model.context == 8


def test_vocab_comes_from_the_tokenizer_or_is_checked_against_it():
    assert load(None, ["model.context=8"]).model.vocab == 257
    assert load(None, ["model.context=8", "model.vocab=320"]).model.vocab == 320
    assert load(None, ["model.context=8", "model.inputs=vectors"]).model.vocab is None
    assert load(None, ["model.context=8", "model.vocab=100"]).model.vocab == 100  # the trainer checks it
    with pytest.raises(ConfigError, match=r"data.tokenizer: .*'bytes'"):
        load(None, ["model.context=8", "data.tokenizer=/no/such/tokenizer"])


@pytest.mark.parametrize(
    "overrides, match",
    [
        (["train.steps=0"], r"train.steps must be an int >= 1, got 0"),
        (["train.lr=-1"], r"train.lr must be a finite number in \(0, inf\], got -1"),
        (["train.min_lr=1"], r"train.min_lr must be a finite number in \[0, 0.003\]"),
        (["train.precision=fp16"], r"train.precision must be one of fp32, bf16, got 'fp16'"),
        (["train.batch=10", "train.accum=4"], r"train.batch \(10\) must be a multiple of train.accum \(4\)"),
        (["train.betas=[0.9]"], r"train.betas must be two numbers"),
        (["train.stepz=3"], r"unknown train field\(s\) \['stepz'\]; known: "),
        (["intervention.release=late"], r"intervention.release must be one of rule, fixed, never"),
        (["intervention.forced=0.01"], r"intervention.forced \(0.01\) must be >= intervention.earliest"),
        (["intervention.h0=2"], r"intervention.h0 must be a finite number in \[0, 1\]"),
        (["data.val_fraction=0.9"], r"data.val_fraction must be a finite number in \(0, 0.5\]"),
        (["data.patterns=[]"], r"data.patterns must be a list of file-name globs"),
        (["model.positions=sinusoid"], r"model.positions must be one of none, learned, rope, alibi, nape"),
        (["optim.lr=1"], r"unknown table\(s\) \['optim'\]"),
    ],
)
def test_bad_fields_are_named(overrides, match):
    with pytest.raises(ConfigError, match=match):
        load(None, ["model.context=8", *overrides])


def test_bad_files_and_assignments(tmp_path):
    (tmp_path / "bad.yaml").write_text("model: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load(tmp_path / "bad.yaml")
    (tmp_path / "a.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"must end in .yaml, .yml or .toml"):
        load(tmp_path / "a.json")
    with pytest.raises(ConfigError, match="no such config file"):
        load(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="expected section.key=value"):
        apply_overrides({}, ["steps=3"])
    with pytest.raises(ConfigError, match="the model table is required"):
        load(None, ["train.steps=3"])


@pytest.mark.parametrize(
    ("name", "text", "match"),
    [
        ("dup.yaml", "train:\n  steps: 1\n  steps: 2\n", "key 'steps' appears twice"),
        ("alias.yaml", "a: &x [softmax]\nmodel:\n  rowmap: *x\n", r"aliases \(\*name\) are not allowed"),
        (
            "laughs.yaml",
            "a: &a [lol, lol]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nmodel: {rowmap: [*b, *b, *b]}\n",
            "aliases",
        ),
        ("deep.yaml", "model: " + "[" * 100_000 + "]" * 100_000 + "\n", "nested deeper than 32 levels"),
        ("tag.yaml", "model: !!python/object:os.system {}\n", "could not determine a constructor"),
        ("deep.toml", "a = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
        ("keys.yaml", "model: {context: 8}\ntrain:\n  1: 2\n  x: 3\n", "key 1 is not a name"),
        ("steps.yaml", f"model: {{context: 8}}\ntrain:\n  steps: {2**64}\n", r"outside \[-2\^63, 2\^63\)"),
    ],
)
def test_hostile_config_files_end_in_one_line(tmp_path, name, text, match):
    """A key given twice, aliases (a "billion laughs" among them), tags and 100,000-deep values are refused in one
    line before any value is used."""
    (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError, match=match) as caught:
        load(tmp_path / name)
    assert "\n" not in str(caught.value)


def test_set_values_are_read_as_strictly():
    with pytest.raises(ConfigError, match="aliases"):
        load(None, ["model.rowmap=*x"])


RUN = load(None, ["model.context=8", "model.vocab=10"]).to_dict()


@pytest.mark.parametrize(("label", "data"), hostile(RUN, "train.steps", "model.vocab"))
def test_a_hostile_run_config_json_is_one_line(tmp_path, label, data):
    """A run's config.json read back (release-replay's ``read_run_config``; the temperature study's vocabulary,
    ``read_run_tables`` with model.vocab present) is one line naming the file, the key and what is allowed."""
    path = tmp_path / "config.json"
    path.write_bytes(data)
    if label != "model.vocab missing":  # a run's config may leave the vocabulary to its tokenizer
        with pytest.raises(ReadBackError) as caught:
            read_run_config(path)
        one_line(caught.value, path)
    with pytest.raises(ReadBackError) as caught:
        read_run_tables(path, required=("model.vocab",))
    one_line(caught.value, path)


def test_a_run_config_json_reads_back_as_written(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({**RUN, "data_stream": {}, "world_size": 1}))
    assert read_run_config(tmp_path / "config.json") == RunConfig.from_dict(RUN)
    assert read_run_tables(tmp_path / "config.json", required=("model.vocab",))["model"]["vocab"] == 10
