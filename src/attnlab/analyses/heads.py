"""``attnlab heads``: the sink / induction / local / diffuse type of every head (Polynomial Concentration App. H).

One forward per induction prompt (80 at L = 1024 in the seed), rows read as ``analyses.readout``
does: the query rows ``queries`` chooses. Per head, ``induction`` is the mean softmax weight at the
planted B (the token after the current token's first occurrence), over the rows of the repeated half,
which are the rows that have one; ``entropy``, ``locality`` (query minus argmax) and ``sink`` (weight
at position 0) average over every read row. ``diagnostics.heads`` turns them into types.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from attnlab import hooks, tasks
from attnlab.analyses.readout import FLAGS, QUERIES_HELP, check_queries, prompt_reading, read_tables
from attnlab.analyses.run import (
    CheckpointRun,
    RunError,
    check_count,
    load,
    model_record,
    prompt_record,
    settings,
    staged_output,
    suite_prompts,
)
from attnlab.analyses.sections import register
from attnlab.devices import model_device
from attnlab.diagnostics import RowOptions
from attnlab.diagnostics.heads import TYPES, HeadThresholds, head_types
from attnlab.diagnostics.stream import RowStatsWriter
from attnlab.io import check_output, write_json, write_table
from attnlab.options import command_line, option
from attnlab.readback import read_record
from attnlab.report.sections import Section, Table
from attnlab.site import DEFAULT_BLOCK

SUITE = "induction"
RULES = ("labels", "paper")
COLUMNS = ["layer", "head", "query", "argmax", "target_mass", "entropy", "sink_mass", "status", "answer_key"]


@dataclass(frozen=True, kw_only=True)
class HeadsConfig(CheckpointRun):
    prompts: int = option(80, "induction prompts", metavar="N")
    length: int = option(1024, "prompt length in tokens")
    queries: str = option("every:16", QUERIES_HELP, metavar="SPEC")
    rule: str = option(
        "labels",
        "labels: count a head under every type whose test holds (an induction head may "
        "also be a sink); paper: only the first that holds, in the order sink, induction, "
        "local (Polynomial Concentration App. H)",
        choices=RULES,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_queries(self.queries)
        if self.rule not in RULES:
            raise RunError(f"--rule takes {' or '.join(RULES)}, got {self.rule!r}")
        for name in ("prompts", "length"):
            check_count(name, getattr(self, name))


def type_counts(types: pd.DataFrame, rule: str = "paper") -> pd.DataFrame:
    """Heads per type, with their share in percent of all heads: under "paper" each head counts once (its
    ``head_type``), under "labels" once per label it carries, so the shares may add up to more than 100."""
    if rule == "paper":
        counts = types["head_type"].value_counts().reindex(list(TYPES), fill_value=0).to_numpy()
    else:
        counts = np.array([int(types["labels"].str.split("+").map(lambda held, k=k: k in held).sum()) for k in TYPES])
    return pd.DataFrame({"head type": list(TYPES), "heads": counts, "%": 100 * counts / max(len(types), 1)})


def head_type_table(folder: str | Path, model: str) -> pd.DataFrame:
    """The per-head types of an ``attnlab heads`` folder made on ``model`` (its heads.csv), for the --types
    option of the commands that break their results down by App. H type; RunError, naming --types, when the
    folder is not one (its config.json read back against ``HeadsConfig``: ``readback.read_record``) or was made on
    another model."""
    folder = Path(folder)
    try:
        types = pd.read_csv(folder / "heads.csv")
        made_on = read_record(folder / "config.json", HeadsConfig)["model"]
    except (OSError, ValueError, KeyError, TypeError) as exc:  # a ReadBackError is a ValueError
        raise RunError(
            f"--types {folder}: cannot read its heads.csv and config.json ({exc}); pass an attnlab heads folder"
        ) from None
    if not {"layer", "head", "head_type"} <= set(types.columns):
        raise RunError(f"--types {folder}/heads.csv is not an attnlab heads table (needs layer, head, head_type)")
    if not _same_model(str(made_on), model):
        raise RunError(
            f"--types {folder} holds the head types of {made_on}, not of {model}; pass an attnlab heads "
            "folder of the same model"
        )
    return types


def _same_model(a: str, b: str) -> bool:
    """Whether two --model values name one model: the same text, or two paths to one file or folder (a run
    records the path as it was typed, relative or not)."""
    if a == b:
        return True
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    return pa.exists() and pb.exists() and pa.resolve() == pb.resolve()


def read_heads(
    model,
    prompts: Sequence[tasks.Prompt],
    sink: Callable[[RowOptions], RowStatsWriter],
    *,
    queries: str = "every:16",
    device=None,
    block: int = DEFAULT_BLOCK,
    progress: bool = True,
) -> dict:
    """The one reading path of ``attnlab heads`` and ``attnlab.heads``: the rows ``queries`` chooses from each
    induction prompt, those with a planted B read against it (Polynomial Concentration App. H), into
    ``sink(options)`` (a file writer or an in-memory collector) under the label "heads"; one forward per prompt
    on ``device`` (default: the model's). Returns {"heads": what the sink's close returns}."""
    readings = [prompt_reading(p, queries, "answer", keep_all=True) for p in prompts]
    return read_tables(
        model,
        readings,
        {"heads": sink(RowOptions.make(p=2))},
        device=device,
        block=block,
        desc="heads",
        progress=progress,
    )


def classify_heads(
    rows: pd.DataFrame, thresholds: HeadThresholds = HeadThresholds(), rule: str = "labels"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-head features and types, heads per type under ``rule``) from the rows ``read_heads`` read
    (Polynomial Concentration App. H)."""
    rows = rows[COLUMNS].copy()
    # target_mass is the argmax's weight on rows without a planted B; it must not count as induction.
    rows["target_mass"] = rows["target_mass"].where(rows["answer_key"].astype(bool), np.nan)
    types = head_types(rows, thresholds)
    return types, type_counts(types, rule)


def run(cfg: HeadsConfig, out: str | Path, *, progress: bool = True, overwrite: bool = False) -> dict:
    """Classify every head of ``cfg.model``; write heads.csv/.md (per head: features and type),
    types.csv/.md (heads per type), rows_heads.parquet and config.json. Returns {"table" (the type
    counts), "heads", "b_auto" (None), "paths"}."""
    check_output(out, settings(cfg), overwrite=overwrite, what="attnlab heads")
    model, tokenizer = load(cfg.model, cfg.device, cfg.dtype)
    prompts = suite_prompts(model, tokenizer, SUITE, cfg.prompts, seed=cfg.seed, length=cfg.length, bos=cfg.bos)
    n_layers, n_heads = hooks.num_heads(model)
    thresholds = HeadThresholds()
    config = {
        **asdict(cfg),
        "suite": SUITE,
        "thresholds": asdict(thresholds),
        "layers": n_layers,
        "heads": n_heads,
        "model_type": model.config.model_type,
        **model_record(cfg, model),
        **prompt_record(prompts, SUITE, None, cfg.length),
    }
    with staged_output(out) as stage:
        paths = read_heads(
            model,
            prompts,
            lambda opt: RowStatsWriter(Path(stage) / "rows_heads.parquet", opt, config=config, flags=FLAGS),
            queries=cfg.queries,
            device=model_device(model),
            block=cfg.block,
            progress=progress,
        )
        types, table = classify_heads(pd.read_parquet(paths["heads"], columns=COLUMNS), thresholds, cfg.rule)
        write_table(stage / "heads", types)
        write_table(stage / "types", table)
        write_json(stage / "config.json", json.loads(json.dumps(config, default=str)))
    final = Path(out)
    return {
        "table": table,
        "heads": types,
        "b_auto": None,
        "paths": {
            k: final / f
            for k, f in (
                ("heads", "heads.csv"),
                ("types", "types.csv"),
                ("rows", paths["heads"].name),
                ("config", "config.json"),
            )
        },
    }


@register("heads", "heads.csv", HeadsConfig)
def report_section(folder: Path, config: dict) -> Section:
    """Head types (Polynomial Concentration App. H)."""
    return Section(
        study="heads",
        title=f"Head types of {config['model']}",
        source="Polynomial Concentration",
        question="Which heads sink, copy the planted token, attend locally, or spread out?",
        command=command_line("heads", HeadsConfig, config, str(folder)),
        tables=(
            Table("types", f"Heads per type ({config.get('rule', 'paper')} rule; App. H)."),
            Table(
                "heads",
                "Every head's features (means over the rows where each is defined), labels and "
                "App. H's first-match type.",
            ),
        ),
    )
