"""``attnlab substitute``: zero-shot substitution sweep (Polynomial Concentration §5.3, Table 3).

Each recipe replaces softmax on every head (or on chosen heads) and the suite is scored by exact match
of the greedy continuation; the table gives each recipe's accuracy with its Wilson 95% interval and its
difference from softmax in percentage points.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from attnlab import hooks, rowmaps, tasks
from attnlab.analyses.run import (
    RunError,
    SuiteRun,
    calibration_record,
    load,
    model_record,
    prompt_record,
    recipe_b_auto,
    run_prompts,
    settings,
    staged_output,
)
from attnlab.analyses.sections import register
from attnlab.devices import model_device
from attnlab.diagnostics.stats import wilson
from attnlab.io import check_output, write_json, write_parquet, write_table
from attnlab.options import command_line, option
from attnlab.progress import progress as progress_of
from attnlab.report.sections import Section, Table

BASELINE = "softmax"
# Polynomial Concentration §5.3, Tables 2-3: ReLU^p at p = 2, 4, 8, 16 with b = 0 and b_auto, the normalized
# sigmoid at both, and Wortsman et al.'s four un-normalized maps; --recipes paper names them all.
PAPER_RECIPES = (
    *(f"relu_p{p}_b{b}" for p in (2, 4, 8, 16) for b in ("0", "auto")),
    "sigmoid_b0",
    "sigmoid_bauto",
    *(f"wortsman_p{p}_{d}" for p in (1, 2) for d in ("L", "sqrtL")),
)
READ_DELTAS_FROM = 80.0  # Polynomial Concentration App. X: no recipe-vs-softmax delta is read below this softmax %


@dataclass(frozen=True, kw_only=True)
class SubstituteConfig(SuiteRun):
    recipes: tuple[str, ...] = option(
        help="row-map names, e.g. relu_p4_bauto relu_p8_bauto sigmoid_b0 "
        "wortsman_p2_L, or 'paper' for Polynomial Concentration's 14 recipes",
        metavar="NAME",
        convert=lambda names: expand_recipes(tuple(names)),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.recipes:
            raise RunError("--recipes needs at least one row-map name")
        check_recipes(self.recipes, self.b_auto)


def expand_recipes(names: tuple[str, ...]) -> tuple[str, ...]:
    """``names`` with 'paper' replaced by the paper's 14 recipes (``PAPER_RECIPES``), in place."""
    return tuple(r for name in names for r in (PAPER_RECIPES if name == "paper" else (name,)))


def check_recipes(names: Sequence[str], b_auto: float | None = None) -> None:
    """Every recipe must be a registered row-map name, and a ``_bauto`` one must take ``b_auto`` (when given) within
    its map's own bias range; fail before any model is loaded."""
    for name in names:
        try:
            rowmap = rowmaps.get(name)
        except ValueError as exc:
            raise RunError(str(exc)) from None
        if b_auto is not None and rowmap.needs_bias:
            try:
                rowmap.with_bias(b_auto)  # the map's own range check, which would otherwise run after the model loads
            except ValueError as exc:
                raise RunError(f"--b-auto {b_auto:g} does not fit {name}: {exc}") from None
    if len(set(names)) != len(names):
        raise RunError(f"--recipes has repeated names: {list(names)}")


def greedy(model, prompt: tasks.Prompt, n_new: int, device: str, pad_id: int | None) -> list[int]:
    """The greedy continuation of ``n_new`` tokens (one forward when a single token decides)."""
    ids = torch.tensor([prompt.input_ids], device=device)
    with torch.no_grad():
        if n_new == 1:
            return [int(model(input_ids=ids).logits[0, -1].argmax())]
        out = model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=n_new, do_sample=False, pad_token_id=pad_id
        )
    return out[0, ids.shape[1] :].tolist()


def score(
    model, tokenizer, prompts: Sequence[tasks.Prompt], suite: str, device: str, label: str, progress: bool
) -> list[dict]:
    n_new = tasks.max_new_tokens(suite, chat=any(tasks.is_chat(p) for p in prompts))
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    records = []
    # inside the recipe loop: a bar on a terminal only, the recipes' lines being the log's
    for prompt in progress_of(
        prompts, desc=label, unit="prompt", enabled=progress and sys.stderr.isatty(), leave=False
    ):
        generated = greedy(model, prompt, n_new, device, pad_id)
        correct = bool(tasks.answer_correct(prompt, generated, tokenizer))
        decoy = tasks.decoy_hit(prompt, generated, tokenizer)
        records.append(
            {
                "recipe": label,
                "prompt": prompt.index,
                "correct": correct,
                # None: the suite plants no decoy; a right answer is never counted as decoy-tricked
                "decoy": None if decoy is None else decoy and not correct,
                "generated": tokenizer.decode(generated),
            }
        )
    return records


def accuracy(ok: pd.Series, base: float) -> dict:
    """correct/n, accuracy % with its Wilson 95% interval, and the difference from ``base`` % in pp."""
    k, n = int(ok.sum()), len(ok)
    lo, hi = wilson(k, n)
    acc = 100 * k / n
    return {"correct": k, "n": n, "accuracy %": acc, "lo": 100 * lo, "hi": 100 * hi, "delta pp": acc - base}


def baseline_warning(base: float, suite: str) -> str | None:
    """The warning a table's readers need when softmax itself scores ``base`` % < ``READ_DELTAS_FROM`` %: the
    deltas from it are then not read (Polynomial Concentration App. X, Table 19); None otherwise."""
    if base >= READ_DELTAS_FROM:
        return None
    return (
        f"softmax itself scores {base:.1f}% (< {READ_DELTAS_FROM:g}%) on {suite}: the model cannot do the task "
        "reliably, so the deltas from softmax are not read (Polynomial Concentration App. X)"
    )


def as_warning(text: str | None) -> str | None:
    """``text`` as the line a command prints under its table, or None."""
    return None if text is None else f"warning: {text}"


def accuracy_table(records: pd.DataFrame, order: Sequence[str], resolved: dict[str, str]) -> pd.DataFrame:
    """One line per recipe: correct/n, accuracy % with Wilson 95% interval, delta from softmax in pp; on a
    suite with decoys, the wrong answers that name a decoy ("decoy") and those that name nothing planted
    ("neither"), Polynomial Concentration App. Z's failure-mode count."""
    base = records[records["recipe"] == BASELINE]["correct"].mean() * 100
    decoys = "decoy" in records and records["decoy"].notna().any()
    lines = []
    for label in order:
        mine = records[records["recipe"] == label]
        line = {"recipe": label, "map": resolved[label], **accuracy(mine["correct"], base)}
        if label == BASELINE:
            line["delta pp"] = np.nan
        if decoys:
            tricked = int(mine["decoy"].astype(bool).sum())
            line.update({"decoy": tricked, "neither": line["n"] - line["correct"] - tricked})
        lines.append(line)
    return pd.DataFrame(lines)


def substitution(
    model,
    tokenizer,
    prompts: Sequence[tasks.Prompt],
    suite: str,
    recipes: Sequence[str],
    b_auto: float | None,
    *,
    device=None,
    progress: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str]]:
    """The one scoring path of ``attnlab substitute`` and ``attnlab.substitute`` (Polynomial Concentration §5.3):
    softmax, then each recipe on every head, scored by exact match of the greedy continuation on ``device``
    (default: the model's). Returns (answers: one row per recipe and prompt, the accuracy table, recipe ->
    the row map it resolved to with ``b_auto``)."""
    device = model_device(model) if device is None else device
    resolved = {BASELINE: BASELINE, **{r: hooks.resolve(r, b_auto).name for r in recipes}}
    # softmax is always scored, once: named among the recipes too, it would count every prompt twice
    others = [r for r in recipes if r != BASELINE]
    records = score(model, tokenizer, prompts, suite, device, BASELINE, progress)
    for recipe in progress_of(others, desc="recipes", unit="recipe", enabled=progress):
        with hooks.substituted(model, recipe, b_auto=b_auto):
            records += score(model, tokenizer, prompts, suite, device, recipe, progress)
    answers = pd.DataFrame(records)
    return answers, accuracy_table(answers, [BASELINE, *others], resolved), resolved


def run(cfg: SubstituteConfig, out: str | Path, *, progress: bool = True, overwrite: bool = False) -> dict:
    """Score softmax and every recipe on the suite; write substitute.csv/.md (the table),
    answers.parquet (one row per recipe and prompt) and config.json (with b_auto)."""
    check_output(out, settings(cfg), overwrite=overwrite, what="attnlab substitute")
    model, tokenizer = load(cfg.model, cfg.device, cfg.dtype)
    prompts = run_prompts(model, tokenizer, cfg)
    b_auto = recipe_b_auto(model, tokenizer, cfg.recipes, model_device(model), cfg.b_auto, cfg.calibration)
    with staged_output(out) as stage:
        answers, table, resolved = substitution(
            model, tokenizer, prompts, cfg.suite, cfg.recipes, b_auto, device=model_device(model), progress=progress
        )
        config = {
            **asdict(cfg),
            "b_auto": b_auto,
            **calibration_record(model, tokenizer, cfg, b_auto),
            "resolved": resolved,
            **model_record(cfg, model),
            **prompt_record(prompts, cfg.suite, cfg.pad, cfg.length),
        }
        write_parquet(stage / "answers.parquet", answers, metadata=config)
        write_table(stage / "substitute", table)
        write_json(stage / "config.json", json.loads(json.dumps(config, default=str)))
    final = Path(out)
    warning = as_warning(baseline_warning(float(table["accuracy %"].iloc[0]), cfg.suite))
    return {
        "table": table,
        "b_auto": b_auto,
        "answers": answers,
        "summary": warning,
        "paths": {
            k: final / v
            for k, v in {
                "answers": "answers.parquet",
                "csv": "substitute.csv",
                "md": "substitute.md",
                "config": "config.json",
            }.items()
        },
    }


@register("substitute", "substitute.csv", SubstituteConfig)
def report_section(folder: Path, config: dict) -> Section:
    """The substitution sweep (Polynomial Concentration Tables 2-3) with the below-80% warning."""
    table = pd.read_csv(folder / "substitute.csv")
    warning = baseline_warning(float(table["accuracy %"].iloc[0]), config["suite"])
    return Section(
        study="substitute",
        title=f"Substitution on {config['model']}, {config['suite']}",
        source="Polynomial Concentration",
        question="How much accuracy does each row map keep when it replaces softmax on every head, without training?",
        command=command_line("substitute", SubstituteConfig, config, str(folder)),
        tables=(
            Table(
                "substitute",
                "Exact-match accuracy % per recipe with its Wilson 95% interval, and the "
                "difference from softmax in percentage points; on a suite with decoys, the "
                "wrong answers naming a planted decoy (decoy) or nothing planted (neither), "
                "as Polynomial Concentration App. Z tracks them.",
            ),
        ),
        warnings=() if warning is None else (warning,),
    )
