"""What every command on a Hugging Face checkpoint shares: loading, prompts, b_auto and staged outputs.

A run writes into a hidden staging folder inside ``--out`` and moves its files into place only when it
finishes, so a failed run (bad input found late, Ctrl-C, a crash) leaves no partial file behind and
keeps the previous run's files intact.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from attnlab import hooks, io, options, progress, tasks
from attnlab.devices import Placement, model_device
from attnlab.errors import ArgumentError, ArgumentTypeError, Error
from attnlab.options import MODEL_HELP, option
from attnlab.readback import ReadBackError, parse_object
from attnlab.site import DEFAULT_BLOCK

CALIBRATION_TOKENS = 1024  # Polynomial Concentration App. B: a held-out 1024-token generic-text input
STAGING = ".staging-"  # a run's hidden staging folder in --out, named with its pid
CALIBRATION_SEED = 20240601  # any fixed seed; the generic text's stream is separate from every suite's


class RunError(Error, ValueError):
    """Bad input to a command, found before or while running; the message says what to do."""


# The Python API's arguments whose bound is a command option's of another name (``options.UPPER``): one set of
# bounds for both, so that ``audit(..., length=10**7)`` is refused as ``--length 10000000`` is, before any work.
API_BOUND = {"n_prompts": "prompts", "n_documents": "docs", "tokens": "length", "heads_prompts": "prompts"}


def check_count(name: str, value, low: int = 1, *, api: bool = False) -> int:
    """An int >= ``low``, and at most the bound its command option has (``options.UPPER``). A command's option
    (``api=False``): a RunError naming the flag as the user typed it (``--n-boot``); an argument of the Python
    API: a TypeError (not an int) or ValueError (out of range) naming the argument as Python spells it
    (``n_boot``)."""
    high = options.UPPER.get(API_BOUND.get(name, name))
    if not api:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise RunError(f"--{name.replace('_', '-')} must be an int >= {low}, got {value!r}")
        if high is not None and value > high:
            raise RunError(f"--{name.replace('_', '-')} must be at most {int(high):,}, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ArgumentTypeError(f"{name} takes an int >= {low}, got {type(value).__name__} {value!r}")
    if value < low:
        raise ArgumentError(f"{name} takes an int >= {low}, got {value!r}")
    if high is not None and value > high:
        raise ArgumentError(f"{name} takes an int of at most {int(high):,} (the command's bound), got {value!r}")
    return int(value)


def check_model(model) -> None:
    """A transformers causal LM that the hooks can route (``hooks.UnsupportedModel``, a TypeError, otherwise)."""
    if not isinstance(model, nn.Module):
        raise ArgumentTypeError(
            f"model takes a transformers causal LM (e.g. LlamaForCausalLM), got {type(model).__name__}"
        )
    hooks.num_heads(model)


def check_tokenizer(tokenizer) -> None:
    if not callable(tokenizer) or not hasattr(tokenizer, "decode"):
        raise ArgumentTypeError(f"tokenizer takes the model's Hugging Face tokenizer, got {type(tokenizer).__name__}")


@contextlib.contextmanager
def evaluating(model: nn.Module) -> Iterator[None]:
    """The model in eval mode (no dropout) while the context is open; each module's mode is restored after."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training


def fits_context(model, longest: int, name: str) -> None:
    if over := overrun(model, longest):
        raise ArgumentError(f"{name} {over}; pass shorter ones")


def check_ids(ids, name: str, model) -> list[int]:
    """A non-empty list of token ids inside the model's vocabulary."""
    if isinstance(ids, torch.Tensor | np.ndarray):
        ids = ids.tolist()
    if isinstance(ids, str) or not isinstance(ids, Sequence) or not ids:
        raise ArgumentTypeError(f"{name} takes a text or a non-empty list of token ids, got {type(ids).__name__}")
    if not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in ids):
        raise ArgumentTypeError(f"{name} takes token ids as ints")
    vocab = getattr(model.config, "vocab_size", None)
    if min(ids) < 0 or (vocab is not None and max(ids) >= vocab):
        raise ArgumentError(f"{name} holds token ids outside [0, {vocab}), the model's vocabulary")
    return [int(t) for t in ids]


def stored_b_auto(text: str) -> float:
    """--b-auto as typed: a finite number, or a run folder or config.json holding the b_auto it calibrated."""
    try:
        return options.finite(text)
    except argparse.ArgumentTypeError:
        if not Path(text).exists():
            raise
    path = Path(text) / "config.json" if Path(text).is_dir() else Path(text)
    try:
        value = parse_object(path.read_bytes(), "it").get("b_auto")
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{path} is not a run's config.json: {exc.strerror or exc}") from None
    except ReadBackError as exc:  # "it is not valid JSON (...); allowed: ..."
        raise argparse.ArgumentTypeError(f"{path} is not a run's config.json: {exc}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{path} holds no calibrated b_auto (got {value!r})")
    return float(value)


@dataclass(frozen=True, kw_only=True)
class CheckpointRun(Placement):
    """What every command on a checkpoint takes."""

    model: str = option(help=f"{MODEL_HELP}, with its tokenizer", metavar="MODEL")
    seed: int = option(0, "prompt seed", metavar="N", type=options.seed)
    bos: bool = option(
        False,
        "start every prompt with the tokenizer's BOS token even where it adds none "
        "(SmolLM2), so that position 0, where attention sinks, holds the same kind of token "
        "for every model",
    )
    block: int = DEFAULT_BLOCK

    def __post_init__(self) -> None:
        super().__post_init__()
        check_count("seed", self.seed, 0)


@dataclass(frozen=True, kw_only=True)
class SuiteRun(CheckpointRun):
    """A command that runs a prompt suite (``tasks.build_suite``) on a checkpoint."""

    suite: str = option(
        "niah",
        "prompt suite: niah, niah_multi, niah_decoy, uuid_niah, passkey_niah, "
        "ruler_multikey, induction, mqar, copying, literary (attnlab tasks lists them)",
    )
    prompts: int = option(20, "prompts in the suite", metavar="N")
    pad: int | None = option(None, "haystack sentences (NIAH suites), random padding tokens (copying, literary)")
    length: int | None = option(None, "target prompt length in tokens")
    b_auto: float | None = option(
        None,
        "use this b_auto instead of calibrating: a number, or an earlier run's "
        "folder (or its config.json) whose b_auto to reuse",
        metavar="B|RUN",
        type=stored_b_auto,
    )
    calibration: str | None = option(
        None,
        "held-out UTF-8 text that b_auto is calibrated on, cut to 1024 tokens (default: generated generic text)",
        metavar="FILE",
    )
    haystack: str | None = option(
        None,
        "UTF-8 text whose sentences fill the haystacks of niah, uuid_niah and "
        "passkey_niah instead of generated ones, e.g. text written after the "
        "model's training cutoff",
        metavar="FILE",
    )
    passages: str | None = option(
        None,
        "UTF-8 text of passages separated by blank lines that literary opens "
        "instead of the bundled novel openings: a text the model has not seen "
        "tells reading from memory ('## title' lines name passages)",
        metavar="FILE",
    )
    chat: bool = option(
        False,
        "frame every prompt as one user message of the tokenizer's chat template, with its "
        "generation prompt after it (instruction-tuned models)",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_count("prompts", self.prompts)
        for name in ("pad", "length"):
            if getattr(self, name) is not None:
                check_count(name, getattr(self, name), 0 if name == "pad" else 1)
        if self.b_auto is not None and not math.isfinite(self.b_auto):
            raise RunError(f"--b-auto must be finite, got {self.b_auto!r}")
        if self.calibration is not None:
            if self.b_auto is not None:
                raise RunError("--b-auto gives b_auto and --calibration calibrates it; drop one of them")
            read_text(self.calibration, "--calibration")
        if self.haystack is not None:
            read_text(self.haystack, "--haystack")
        if self.passages is not None:
            read_text(self.passages, "--passages")


def settings(run: CheckpointRun) -> dict:
    """The run's settings as ``io.check_output`` compares them with a folder's config.json: b_auto = None
    asks for the calibration, whose (deterministic) result config.json then holds, so it is left out."""
    given = asdict(run)
    if given.get("b_auto") is None:
        given.pop("b_auto", None)
    return given


@contextlib.contextmanager
def staged_output(out: str | os.PathLike) -> Iterator[Path]:
    """Yield a staging folder; on success its files replace those of the same name in ``out``."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise RunError(f"--out {out} is a file; pass a folder")
    created = not out.exists()
    with io.locked(out):  # held to the end: no other run writes here, nor sees this one's cleanup
        io.remove_stale(out, STAGING)
        staging = io.temp_dir(out, STAGING)
        try:
            yield staging
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            if created:
                shutil.rmtree(out, ignore_errors=True)
            raise
        # config.json goes last: a folder holding it counts as finished when a study resumes.
        for item in sorted(staging.iterdir(), key=lambda p: (p.name == "config.json", p.name)):
            os.replace(item, out / item.name)
        staging.rmdir()


def load(path: str, device: str = "auto", dtype: str | None = "auto", trust_remote_code: bool = False):
    """(model, tokenizer) ready for the hooks, on ``device`` in ``dtype`` (``attnlab.devices``: auto reads in
    bfloat16 on a GPU that supports it, as Polynomial Concentration loads its models; a GGUF is converted in it);
    hashing, conversion and loading each say what they do on stdout; every failure is a one-line
    LoadError/UnsupportedModel."""
    model, tokenizer = hooks.load_model(
        path, device=device, dtype=dtype, trust_remote_code=trust_remote_code, log=progress.say
    )
    hooks.num_heads(model)  # unsupported architectures fail here, before any work
    return model, tokenizer


def model_record(run: CheckpointRun, model) -> dict[str, str]:
    """The provenance a run's config.json keeps beside ``--model`` as typed: the absolute path of what it named,
    its sha256 (``hooks.provenance``, naming on stdout a large file it must hash), and the dtype and device the
    weights were used in (--dtype and --device resolved)."""
    return {
        **hooks.provenance(run.model, log=progress.say),
        "dtype_used": str(next(model.parameters()).dtype).removeprefix("torch."),
        "device_used": str(model_device(model)),
    }


def prompt_record(prompts: Sequence[tasks.Prompt], suite: str, pad: int | None, length: int | None) -> dict:
    """The prompt sizes a run's config.json keeps beside ``--pad``/``--length`` as typed: the pad and length the
    suite built with (its defaults where neither was given) and the shortest and longest prompt in tokens."""
    pad_used, length_used = tasks.sizing(suite, pad, length)
    sizes = [len(p.input_ids) for p in prompts]
    return {"pad_used": pad_used, "length_used": length_used, "prompt_tokens": [min(sizes), max(sizes)]}


def context_length(model) -> int | None:
    return getattr(model.config, "max_position_embeddings", None)


def overrun(model, longest: int) -> str | None:
    """ "reach N tokens but the model's context is L" when ``longest`` tokens pass the model's context, else None."""
    limit = context_length(model)
    return None if limit is None or longest <= limit else f"reach {longest} tokens but the model's context is {limit}"


def with_bos(tokenizer, ids: list[int], bos: bool) -> list[int]:
    """``ids`` led by the tokenizer's BOS token when ``bos`` asks for it and it is not there already."""
    if not bos or (ids and ids[0] == getattr(tokenizer, "bos_token_id", None)):
        return ids
    if getattr(tokenizer, "bos_token_id", None) is None:
        raise RunError("--bos: the tokenizer has no BOS token to start the documents with")
    return [tokenizer.bos_token_id, *ids]


def run_prompts(model, tokenizer, run: SuiteRun, **override) -> list[tasks.Prompt]:
    """``suite_prompts`` with a run's settings (suite, prompts, seed, pad, length, bos, haystack, passages,
    chat); ``override`` replaces some of them, e.g. ``suite=`` for a second suite."""
    given = {
        "suite": run.suite,
        "n_prompts": run.prompts,
        "seed": run.seed,
        "pad": run.pad,
        "length": run.length,
        "bos": run.bos,
        "haystack": run.haystack,
        "passages": run.passages,
        "chat": run.chat,
        **override,
    }
    return suite_prompts(model, tokenizer, given.pop("suite"), given.pop("n_prompts"), **given)


def suite_prompts(
    model,
    tokenizer,
    suite: str,
    n_prompts: int,
    *,
    seed: int = 0,
    pad: int | None = None,
    length: int | None = None,
    bos: bool = False,
    haystack: str | None = None,
    passages: str | None = None,
    chat: bool = False,
    api: bool = False,
) -> list[tasks.Prompt]:
    """The suite's prompts for this tokenizer, checked against the model's context length; ``haystack``
    names a text file whose sentences fill NIAH haystacks, ``passages`` one whose passages literary opens.
    ``api``: errors name the Python API's arguments (``n_prompts``, ``pad``) instead of the command's flags."""
    if suite not in tasks.SUITES:
        if api:
            raise ArgumentError(
                f"prompts names no suite: {suite!r}; suites are {', '.join(sorted(tasks.SUITES))} "
                "(or pass a list of texts or token-id lists)"
            )
        raise RunError(f"unknown suite {suite!r}; choose one of {', '.join(sorted(tasks.SUITES))}")
    if api:
        check_count("n_prompts", n_prompts, api=True)
        check_count("seed", seed, 0, api=True)
        if pad is not None:
            check_count("pad", pad, 0, api=True)
        if length is not None:
            check_count("length", length, api=True)
    # a prompt of ``length`` tokens, or one holding ``pad`` filler units of at least a token each, is at least that
    # long: refused from the numbers, before a haystack of millions of tokens is built and tokenized
    for given, what in ((length, "length"), (pad, "pad")):
        if given is not None and (over := overrun(model, given)):
            words = f"{what} = {given}: the prompts would {over}"
            if api:
                raise ArgumentError(f"{words}; pass a smaller {what}")
            raise RunError(f"--{what} {given}: the prompts would {over}; lower --{what}")
    try:
        text = None if haystack is None else read_text(haystack, "--haystack")
        texts = None if passages is None else read_text(passages, "--passages")
        prompts = tasks.build_suite(
            suite,
            tokenizer,
            n_prompts,
            seed=seed,
            pad=pad,
            length=length,
            bos=bos,
            haystack=text,
            passages=texts,
            chat=chat,
        )
    except tasks.SuiteError as exc:
        if api:
            raise
        raise RunError(str(exc)) from exc
    if over := overrun(model, max(len(p.input_ids) + len(p.answer_ids) for p in prompts)):
        if api:
            raise ArgumentError(f"the {suite} prompts {over}; pass a smaller pad or length")
        raise RunError(f"prompts {over}; lower --pad/--length")
    return prompts


def read_text(path: str | os.PathLike, flag: str) -> str:
    """The UTF-8 text of the file a flag names; a RunError naming the flag otherwise."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise RunError(f"{flag} {path} is not a file; pass a UTF-8 text file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise RunError(f"{flag} {path} is not UTF-8 text") from None


def calibration_ids(model, tokenizer, device: str, text_file: str | None = None) -> torch.Tensor:
    """Polynomial Concentration App. B's held-out generic input, cut to 1024 tokens (or the model's
    context): the user's ``text_file``, else generated text."""
    limit = min(CALIBRATION_TOKENS, context_length(model) or CALIBRATION_TOKENS)
    text = (
        tasks.generic_text(4 * limit, seed=CALIBRATION_SEED)
        if text_file is None
        else read_text(text_file, "--calibration")
    )
    ids = tokenizer(text, add_special_tokens=True)["input_ids"][:limit]
    if len(ids) < 2:
        raise RunError("the tokenizer turned the calibration text into fewer than 2 tokens")
    return torch.tensor([ids], device=device)


def calibration_record(model, tokenizer, run: SuiteRun, b_auto: float | None) -> dict:
    """What b_auto was calibrated on, for the run's config: nothing when it was given or not needed."""
    if b_auto is None or run.b_auto is not None:
        return {}
    ids = calibration_ids(model, tokenizer, "cpu", run.calibration)
    return {
        "calibration text": run.calibration or f"generated generic text (seed {CALIBRATION_SEED})",
        "calibration tokens": int(ids.shape[1]),
    }


@dataclass(frozen=True)
class Bias:
    label: str  # as typed: "0", "auto", "3.5"
    value: float


def parse_biases(specs: Sequence[str]) -> list[float | None]:
    """Check --b values before any work: numbers, or "auto" (returned as None)."""
    values = []
    for spec in specs:
        if spec == "auto":
            values.append(None)
            continue
        try:
            value = float(spec)
        except ValueError:
            raise RunError(f"--b takes numbers or 'auto', got {spec!r}") from None
        if not math.isfinite(value):
            raise RunError(f"--b must be finite, got {spec!r}")
        values.append(value)
    if not specs or len(set(values)) != len(values):  # values, not spellings: "1" and "1.0" are one bias
        raise RunError(f"--b needs distinct values, got {list(specs)}")
    return values


def biases(
    model, tokenizer, specs: Sequence[str], device: str, b_auto: float | None = None, calibration: str | None = None
) -> tuple[list[Bias], float | None]:
    """The biases b to audit at, with "auto" resolved to ``b_auto`` when given, else by calibration on
    the ``calibration`` text file or generated text (returned as b_auto: the given one, the calibrated
    one, or None)."""
    values = parse_biases(specs)
    if None in values and b_auto is None:
        b_auto = hooks.calibrate_b_auto(model, calibration_ids(model, tokenizer, device, calibration))
    return [Bias(spec, b_auto if value is None else value) for spec, value in zip(specs, values, strict=True)], b_auto


def recipe_b_auto(
    model, tokenizer, recipes: Sequence[str], device: str, b_auto: float | None = None, calibration: str | None = None
) -> float | None:
    """``b_auto`` if given, else calibrated (on the ``calibration`` text file or generated text) when a
    recipe is a ``_bauto`` name, else None."""
    if b_auto is None and any(n.endswith("_bauto") for n in recipes):
        return hooks.calibrate_b_auto(model, calibration_ids(model, tokenizer, device, calibration))
    return b_auto
