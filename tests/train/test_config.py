"""Run configs load from YAML and TOML with --set overrides, every bad field fails by name, value and what is
allowed, and hostile files (a key twice, aliases, tags, deep nesting) end in one line."""

from __future__ import annotations

import json

import pytest

from attnlab.model.config import ConfigError
from attnlab.readback import ReadBackError
from attnlab.train.config import RunConfig, apply_overrides, load, read_file, read_run_config, read_run_tables
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
        (["train.steps=0"], r"train.steps must be an int in \[1, 10000000\], got 0"),
        (["train.lr=-1"], r"train.lr must be a finite number in \(0, 10\], got -1"),
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
        # upper bounds: a flag's (options.UPPER) where one is, else far past any real run or model
        (["train.lr=1e300"], r"train.lr must be a finite number in \(0, 10\], got 1e\+300"),
        (["train.lr=11"], r"train.lr must be a finite number in \(0, 10\], got 11"),
        (["train.steps=1000000000000"], r"train.steps must be an int in \[1, 10000000\], got 1000000000000"),
        (["train.warmup=10000001"], r"train.warmup must be an int in \[0, 10000000\]"),
        (["train.eval_every=10000001"], r"train.eval_every must be an int in \[1, 10000000\]"),
        (["train.checkpoint_every=10000001"], r"train.checkpoint_every must be an int in \[0, 10000000\]"),
        (["train.keep=10000001"], r"train.keep must be an int in \[1, 10000000\]"),
        (["train.batch=1048577"], r"train.batch must be an int in \[1, 1048576\]"),
        (["train.eval_batches=1048577"], r"train.eval_batches must be an int in \[1, 1048576\]"),
        (
            ["intervention.upper_qk_lr=1e300"],
            r"intervention.upper_qk_lr x train.lr \(the upper half's Q/K learning rate\) must be at most 10, "
            r"got 1e\+300 x 0.003",
        ),
        (["train.lr=5", "intervention.upper_qk_lr=3"], r"must be at most 10, got 3 x 5 = 15"),
        (["model.d_model=1000000000"], r"model.d_model must be at most 65,536, got 1000000000"),
        (["model.layers=1000000000000"], r"model.layers must be at most 1,024, got 1000000000000"),
        (["model.heads=1025"], r"model.heads must be at most 1,024, got 1025"),
        (["model.ffn_width=262145"], r"model.ffn_width must be at most 262,144"),
        (["model.vocab=16777217"], r"model.vocab must be at most 16,777,216"),
        (["model.context=1048577"], r"model.context must be at most 1,048,576"),
        (["model.block=1048577"], r"model.block must be at most 1,048,576"),
        (["model.rope_scaling=1e5"], r"model.rope_scaling must be at most 1,024, got 100000.0"),
    ],
)
def test_bad_fields_are_named(overrides, match):
    with pytest.raises(ConfigError, match=match):
        load(None, ["model.context=8", *overrides])


def test_the_upper_bounds_are_taken():
    """A value at each upper bound is a config (the bound is the largest value allowed, not the first refused)."""
    cfg = load(
        None,
        [
            "model.context=1048576",
            "model.d_model=65536",
            "model.heads=1024",
            "model.layers=1024",
            "model.rope_scaling=1024",
            "train.steps=10000000",
            "train.lr=10",
            "train.batch=1048576",
            "intervention.upper_qk_lr=1",
        ],
    )
    assert (cfg.model.d_model, cfg.train.steps, cfg.train.lr) == (65536, 10_000_000, 10)
    assert (
        load(None, ["model.context=8", "train.lr=0.01", "intervention.upper_qk_lr=1000"]).intervention.upper_qk_lr
        == 1000
    )


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
        ("deep.toml", "a = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested deeper than 32 levels"),
        ("table.toml", "[model]\ncontext = 8\n[model.rowmap." + ".a" * 100_000 + "]\nb = 1\n", "deeper than 32 levels"),
        ("dotted.toml", ".".join(["a"] * 100_000) + " = 1\n", "nested deeper than 32 levels"),
        ("inline.toml", "a = " + "{a = " * 100_000 + "1" + "}" * 100_000 + "\n", "nested deeper than 32 levels"),
        ("33.toml", "model = {context = 8}\na = " + "[" * 31 + "1" + "]" * 31 + "\n", "nested deeper than 32 levels"),
        ("digits.toml", "[model]\ncontext = " + "9" * 5000 + "\n", r"5000 digits; a config's integers are in \[-2\^63"),
        (
            "steps.toml",
            f"model = {{context = 8}}\n[train]\nsteps = {2**64}\n",
            r"integer 18446744073709551616 is outside",
        ),
        ("small.toml", f"model = {{context = 8}}\nx = [{-(2**63) - 1}]\n", r"outside \[-2\^63, 2\^63\)"),
        ("big.toml", "model = {context = 8}\n#" + "x" * (1 << 20) + "\n", "not valid TOML: larger than 1 MiB"),
        ("bad.toml", "model = {context = \n", "not valid TOML: .*line 1"),
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


@pytest.mark.parametrize(
    "text",
    [
        "a = " + "[" * 30 + "1" + "]" * 30,  # 32 levels: the document, 30 lists and the 1
        "[" + ".".join("a" * 29) + "]\nb = 1",
        ".".join("a" * 30) + " = 1",
        'a = """[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\"""[[[""""\nb = "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\""',
        "a = '''[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[['''''  # [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\nb = '[[[[[[[[[['",
        'a = ["x.y.z", "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.a.b.c.d.e.f.g.h", 1.5, 2.5, 1979-05-27]',
    ],
)
def test_toml_within_the_bounds_is_read(tmp_path, text):
    """The depth scan before tomllib counts no bracket or dot inside a string or a comment, and a value nested to the
    limit is read."""
    (tmp_path / "a.toml").write_text(text)
    assert read_file(tmp_path / "a.toml")["a"]


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
