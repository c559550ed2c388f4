"""Length generalization (Vasylenko et al. 2025 §5.1, Table 1): one model per attention variant, trained at one length
(or at lengths drawn from a range, as the seed's 32-64) on a synthetic task and scored by exact match
(accuracy for classification tasks) at multiples of it, with the entropy and support of the attention
rows at every length (the non-dispersion claim of Vasylenko et al. 2025 §3.2).

Under NAPE the split between rows that disperse and rows that stay bounded can follow the head's
position encoding rather than the row map: on small Copy models the ALiBi heads keep a bounded support
under entmax while the NoPE heads spread under both maps (see the per-head ``dispersion`` table and
``tests/studies/lengthgen/test_experiment.py``).

Each variant is a cell: trained into ``out/runs/<variant>`` (resumable) and written to
``out/cells/<variant>.json`` once scored; a rerun skips finished cells whose config matches, and may change
only what is scored (``SCORING``): a folder trained under other settings is refused unless overwritten.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from attnlab import devices, io
from attnlab.errors import Error
from attnlab.readback import ReadBackError, check, read_object, read_record
from attnlab.site import WeightBlock
from attnlab.studies.lengthgen.config import SELECT_SEED, TEST_SEED, LengthgenConfig, Plan, run_config
from attnlab.tasks import TaskStream, exact_match, scored_accuracy
from attnlab.tasks.seqtask import IGNORE, Task
from attnlab.train import checkpoint as ckpt
from attnlab.train.trainer import Trainer
from attnlab.workers import Launch, check_jobs, in_process, spread

ROWS = ("all", "answer")
SAMPLED_ROWS = 1024  # rows of each kind per sequence whose dispersion is measured


def spaced(mask: torch.Tensor, most: int) -> torch.Tensor:
    """``mask`` (batch, length) thinned to at most ``most`` evenly spaced true positions per row."""
    rank = mask.cumsum(-1) - 1
    step = (mask.sum(-1, keepdim=True) + most - 1) // most
    return mask & (rank % step.clamp(min=1) == 0)


def _dispersion(layers: int, heads: int, answer: torch.Tensor) -> tuple[Any, dict[str, torch.Tensor]]:
    """A weight observer summing, per layer and head, row entropy (nats) and support (weights > 0) over
    rows with at least two allowed keys: all rows, and the rows whose prediction is scored (``answer``,
    (batch, length) bool), where the task needs the model to find something. Each kind keeps at most
    ``SAMPLED_ROWS`` evenly spaced rows per sequence, which makes the means estimates at long lengths but
    keeps the observer from costing more than the forward. Returns the observer and its sums."""
    sums = {
        f"{kind}_{what}": torch.zeros(layers, heads, dtype=torch.float64)
        for kind in ROWS
        for what in ("entropy", "support", "rows")
    }
    kept = {"all": spaced(torch.ones_like(answer), SAMPLED_ROWS), "answer": spaced(answer, SAMPLED_ROWS)}

    def observe(block: WeightBlock) -> None:
        span = slice(block.query_start, block.query_start + block.weights.shape[-2])
        masks = {kind: m[:, span] for kind, m in kept.items()}
        local = (masks["all"] | masks["answer"]).any(0).nonzero().squeeze(-1)
        if not len(local):
            return
        w = block.weights.detach()[..., local, :]
        allowed = block.allowed[..., local, :] if block.allowed.shape[-2] > 1 else block.allowed
        # the sums stay on the CPU, beside the masks, wherever the model runs
        rows = (allowed.sum(-1).expand(w.shape[:-1]) >= 2).cpu()
        stats = {
            "entropy": -torch.special.xlogy(w, w).sum(-1, dtype=torch.float64).cpu(),
            "support": (w > 0).sum(-1).double().cpu(),
        }
        for kind, mask in masks.items():
            keep = rows & mask[:, local][:, None, :]
            sums[f"{kind}_rows"][block.layer] += keep.sum((0, 2))
            for what, value in stats.items():
                sums[f"{kind}_{what}"][block.layer] += torch.where(keep, value, 0.0).sum((0, 2))

    return observe, sums


def metric(task: Task) -> tuple[str, Any]:
    """The name and function of the task's score (Vasylenko et al. 2025 App. G.2): exact match of the whole answer,
    and accuracy over positions for the classification tasks (2Back, Local Count)."""
    return ("accuracy", scored_accuracy) if task.kind == "classification" else ("exact match", exact_match)


def _chunk(length: int) -> int:
    """Rows per forward at ``length``: about 2^16 tokens, so that long rows fit in memory."""
    return max(1, 2**16 // length)


@torch.no_grad()
def row_scores(model, task: Task, batch, observe=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row of ``batch``: the task's ``metric`` and its token accuracy (the fraction of the row's scored
    positions right, the graded score), ``_chunk`` rows per forward; the first chunk runs under the weight
    observer ``observe`` when one is given."""
    model.eval()
    rows, chunk, right = batch.ids.shape[0], _chunk(batch.ids.shape[1]), metric(task)[1]
    device = devices.model_device(model)
    scores, tokens = [], []
    for start in range(0, rows, chunk):
        watched = observe is not None and start == 0
        with model.observed(observe, weights=True) if watched else contextlib.nullcontext():
            logits = model(batch.ids[start : start + chunk].to(device))
        targets = batch.targets[start : start + chunk].to(device)
        scores.append(right(logits, targets).double().cpu())
        tokens.append(scored_accuracy(logits, targets).double().cpu())
    return torch.cat(scores), torch.cat(tokens)


def fraction_right(model, task: Task, batch, observe=None) -> float:
    """The task's ``metric`` over ``batch`` (the fraction right); see ``row_scores``."""
    return float(row_scores(model, task, batch, observe)[0].mean())


@torch.no_grad()
def score(model, task: Task, length: int, samples: int, seed: int) -> dict[str, Any]:
    """The task's ``metric`` over ``samples`` fixed rows at ``length`` (the fraction right, ``accuracy``; per
    row, ``rows``), the token accuracy (``token_accuracy``; per row, ``token_rows``), and the mean entropy
    and support of the attention rows of the first chunk (see ``_dispersion``) per layer (pooled over
    heads) and per layer and head, over all rows (``entropy``, ``support``) and over the scored rows
    (``answer_entropy``, ``answer_support``)."""
    batch = task.generate(samples, length, seed)
    observe, sums = _dispersion(model.cfg.layers, model.cfg.heads, batch.targets[: _chunk(length)] != IGNORE)
    rows, tokens = row_scores(model, task, batch, observe)
    result: dict[str, Any] = {
        "accuracy": float(rows.mean()),
        "token_accuracy": float(tokens.mean()),
        "rows": _rounded(rows),
        "token_rows": _rounded(tokens),
        "heads": {},
    }
    for kind in ROWS:
        rows = sums[f"{kind}_rows"]
        prefix = "" if kind == "all" else f"{kind}_"
        for what in ("entropy", "support"):
            total = sums[f"{kind}_{what}"]
            result[prefix + what] = (total.sum(1) / rows.sum(1)).tolist()
            result["heads"][prefix + what] = (total / rows).tolist()
    return result


def _rounded(values: torch.Tensor) -> list[float]:
    return [round(float(v), 6) for v in values]


def cell_name(name: str, seed: int) -> str:
    """The folder and file stem of variant ``name`` trained under ``seed``."""
    return f"{name}_seed{seed}"


@torch.no_grad()
def select(model, run: Path, cfg: LengthgenConfig, seed: int) -> dict[str, Any]:
    """Vasylenko et al. 2025 App. G.2's checkpoint choice: the saved checkpoint of ``run`` with the best score
    at ``cfg.select_mult`` on held-out rows (seed ``SELECT_SEED``, the same for every seed and variant, apart
    from the scored rows), the latest one on a tie. Where no checkpoint scores at all there, the task's
    metric cannot rank them and the choice falls back to the graded score, token accuracy (``by`` says which
    decided). Loads it into ``model``; returns the length, the rows, the criterion and every checkpoint's
    scores."""
    length, rows = cfg.select_length, cfg.plan.select_samples
    batch = cfg.task_def.generate(rows, length, SELECT_SEED)
    scores, tokens, paths = {}, {}, sorted(ckpt.step_dirs(run).items())
    for step, path in paths:
        model.load_state_dict(ckpt.load_checkpoint(path).model_state)
        right, token = row_scores(model, cfg.task_def, batch)
        scores[step], tokens[step] = float(right.mean()), float(token.mean())
    by = metric(cfg.task_def)[0] if max(scores.values()) > 0 else "token accuracy"
    ranked = scores if by != "token accuracy" else tokens
    best = max(ranked, key=lambda step: (ranked[step], step))  # a tie goes to the later step
    model.load_state_dict(ckpt.load_checkpoint(dict(paths)[best]).model_state)
    return {
        "multiple": cfg.select_mult,
        "length": length,
        "samples": rows,
        "step": best,
        "by": by,
        "score": scores[best],
        "token_score": tokens[best],
        "scores": {str(k): v for k, v in scores.items()},
        "token_scores": {str(k): v for k, v in tokens.items()},
    }


def run_cell(
    cfg: LengthgenConfig,
    name: str,
    out: Path,
    progress: bool = False,
    seed: int | None = None,
    device: str = "auto",
    dtype: str = "auto",
) -> dict[str, Any]:
    """Train (or resume) variant ``name`` under ``seed`` (default ``cfg.seed``) on ``device`` in ``dtype``
    (``devices.training``: auto is float32 on a CPU and the budget's precision on a GPU), choose its checkpoint
    (``select``) and score that one at every length; reuses a finished cell."""
    seed = cfg.seed if seed is None else seed
    stream = TaskStream(cfg.task, cfg.train_tokens, seed=seed, min_length=cfg.min_train_tokens, **cfg.params)
    run = devices.training(run_config(cfg, name, stream.vocab_size, seed), dtype, device)
    precision = run.train.precision
    stem = cell_name(name, seed)
    path = out / "cells" / f"{stem}.json"
    # what shapes and scores this one cell: not the other variants and seeds of the run
    settings = {
        **{k: v for k, v in asdict(cfg).items() if k not in ("maps", "seeds")},
        "variant": name,
        "cell_seed": seed,
        "test_rows": TEST_SEED,
        "select_rows": SELECT_SEED,
        # only where it is not fp32, so that the cells made before precision was a setting stay reusable
        **({} if precision == "fp32" else {"precision": precision}),
    }
    done = _finished(path, settings, cfg.lengths)
    if done is not None:
        return done
    runs = out / "runs" / stem
    trainer = Trainer(run, runs, resume=True, progress=progress, stream=stream, device=device)
    summary = trainer.run()
    chosen = select(trainer.model, runs, cfg, seed)
    lengths = {}
    for length in cfg.lengths:
        n = cfg.samples_at(length)
        lengths[str(length)] = {"samples": n, **score(trainer.model, cfg.task_def, length, n, seed=TEST_SEED)}
    cell = {
        "settings": settings,
        "variant": name,
        "seed": seed,
        "train": summary,
        "selection": chosen,
        "lengths": lengths,
        "untrained": untrained_scores(cfg, name, stream.vocab_size, seed, trainer.world.device),
    }
    io.write_json(path, cell)
    return cell


@dataclass(frozen=True)
class _Selection:
    step: int
    by: str
    score: float
    token_score: float


@dataclass(frozen=True)
class _Scored:
    accuracy: float
    rows: list[float]
    token_rows: list[float]
    entropy: list[float]
    heads: dict[str, list[list[float]]]


@dataclass(frozen=True)
class _Null:
    accuracy: float
    rows: list[float]


@dataclass(frozen=True)
class _Cell:
    """cells/<variant>_seed<N>.json (``run_cell``): what the tables read of it."""

    settings: dict[str, Any]
    variant: str
    seed: int
    train: dict[str, Any]
    selection: _Selection
    lengths: dict[str, _Scored]
    untrained: dict[str, _Null]


def _finished(path: Path, settings: Mapping[str, Any], lengths: Sequence[int]) -> dict[str, Any] | None:
    """The cell at ``path`` when it was scored under ``settings`` at every one of ``lengths``; None where there is
    none, or none that reads back (``readback.read_record`` against ``_Cell``): such a cell is scored anew and
    written over, as one of other settings is (it is the run's own file, listed in its folder's marker)."""
    try:
        done = read_record(path, _Cell)
    except (ReadBackError, OSError):  # OSError: MissingFileError where no cell was written yet
        return None
    scored = {str(n) for n in lengths} <= set(done["lengths"]) & set(done["untrained"])
    return done if scored and done["settings"] == json.loads(json.dumps(settings)) else None


@torch.no_grad()
def untrained_scores(cfg: LengthgenConfig, name: str, vocab: int, seed: int, device: str = "cpu") -> dict[str, Any]:
    """The null control of a cell: the same variant at its initialization under ``seed`` (before any step),
    scored on ``device`` on the same test rows at every length: length -> the metric per row (``rows``) and
    its mean."""
    from attnlab.model.decoder import Decoder

    torch.manual_seed(seed)
    model = Decoder(run_config(cfg, name, vocab, seed).model).to(device)
    out = {}
    for length in cfg.lengths:
        batch = cfg.task_def.generate(cfg.samples_at(length), length, TEST_SEED)
        rows = row_scores(model, cfg.task_def, batch)[0]
        out[str(length)] = {"accuracy": float(rows.mean()), "rows": _rounded(rows)}
    return out


def mult_label(mult: float) -> str:
    """A length multiple's column name: "1x", "1.5x", "16x"."""
    return f"{mult:g}x"


def table(cells: Mapping[str, Mapping[str, Any]], cfg: LengthgenConfig) -> pd.DataFrame:
    """Vasylenko et al. 2025 Table 1's shape, one row per variant and seed: the selected checkpoint's step,
    what chose it (``select_by``: the metric, or token accuracy where no checkpoint scored) and its score and
    token accuracy at ``select_mult`` (``select_score``, ``select_token``, %), ``best`` marking the variant's
    seed with the highest select score (by token accuracy where no seed of the variant scores there; the
    lowest seed on a tie: the paper's single reported model), and the score (%) per length multiple."""
    rows = []
    for cell in cells.values():
        chosen = cell["selection"]
        rows.append(
            {
                "variant": cell["variant"],
                "seed": cell["seed"],
                "selected_step": chosen["step"],
                "select_by": chosen["by"],
                "select_score": 100 * chosen["score"],
                "select_token": 100 * chosen["token_score"],
                **{mult_label(m): 100 * cell["lengths"][str(cfg.length_at(m))]["accuracy"] for m in cfg.plan.eval_mult},
            }
        )
    frame = pd.DataFrame(rows)
    scored = frame.groupby("variant").select_score.transform("max") > 0
    frame["rank_by"] = frame.select_score.where(scored, frame.select_token)
    order = frame.sort_values(["variant", "rank_by", "seed"], ascending=[True, False, True])
    frame["best"] = frame.index.isin(order.groupby("variant", sort=False).head(1).index)
    frame = frame.drop(columns="rank_by")
    first = ["variant", "seed", "best", "selected_step", "select_by", "select_score", "select_token"]
    return frame[first + [c for c in frame.columns if c not in first]]


LEARNED = 0.5  # in-distribution score below which a model has not learned the task (Vasylenko et al. 2025 §5)


def not_learned(acc: pd.DataFrame) -> dict[str, float]:
    """ "variant seed N" -> its in-distribution score (%, the 1x column) for every seed's model below
    ``LEARNED``: its out-of-distribution numbers say nothing about length generalization. Empty without a
    1x column."""
    if "1x" not in acc:
        return {}
    return {f"{r.variant} seed {r.seed}": float(r["1x"]) for _, r in acc.iterrows() if r["1x"] < 100 * LEARNED}


def rows_table(cells: Mapping[str, Mapping[str, Any]], cfg: LengthgenConfig) -> pd.DataFrame:
    """Every scored row: per variant, seed, length multiple and row of the shared test set (``row``, the
    same rows for every variant and seed), the metric (``score``, 0/1 for exact match), the token accuracy
    (``token``) and the metric of the cell's untrained model on that row (``untrained``), the paired
    outcomes a comparison of two variants reads."""
    frames = []
    for cell in cells.values():
        for mult in cfg.plan.eval_mult:
            length = str(cfg.length_at(mult))
            scored, null = cell["lengths"][length], cell["untrained"][length]
            frames.append(
                pd.DataFrame(
                    {
                        "variant": cell["variant"],
                        "seed": cell["seed"],
                        "multiple": mult,
                        "length": int(length),
                        "row": range(len(scored["rows"])),
                        "score": scored["rows"],
                        "token": scored["token_rows"],
                        "untrained": null["rows"],
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)


def dispersion_table(cells: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Per variant, seed, length, layer and head: mean row entropy (nats) and support size over all rows and
    over the answer rows."""
    rows = [
        {
            "variant": cell["variant"],
            "seed": cell["seed"],
            "length": int(length),
            "log_length": math.log(int(length)),
            "layer": layer,
            "head": head,
            **{key: r["heads"][key][layer][head] for key in r["heads"]},
        }
        for cell in cells.values()
        for length, r in cell["lengths"].items()
        for layer in range(len(r["entropy"]))
        for head in range(len(r["heads"]["entropy"][layer]))
    ]
    return pd.DataFrame(rows)


def plot(acc: pd.DataFrame, cfg: LengthgenConfig, path: Path) -> tuple[Path, Path]:
    """The run's figure: one curve per variant (its best seed), the task's score against the evaluation
    length."""
    from attnlab.report.plot_lengthgen import plot_run_accuracy

    given = "".join(f", {k}={v}" for k, v in cfg.params.items())
    best = acc[acc["best"]].set_index("variant")[[mult_label(m) for m in cfg.plan.eval_mult]]
    return plot_run_accuracy(
        best,
        cfg.lengths,
        f"{metric(cfg.task_def)[0]} (%)",
        f"{cfg.task}{given}, trained at {cfg.trained_at}, {cfg.pe}",
        path,
    )


def _run_cells(
    cfg: LengthgenConfig, out: Path, progress: bool, jobs: int, device: str, dtype: str, launch: Launch
) -> dict[str, dict[str, Any]]:
    """Every (variant, seed) cell, spread as ``launch`` says (``workers.spread``: ``jobs`` at a time on the
    CPU, one per GPU, or one submitit job each), keyed by ``cell_name``; each cell writes its own JSON, so a
    failed cell leaves the others."""
    todo = [(name, seed) for name in cfg.maps for seed in cfg.seed_list]
    shown = progress and in_process(len(todo), jobs=jobs, device=device, launch=launch)
    calls = [(cfg, n, out, shown, s, device, dtype) for n, s in todo]
    cells = spread(run_cell, calls, jobs=jobs, device=device, launch=launch, folder=out)
    return {cell_name(n, s): cell for (n, s), cell in zip(todo, cells)}


# Settings that only choose what is scored: a rerun may change them and reuse the trained models. Every
# other setting, and the plan it resolves to, shapes the model of each variant (trained in its own folder).
SCORING = ("maps", "eval_mult", "samples", "seeds", "select_mult")
# Everything a run writes into its folder: what --overwrite removes (of what the folder's marker lists), leaving
# any other file there.
WRITES = (
    ".submitit",
    "config.json",
    "cells",
    "runs",
    "accuracy.csv",
    "accuracy.md",
    "accuracy.png",
    "accuracy.svg",
    "dispersion.csv",
    "dispersion.md",
    "rows.csv",
)


# What the decoder computes for the same settings: a folder trained by another version holds checkpoints whose
# weights mean something else, so a rerun refuses it. 2: under NAPE the length scalers scale the NoPE heads only,
# and ASEntmax's bound s defaults to 2 (Vasylenko et al. 2025's code); folders without a version are 1.
MODEL_VERSION = 2


class FolderError(Error, ValueError):
    """The output folder holds results that this configuration must neither reuse nor write over."""


def trained_settings(cfg: LengthgenConfig, plan: Plan, version: int = MODEL_VERSION) -> dict[str, Any]:
    """What shaped each variant's model, as JSON reads it back: every setting but ``SCORING``, the task's
    parameters with its defaults filled in, the given overrides as ``plan`` resolves them and the decoder's
    ``version`` (``MODEL_VERSION``)."""
    planned = asdict(plan)
    given = {k: v for k, v in asdict(cfg).items() if k not in SCORING and k not in planned}
    planned = {k: v for k, v in planned.items() if k not in SCORING}
    return json.loads(json.dumps({**given, "params": cfg.task_def.params(), **planned, "model_version": version}))


@dataclass(frozen=True)
class _Planned:
    """What a run's config.json holds besides the config's settings (``run``): its plan and the decoder's version
    (an older attnlab wrote none: 1)."""

    plan: Plan
    model_version: int = 1


SETTINGS = tuple(f.name for f in fields(LengthgenConfig))


def read_config(path: Path, *, every_setting: bool = False) -> tuple[LengthgenConfig, Plan, int]:
    """The config, plan and decoder version of the run whose ``config.json`` is ``path``: its keys the settings
    (``every_setting``: each present, as this version writes them), plan and model_version, each value of its
    field's type (``readback.check`` against ``LengthgenConfig`` and ``_Planned``), and a config and plan that
    build; else a ReadBackError naming the file and what is allowed."""
    saved = check(read_object(path), LengthgenConfig, path, required=SETTINGS if every_setting else ())
    check(saved, _Planned, path)
    if unknown := sorted(set(saved) - {*SETTINGS, "plan", "model_version"}):
        allowed = ", ".join((*SETTINGS, "plan", "model_version"))
        raise ReadBackError(f"{path}: {unknown[0]} is no setting of this version; allowed: {allowed}")
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in saved.items() if k in SETTINGS}
    try:
        return LengthgenConfig(**given), Plan.from_dict(saved["plan"]), saved.get("model_version", 1)
    except (Error, TypeError, ValueError) as exc:
        raise ReadBackError(f"{path} describes a run this version cannot reuse ({exc})") from None


def _saved(path: Path, retry: str) -> tuple[LengthgenConfig, Plan, int]:
    """``read_config(path)``, every setting present; a FolderError saying ``retry`` where it does not read back."""
    try:
        return read_config(path, every_setting=True)
    except (ReadBackError, OSError) as exc:
        raise FolderError(f"{exc}; {retry}") from None


def prepare(cfg: LengthgenConfig, out: Path, overwrite: bool = False) -> None:
    """Make ``out`` ready for ``cfg`` before anything is written into it. With ``overwrite``, remove what an
    earlier run wrote (those of ``WRITES`` that the folder's marker lists: ``io.clear``); otherwise refuse results
    that ``cfg`` must not reuse: another run's (``trained_settings`` differ) or ones without the config.json saying
    how they were made. A folder without the marker that holds files is refused, --overwrite or not, unless it is
    an older attnlab's run of these settings, which is claimed and resumed."""
    if out.exists() and not out.is_dir():
        raise FolderError(f"--out {out} is a file; pass a folder")
    retry = "pass --overwrite to start clean, or choose another --out"
    if out.is_dir() and io.listed(out) is None and any(not e.name.startswith(".") for e in out.iterdir()):
        if overwrite or not _same_run(cfg, out):
            raise io.unclaimed_error(out, "lengthgen")
        io.claim(out, adopt=WRITES)  # its config.json says it is this run: its cells and runs are this one's
    held = io.listed(out) or []
    taken = [name for name in WRITES if os.path.lexists(out / name) and name not in held]
    if taken:
        raise FolderError(
            f"{out} holds {', '.join(taken)}, which no attnlab run wrote there; move them away, or choose another --out"
        )
    if overwrite:
        io.clear(out, WRITES)
        return
    found = [name for name in WRITES if (out / name).exists()]
    if not found:
        return
    if "config.json" not in found:
        raise FolderError(
            f"{out} holds lengthgen results ({', '.join(found)}) but no config.json saying how they were made; {retry}"
        )
    there, now = trained_settings(*_saved(out / "config.json", retry)), trained_settings(cfg, cfg.plan)
    differ = [
        f"{k}: {there.get(k)!r} there, {now.get(k)!r} now" for k in {**now, **there} if there.get(k) != now.get(k)
    ]
    if differ:
        raise FolderError(f"{out} holds a lengthgen run trained with other settings ({'; '.join(differ)}); {retry}")


def _same_run(cfg: LengthgenConfig, out: Path) -> bool:
    """Whether ``out``'s config.json is a lengthgen config that trained what ``cfg`` trains."""
    try:
        saved = _saved(out / "config.json", "")
    except FolderError:
        return False
    return trained_settings(*saved) == trained_settings(cfg, cfg.plan)


def run(
    cfg: LengthgenConfig,
    out: str | Path,
    progress: bool = False,
    jobs: int = 1,
    overwrite: bool = False,
    *,
    device: str = "auto",
    dtype: str = "auto",
    launch: Launch | None = None,
) -> dict[str, Any]:
    """Train and score every variant on ``device`` in ``dtype`` (``attnlab.devices``: auto trains the full budget in
    bf16 autocast on a GPU, else in float32; see ``run_cell``), the cells spread as ``launch`` says (default: this
    machine, ``jobs`` at once on the CPU, see ``_run_cells``), then write the config, the accuracy and dispersion
    tables and the plot into ``out``; ``out`` is checked (or, with ``overwrite``, cleared) first, see ``prepare``."""
    check_jobs(jobs)
    out = Path(out)
    launch = launch or Launch()
    with io.locked(out):  # from the check on: a second run into ``out`` is refused at once
        prepare(cfg, out, overwrite)
        # listed before the cells make them: cells may train in other processes, and a kill must find them listed
        io.record(out, "cells", "runs", *([".submitit"] if launch.launcher == "submitit" else []))
        io.write_json(out / "config.json", {**asdict(cfg), "plan": asdict(cfg.plan), "model_version": MODEL_VERSION})
        cells = _run_cells(cfg, out, progress, jobs, device, dtype, launch)
        acc = table(cells, cfg)
        rows = rows_table(cells, cfg)
        paths = {
            **io.write_table(out / "accuracy", acc),
            "rows": io.atomic_write(out / "rows.csv", lambda tmp: rows.to_csv(tmp, index=False)),
            **{f"dispersion_{k}": v for k, v in io.write_table(out / "dispersion", dispersion_table(cells)).items()},
        }
        png, svg = plot(acc, cfg, out / "accuracy")
    paths.update(png=png, svg=svg)
    return {"table": acc, "cells": cells, "paths": paths}
