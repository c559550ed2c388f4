"""``RunConfig``: a training run as validated dataclasses, from a YAML/TOML file plus ``--set`` overrides.

The file has four tables: ``model`` (``attnlab.model.ModelConfig``), ``data``, ``train`` and
``intervention`` (Zhu et al. 2026: the early upper-Q/K learning-rate multiplier, the entropy floor, and the
release rule both share). Unknown keys and bad values fail on load with a message that names the field,
the value and what is allowed.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from attnlab.errors import Error
from attnlab.model.config import ConfigError, ModelConfig
from attnlab.options import (
    INT_RANGE,
    MAX_DEPTH,
    MAX_YAML_BYTES,
    TOKENS_MAX,
    UPPER,
    AssignmentError,
    assignment,
    is_config_int,
    load_yaml,
    oversize,
)
from attnlab.readback import ReadBackError, check, read_object

PRECISIONS = ("fp32", "bf16")
RELEASES = ("rule", "fixed", "never")
# What the release rule compares with its threshold: the raw lower-copy score (Zhu et al. 2026 §2), or its
# excess over uniform attention's score on the same batch (which alone is 1 / (position + 1) per row).
RULE_SCORES = ("raw", "excess")
SEED_MAX = 2**63 - 1
# The range of each int field of the train table. The upper bounds are as ``options.UPPER`` bounds a flag (train.steps
# is lengthgen's --steps, and the step counts share its bound): far past any real run, so that a mistyped value is
# refused in one line naming the key and its range instead of training until it is killed.
COUNT_MAX = 2**20  # sequences per step or per evaluation
TRAIN_RANGES = {
    "steps": (1, UPPER["steps"]),
    "batch": (1, COUNT_MAX),
    "accum": (1, COUNT_MAX),
    "warmup": (0, UPPER["steps"]),
    "seed": (0, SEED_MAX),  # torch and numpy seed from a 64-bit integer: a larger seed would overflow inside them
    "eval_every": (1, UPPER["steps"]),
    "eval_batches": (1, COUNT_MAX),
    "checkpoint_every": (0, UPPER["steps"]),
    "keep": (1, UPPER["steps"]),
}
# The same for the model table, checked on its raw values before ``ModelConfig`` is built (which lists layers x heads
# row maps): far past any model trained here (GPT-3: 96 layers, 96 heads, 12,288 wide, an FFN 49,152 wide; vocabularies
# of 2^18 tokens). Each bounds a mistyped value, not memory: a product of values within them (d_model 2^16 with 1,024
# layers) can still exceed the accelerator's.
MODEL_UPPER: dict[str, float] = {
    "context": TOKENS_MAX,
    "block": TOKENS_MAX,
    "vocab": 2**24,
    "layers": 1_024,
    "heads": 1_024,
    "d_model": 2**16,
    "ffn_width": 2**18,
    "rope_scaling": UPPER["rope_scaling"],
}
TOKENIZER_HELP = "'bytes' or the path of a local Hugging Face tokenizer folder"


def _fail(section: str, name: str, value: Any, allowed: str) -> None:
    raise ConfigError(f"{section}.{name} must be {allowed}, got {value!r}")


def _check_int(section: str, name: str, value: Any, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        _fail(section, name, value, f"an int >= {low}" if high is None else f"an int in [{low}, {high}]")


def _check_number(
    section: str,
    name: str,
    value: Any,
    low: float,
    high: float = math.inf,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = (value > low if low_open else value >= low) and (value < high if high_open else value <= high)
    if not ok:
        lo, hi = ("(" if low_open else "["), (")" if high_open else "]")
        _fail(section, name, value, f"a finite number in {lo}{low:g}, {high:g}{hi}")


def _check_bool(section: str, name: str, value: Any) -> None:
    if not isinstance(value, bool):
        _fail(section, name, value, "true or false")


@dataclass(frozen=True)
class DataConfig:
    """folder: a folder of text files (None: the Python standard library's .py files found on this
    machine); patterns: file-name globs to read in it (None: *.txt, *.md, *.py); tokenizer: 'bytes' or a
    local Hugging Face tokenizer folder; val_fraction: the share of files held out for validation;
    max_tokens: a cap on tokens read per split (None: all); shards: a folder written by ``attnlab prepare``,
    read instead of tokenizing (it records its corpus and tokenizer, so folder, patterns and tokenizer stay
    unset; val_fraction left at its default takes the shards' split)."""

    folder: str | None = None
    patterns: tuple[str, ...] | None = None
    tokenizer: str = "bytes"
    val_fraction: float = 0.05
    max_tokens: int | None = None
    shards: str | None = None

    def __post_init__(self) -> None:
        if self.folder is not None and not (isinstance(self.folder, str) and self.folder):
            _fail("data", "folder", self.folder, "a folder path or unset")
        if self.patterns is not None:
            patterns = [self.patterns] if isinstance(self.patterns, str) else self.patterns
            if not (isinstance(patterns, Sequence) and patterns and all(isinstance(p, str) and p for p in patterns)):
                _fail("data", "patterns", self.patterns, "a list of file-name globs such as ['*.txt'] or unset")
            object.__setattr__(self, "patterns", tuple(patterns))
        if not (isinstance(self.tokenizer, str) and self.tokenizer):
            _fail("data", "tokenizer", self.tokenizer, TOKENIZER_HELP)
        _check_number("data", "val_fraction", self.val_fraction, 0.0, 0.5, low_open=True)
        if self.max_tokens is not None:
            _check_int("data", "max_tokens", self.max_tokens, 2)
        if self.shards is not None:
            if not (isinstance(self.shards, str) and self.shards):
                _fail("data", "shards", self.shards, "a folder written by `attnlab prepare`, or unset")
            given = [
                f"data.{name}"
                for name, unset in (("folder", None), ("patterns", None), ("tokenizer", "bytes"))
                if getattr(self, name) != unset
            ]
            if given:
                raise ConfigError(
                    f"data.shards is a corpus tokenized already, so {' and '.join(given)} cannot be "
                    "set with it (its meta.json records the corpus and tokenizer it was prepared "
                    "from); allowed: data.shards without them, or them without data.shards"
                )


@dataclass(frozen=True)
class TrainConfig:
    """steps; batch: sequences per optimizer step over all processes and micro-batches; accum: micro-
    batches per step; lr (peak), min_lr (the cosine floor), warmup (linear warmup steps); weight_decay on
    matrices and embeddings only; betas; clip: the gradient-norm bound (0 = off); precision fp32 or bf16
    (autocast; parameters and optimizer stay float32); seed; eval_every, eval_batches; probes: log the
    Zhu et al. 2026 probes at each evaluation; checkpoint_every (0 = only at the end) and keep (checkpoints
    kept); tensorboard: also write TensorBoard events when the package is installed. stop_at: end the run after
    this many steps (evaluated and saved there), keeping the ``steps``-long run's schedule (warmup, cosine decay,
    release window), so its steps are the full run's first ones (None: train all ``steps``)."""

    steps: int = 200
    batch: int = 16
    accum: int = 1
    lr: float = 3e-3
    min_lr: float = 3e-4
    warmup: int = 20
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    clip: float = 1.0
    precision: str = "fp32"
    seed: int = 0
    eval_every: int = 50
    eval_batches: int = 4
    probes: bool = True
    checkpoint_every: int = 100
    keep: int = 2
    tensorboard: bool = True
    stop_at: int | None = None

    def __post_init__(self) -> None:
        for name, (low, high) in TRAIN_RANGES.items():
            _check_int("train", name, getattr(self, name), low, high)
        stop = self.stop_at  # after the steps' check, so that the bound it names is a valid one
        if stop is not None and (isinstance(stop, bool) or not isinstance(stop, int) or not 1 <= stop <= self.steps):
            _fail("train", "stop_at", stop, f"unset or an int in [1, train.steps = {self.steps}]")
        if self.batch % self.accum:
            raise ConfigError(f"train.batch ({self.batch}) must be a multiple of train.accum ({self.accum})")
        _check_number("train", "lr", self.lr, 0.0, UPPER["lr"], low_open=True)  # --lr's bound
        _check_number("train", "min_lr", self.min_lr, 0.0, self.lr)
        _check_number("train", "weight_decay", self.weight_decay, 0.0)
        _check_number("train", "clip", self.clip, 0.0)
        betas = self.betas
        if not (isinstance(betas, Sequence) and len(betas) == 2):
            _fail("train", "betas", betas, "two numbers in [0, 1)")
        for b in betas:
            _check_number("train", "betas", b, 0.0, 1.0, high_open=True)
        object.__setattr__(self, "betas", tuple(float(b) for b in betas))
        if self.precision not in PRECISIONS:
            _fail("train", "precision", self.precision, f"one of {', '.join(PRECISIONS)}")
        _check_bool("train", "probes", self.probes)
        _check_bool("train", "tensorboard", self.tensorboard)


@dataclass(frozen=True)
class InterventionConfig:
    """Zhu et al. 2026 §2 and App. D, F, G. upper_qk_lr: the early learning-rate multiplier on the upper half's
    W_Q and W_K (1 = off; the seed's 0.25); entropy_floor: lambda of lambda * max(0, h0 - H_upper) (0 =
    off; the seed's 0.10 with h0 = 0.80). Both hold until release, then ramp to the plain run over
    ``ramp`` of the steps. release: rule (the lower-copy maturity rule: ``patience`` consecutive
    evaluations with lower-copy >= ``threshold``, not before ``earliest`` of the steps, forced at
    ``forced``), fixed (at ``release_at``) or never. score: what the rule compares with ``threshold``: raw
    (the seed's lower-copy score) or excess (the score minus uniform attention's on the same batch: at
    context 128 uniform rows alone score about 0.02, above the seed's 0.005, so a raw rule fires at its
    first chance whatever the model learned). count_early: whether evaluations before ``earliest`` count
    toward ``patience`` (the seed counts the ``patience`` evaluations from ``earliest`` on: false). score_every:
    the fraction of training between readings of the lower-copy score on the first evaluation batch's rows, up to
    ``forced``, which the rule then reads instead of the evaluations (0 = the evaluations; the seed's Table 8 releases
    at 4.01% with patience 3 from 3%, i.e. readings every 0.5%); a run without the intervention logs them too, so a
    control's lower-copy maturity is dated on the same grid."""

    upper_qk_lr: float = 1.0
    entropy_floor: float = 0.0
    h0: float = 0.80
    release: str = "rule"
    release_at: float = 0.03
    threshold: float = 0.005
    patience: int = 3
    earliest: float = 0.03
    forced: float = 0.12
    ramp: float = 0.01
    score: str = "raw"
    count_early: bool = False
    score_every: float = 0.0

    def __post_init__(self) -> None:
        _check_number("intervention", "upper_qk_lr", self.upper_qk_lr, 0.0)
        _check_number("intervention", "entropy_floor", self.entropy_floor, 0.0)
        _check_number("intervention", "h0", self.h0, 0.0, 1.0)
        if self.release not in RELEASES:
            _fail("intervention", "release", self.release, f"one of {', '.join(RELEASES)}")
        for name in ("release_at", "earliest", "forced", "ramp", "score_every"):
            _check_number("intervention", name, getattr(self, name), 0.0, 1.0)
        _check_number("intervention", "threshold", self.threshold, 0.0)
        _check_int("intervention", "patience", self.patience, 1)
        if self.score not in RULE_SCORES:
            _fail("intervention", "score", self.score, f"one of {', '.join(RULE_SCORES)}")
        if not isinstance(self.count_early, bool):
            _fail("intervention", "count_early", self.count_early, "true or false")
        if self.forced < self.earliest:
            raise ConfigError(f"intervention.forced ({self.forced}) must be >= intervention.earliest ({self.earliest})")

    @property
    def active(self) -> bool:
        return self.upper_qk_lr != 1.0 or self.entropy_floor > 0


SECTIONS = {"data": DataConfig, "train": TrainConfig, "intervention": InterventionConfig}


@dataclass(frozen=True)
class RunConfig:
    model: ModelConfig
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    intervention: InterventionConfig = field(default_factory=InterventionConfig)

    def __post_init__(self) -> None:
        # the upper half's W_Q and W_K train at lr x upper_qk_lr until release: bounded as --lr is, since torch's Adam
        # overflows (a RuntimeError) on a learning rate such as 1e300
        qk_lr = self.train.lr * self.intervention.upper_qk_lr
        if qk_lr > UPPER["lr"]:
            raise ConfigError(
                f"intervention.upper_qk_lr x train.lr (the upper half's Q/K learning rate) must be at most "
                f"{UPPER['lr']:g}, got {self.intervention.upper_qk_lr!r} x {self.train.lr!r} = {qk_lr:g}"
            )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model.to_dict()}
        for name in SECTIONS:
            values = asdict(getattr(self, name))
            out[name] = {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}
        return out

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> RunConfig:
        if not isinstance(values, Mapping):
            raise ConfigError(f"a run config must be a mapping of tables, got {type(values).__name__}")
        unknown = sorted(set(values) - {"model", *SECTIONS})
        if unknown:
            raise ConfigError(f"unknown table(s) {unknown}; known: model, {', '.join(SECTIONS)}")
        if "model" not in values:
            raise ConfigError("the model table is required (at least model.context)")
        parts = {}
        for name, kind in SECTIONS.items():
            table = values.get(name) or {}
            if not isinstance(table, Mapping):
                raise ConfigError(f"{name} must be a table of fields, got {table!r}")
            known = {f.name for f in fields(kind)}
            bad = sorted(set(table) - known)
            if bad:
                raise ConfigError(f"unknown {name} field(s) {bad}; known: {', '.join(sorted(known))}")
            parts[name] = kind(**_floats(kind, table))
        model = values["model"]
        if not isinstance(model, Mapping):
            raise ConfigError(f"model must be a table of fields, got {model!r}")
        model = _floats(ModelConfig, _with_vocab(model, parts["data"]))
        _check_model_upper(model)
        return cls(model=ModelConfig.from_dict(model), **parts)


def _check_model_upper(model: Mapping[str, Any]) -> None:
    """Refuse a number above its ``MODEL_UPPER`` bound in the raw model table (its type and lower bound are
    ``ModelConfig``'s to check)."""
    for name, high in MODEL_UPPER.items():
        value = model.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > high:
            raise ConfigError(f"model.{name} must be at most {int(high):,}, got {value!r}")


def _floats(kind: type, table: Mapping[str, Any]) -> dict[str, Any]:
    """Float fields given as strings such as ``3e-4``: YAML 1.1 reads an exponent without a dot as a
    string, and a user who wrote a number means a number."""
    out = dict(table)
    for f in fields(kind):
        value = out.get(f.name)
        if str(f.type).startswith("float") and isinstance(value, str):
            try:
                out[f.name] = float(value)
            except ValueError:
                pass
    return out


def _with_vocab(model: Mapping[str, Any], data: DataConfig) -> dict[str, Any]:
    """The model table with vocab taken from the tokenizer, or the shards, when left unset (the trainer checks
    a given vocab against the stream it trains on, which may be a synthetic task's rather than the text's;
    shards are checked here, since reading their meta.json costs nothing)."""
    model = dict(model)
    if model.get("inputs", "tokens") != "tokens":
        return model
    if data.shards is not None:
        return _with_shards_vocab(model, data.shards)
    if "vocab" in model:
        return model
    from attnlab.train.data import DataError, load_tokenizer

    try:
        model["vocab"] = load_tokenizer(data.tokenizer).vocab_size
    except DataError as exc:
        raise ConfigError(f"data.tokenizer: {exc}") from None
    return model


def _with_shards_vocab(model: dict[str, Any], shards: str) -> dict[str, Any]:
    from attnlab.train.data import DataError
    from attnlab.train.shards import read_meta

    try:
        tokenizer = read_meta(shards)["tokenizer"]
    except DataError as exc:
        raise ConfigError(f"data.shards: {exc}") from None
    vocab = model.setdefault("vocab", tokenizer["vocab_size"])
    if isinstance(vocab, int) and not isinstance(vocab, bool) and vocab < tokenizer["vocab_size"]:
        raise ConfigError(
            f"model.vocab ({vocab}) is smaller than the vocabulary of the shards in {shards} "
            f"({tokenizer['vocab_size']}, tokenizer {tokenizer['name']!r}); allowed: model.vocab >= "
            f"{tokenizer['vocab_size']}, or unset to take the shards'"
        )
    return model


def read_file(path: str | Path) -> dict[str, Any]:
    """The raw tables of a .yaml/.yml or .toml config file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (a config file is UTF-8 YAML or TOML)") from None
    if path.suffix not in (".yaml", ".yml", ".toml"):
        raise ConfigError(f"{path}: config files must end in .yaml, .yml or .toml")
    try:
        values = _load_toml(text) if path.suffix == ".toml" else load_yaml(text) or {}
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: _load_toml's ConfigError, or tomllib's TOMLDecodeError
        raise ConfigError(f"{path}: not valid {path.suffix[1:].upper()}: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise ConfigError(f"{path}: a value is nested too deeply to be a config") from None
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: a config file must hold tables (model, data, train, intervention)")
    return values


def _load_toml(text: str) -> Any:
    """``text`` as TOML, within the bounds ``options.load_yaml`` puts on YAML: at most ``MAX_YAML_BYTES``, nested at
    most ``MAX_DEPTH`` levels, integers in ``INT_RANGE``. Raises ConfigError (a bound) or tomllib's
    TOMLDecodeError."""
    if oversize(text):
        raise ConfigError(f"larger than {MAX_YAML_BYTES >> 20} MiB: not a config")
    if _toml_too_deep(text):
        raise ConfigError(
            f"a value nested deeper than {MAX_DEPTH} levels (counted on the text before it is read: open brackets "
            "and braces, the dots of keys and the depth of the last table header, so a legal file near the limit may "
            "be refused too)"
        )
    try:
        values = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        raise
    except ValueError as exc:  # int() refuses an integer of over 4,300 digits before tomllib sees it
        raise ConfigError(f"{str(exc).split(';')[0]}; a config's integers are in {INT_RANGE}") from None
    _check_toml_values(values)
    return values


# What the depth scan reads outside strings and comments; the strings it skips whole (TOML 1.0: a one-line string ends
# at its closing quote, a basic one's unless escaped, or at the line's end; a multi-line one at the first three quotes,
# which up to two more quotes after them belong to).
_TOML_MARKS = re.compile(r"""[\[\]{}.,"'#\n]""")
_TOML_STRINGS = {
    '"""': re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*(?:""""{0,2})?', re.S),
    "'''": re.compile(r"'''(?:[^']|'(?!''))*(?:''''{0,2})?"),
    '"': re.compile(r'"(?:[^"\\\n]|\\.)*"?'),
    "'": re.compile(r"'[^'\n]*'?"),
}


def _toml_too_deep(text: str) -> bool:
    """Whether TOML text may nest deeper than ``MAX_DEPTH``, by one linear pass before tomllib reads it (tomllib
    recurses once per bracket, and slows down on long dotted keys: 100,000 levels are a RecursionError or minutes).
    Conservative: it counts the document and the value being read as a level each, as ``_check_toml_values`` does, and
    adds each [ and { open, the dots of the key being read and of the keys it is in, and the depth of the last table
    header, so that it never counts fewer levels than the file has (and may count one or two more)."""
    opened: list[int] = []  # the dots counted when each open bracket or brace was opened
    carried = dots = base = 0  # sum(opened); the dots of the key being read; the last header's depth
    header = None  # while a table header is read: the deepest it went
    fresh = True  # nothing but blanks since the line began
    at = 0
    while mark := _TOML_MARKS.search(text, at):
        c, start = mark.group(), mark.start()
        fresh = fresh and not text[at:start].strip()
        at = start + 1
        if c == "\n":
            fresh = True
            if not opened:
                dots = 0
            continue
        if c == "#":
            at = text.find("\n", start)
            if at < 0:
                break
            continue
        if c in "\"'":
            quote = c * 3 if text.startswith(c * 3, start) else c
            at = _TOML_STRINGS[quote].match(text, start).end()
        elif c in "[{":
            if c == "[" and fresh and not opened:
                header, base = 0, 0
            opened.append(dots)
            carried, dots = carried + dots, 0
        elif c in "]}":
            if header is not None:
                header = max(header, len(opened) + carried + dots)
            if opened:
                dots = opened.pop()
                carried -= dots
            if header is not None and not opened:
                header, base, dots = None, header, 0
        elif c == ".":
            dots += 1
        else:  # ",": the next key or value
            dots = 0
        fresh = False
        if 2 + base + len(opened) + carried + dots > MAX_DEPTH:
            return True
    return False


def _check_toml_values(value: Any, depth: int = 1) -> None:
    """Refuse what ``options.load_yaml`` refuses in YAML: a value deeper than ``MAX_DEPTH`` (a scalar counted as a
    level, as YAML's nodes are) or an integer outside ``INT_RANGE``."""
    if depth > MAX_DEPTH:
        raise ConfigError(f"a value nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, (dict, list)):
        for item in value.values() if isinstance(value, dict) else value:
            _check_toml_values(item, depth + 1)
    elif isinstance(value, int) and not isinstance(value, bool) and not is_config_int(value):
        digits = len(str(abs(value)))
        shown = str(value) if digits <= 40 else f"of {digits:,} digits"
        raise ConfigError(f"integer {shown} is outside {INT_RANGE}, a config's integers")


def apply_overrides(values: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """``section.key=value`` assignments on raw tables (values as in ``assignment``)."""
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in values.items()}
    for item in overrides:
        try:
            key, value = assignment(item, "--set", "train.steps=100")
        except AssignmentError as exc:
            raise ConfigError(str(exc)) from None
        section, dot, name = key.partition(".")
        if not dot or not section or not name:
            raise ConfigError(f"--set {item!r}: expected section.key=value, e.g. train.steps=100")
        table = out.setdefault(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"--set {item!r}: {section} is not a table")
        table[name] = value
    return out


def load(path: str | Path | None, overrides: Sequence[str] = ()) -> RunConfig:
    """A validated run config from a file (or none: only ``--set``) plus overrides."""
    values = read_file(path) if path is not None else {}
    return RunConfig.from_dict(apply_overrides(values, overrides))


def read_run_tables(path: str | Path, *, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """The tables of a run's config.json, each checked against its dataclass (``readback.check``: the model table
    and the dotted keys of ``required`` present, every value of its field's type), so that a torn or hand-edited
    file ends in one line (a ReadBackError) naming it, the key and what is allowed. Keys no field has are left
    alone: an older run's config reads back."""
    tables = {k: v for k, v in read_object(path).items() if k in ("model", *SECTIONS)}
    return check(tables, RunConfig, path, required=required)


def read_run_config(path: str | Path) -> RunConfig:
    """A run's config.json as the ``RunConfig`` it was written from: ``read_run_tables`` with every table and
    train.steps present (the trainer writes them all), then built (a value the config's own rules refuse is a
    ReadBackError naming the file too)."""
    tables = read_run_tables(path, required=(*SECTIONS, "train.steps"))
    try:
        return RunConfig.from_dict(tables)
    except (Error, TypeError, ValueError) as exc:  # a value of the right type that the config's own rules refuse
        raise ReadBackError(f"{path}: {exc}") from None
