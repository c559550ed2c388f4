"""The ``sinks`` study's real-model part: with ``--model``, does a pretrained softmax LM park attention on its first
token, as Attention Sinks Essential argues softmax attention must (§1, §2: real heads attend to BOS as a default
no-op; §3.5, Theorems 1-2: a softmax model that writes nothing by default needs a sink)?

``compute_real`` (run by the study's ``compute`` before the toy runs) measures the first-token mass of that model
into ``real/``: one forward per document of generic text (``tasks.generic_text``, tokenized with the tokenizer's
special tokens, so key 0 is BOS where the tokenizer adds one and the first text token where it adds none); per
head, the softmax weight on key 0 averaged over the queries i >= MIN_QUERY that may attend key 0, beside the
uniform share 1 / (keys the query may attend) averaged over the same queries. ``real/first_token_mass.parquet``
(document, layer, head, queries, mass, uniform; layers and heads 0-based as the hooks number them) is written,
then ``real/config.json``; a folder holding the latter is finished. ``summarize_real`` adds its table, heat map
and finding, decided by ``verdict.decide`` from the rule ``real_sinks`` (``RULE_REAL``) against uniform attention
as the null control.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from attnlab import hooks, io
from attnlab.analyses.run import RunError, context_length
from attnlab.analyses.run import load as load_checkpoint

# The measurement lives in analyses.sinks (``attnlab.sinks`` runs it too); re-exported here for the study's callers.
from attnlab.analyses.sinks import DOC_SEED, MIN_QUERY, documents, first_key_sums, first_token_mass, head_table  # noqa: F401
from attnlab.devices import model_device
from attnlab.findings.finding import MDE, Finding, Null, named
from attnlab.findings.verdict import decide
from attnlab.loading.load import resolve_for
from attnlab.report.plot_sinks import plot_first_token_mass
from attnlab.report.readback import read_record
from attnlab.report.sections import Figure, Table
from attnlab.studies.runner import StudyConfig, StudyError

# The real-model part: the first-token mass of a pretrained softmax LM, in folder/real.
REAL = "real"
REAL_NAME = "sinks: a pretrained LM's first-token sink"  # ``Finding.name``: the study declares it
REAL_TABLE = "first_token_mass.parquet"
# The sink threshold on a head's first-token mass; Gu et al. 2024 ("When attention sink emerges in
# language models", cited by Attention Sinks Essential §1) call a head a sink head at the same 0.3.
SINK_MASS = 0.3
# Layers 0 and 1 are left out of the verdict: in pretrained LMs sinks are reported from the third layer
# on (Xiao et al. 2024, "Efficient streaming language models with attention sinks", cited by Attention Sinks
# Essential §1).
SKIP_LAYERS = 2
HALF = 0.5  # the table also counts heads with more than half their weight on key 0


@dataclass(frozen=True)
class RealPlan:
    """One budget of the real-model part: the documents of generic text read, and their length in tokens (cut to
    the model's context where it is shorter)."""

    documents: int
    tokens: int


REAL_PLANS: dict[str, RealPlan] = {
    "smoke": RealPlan(documents=4, tokens=256),
    "full": RealPlan(documents=32, tokens=1024),
}


@dataclass(frozen=True)
class RealRecord:
    """real/config.json as ``compute_real`` writes it: the model read, where and how, and the reading's sizes."""

    model: str
    checkpoint: str
    model_type: str
    layers: int
    heads: int
    documents: int
    tokens: int
    min_query: int
    seed: int
    device: str
    dtype: str
    adds_bos: bool
    first_tokens: tuple[str, ...]
    seconds: float


def read_real_config(folder: Path) -> dict:
    """real/config.json of the study folder ``folder``, checked against ``RealRecord`` (``readback.read_record``)."""
    return read_record(Path(folder) / REAL / "config.json", RealRecord)


def compute_real(cfg: StudyConfig, folder: Path, progress: bool) -> None:
    """Measure the first-token mass of ``cfg.model`` into folder/real (skipped when its config.json
    exists). Errors loading the model come back as one-line StudyErrors."""
    folder = Path(folder) / REAL
    if (folder / "config.json").is_file():
        return
    plan = REAL_PLANS[cfg.budget]
    try:
        checkpoint = resolve_for(cfg.model, cfg.device, cfg.dtype, log=print)
        model, tokenizer = load_checkpoint(str(checkpoint), cfg.device, cfg.dtype)
        device = str(model_device(model))
        tokens = min(plan.tokens, context_length(model) or plan.tokens)
        docs = documents(tokenizer, plan.documents, tokens, cfg.seed)
        started = time.monotonic()
        frame = first_token_mass(model, docs)
    except (hooks.LoadError, hooks.UnsupportedModel, RunError) as exc:
        raise StudyError(f"--model {cfg.model}: {exc}") from None
    seconds = time.monotonic() - started
    n_layers, n_heads = hooks.num_heads(model)
    bos = tokenizer.bos_token_id
    config = {
        "model": cfg.model,
        "checkpoint": str(checkpoint),
        "model_type": model.config.model_type,
        "layers": n_layers,
        "heads": n_heads,
        "documents": len(docs),
        "tokens": tokens,
        "min_query": MIN_QUERY,
        "seed": cfg.seed,
        "device": device,
        "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
        "adds_bos": bos is not None and all(ids[0] == bos for ids in docs),
        "first_tokens": sorted({tokenizer.convert_ids_to_tokens(ids[0]) for ids in docs}),
        "seconds": round(seconds, 1),
    }
    io.write_parquet(folder / REAL_TABLE, frame, metadata=config)
    io.write_json(folder / "config.json", config)  # last: a folder holding it is finished
    if progress:
        print(f"sinks real: {len(docs)} documents x {tokens} tokens on {cfg.model} in {seconds:.1f} s", flush=True)


# The decision rule, fixed before any number was read, and its null control.


def real_sinks(median_mass) -> bool:
    """The real-model rule: in a majority of the layers read, the median head's first-token mass >= SINK_MASS."""
    values = np.asarray(median_mass, dtype=float)
    return bool(values.size and (values >= SINK_MASS).sum() > values.size / 2)


RULE_REAL = (
    f"in a majority of the layers after the first {SKIP_LAYERS}, the median head's first-token mass is >= {SINK_MASS:g}"
)
NULL_REAL = (
    "uniform attention over the same queries (the uniform share 1 / (keys attended), per layer) under the same rule"
)


def layer_table(heads: pd.DataFrame) -> pd.DataFrame:
    """Per layer, over its heads: mean, median and max first-token mass, the heads above HALF and at or
    above SINK_MASS, and the uniform share (Attention Sinks Essential App. B.2's "a sink in at least one head every
    layer"
    reads off the max column)."""
    grouped = heads.groupby("layer", sort=True)
    return pd.DataFrame(
        {
            "mean": grouped["mass"].mean(),
            "median": grouped["mass"].median(),
            "max": grouped["mass"].max(),
            "heads": grouped["mass"].size(),
            "heads_over_half": grouped["mass"].apply(lambda m: int((m > HALF).sum())),
            "sink_heads": grouped["mass"].apply(lambda m: int((m >= SINK_MASS).sum())),
            "uniform": grouped["uniform"].mean(),
        }
    ).reset_index()


@named(REAL_NAME)
def real_finding(layers: pd.DataFrame, config: dict) -> Finding:
    """Attention Sinks Essential's claim carried to a pretrained LM, rule RULE_REAL: in a majority of the layers
    after the first SKIP_LAYERS, the median head puts at least SINK_MASS of its weight on key 0. Null (NULL_REAL):
    a head that spreads its weight evenly, whose first-token mass is the uniform share, under the same rule."""
    key0 = "BOS" if config["adds_bos"] else f"the first text token ({', '.join(config['first_tokens'])})"
    claim = (
        f"A pretrained softmax LM ({config['model']}) puts an attention sink on its first token, key 0 = "
        f"{key0} (Attention Sinks Essential §1-2, §3.5: softmax attention needs a sink to write nothing by "
        f"default): in a "
        f"majority of the layers after the first {SKIP_LAYERS}, the median head puts at least {SINK_MASS:g} "
        f"of its weight on key 0, averaged over queries i >= {config['min_query']}"
    )
    later = layers[layers["layer"] >= SKIP_LAYERS]
    per_layer = ", ".join(f"L{r.layer} {r.median:.2f}" for r in layers.itertuples())
    evidence = (
        f"Median head's first-token mass per layer ({config['documents']} documents x {config['tokens']} "
        f"tokens): {per_layer}. "
    )
    mde = MDE(
        None,
        None,
        "first-token mass",
        f"none applies: the claim has no effect size; the rule reads each "
        f"layer's median head pooled over {config['documents']} documents "
        "against a fixed threshold",
    )
    if later.empty:
        return decide(
            claim,
            rule=RULE_REAL,
            holds=None,
            evidence=evidence,
            mde=mde,
            null=Null(NULL_REAL, None, "no layer to read"),
            precondition=f"the model has only {len(layers)} layers, none after the first {SKIP_LAYERS}",
        )
    sinking = int((later["median"] >= SINK_MASS).sum())
    uniform = float(later["uniform"].mean())
    total = int(later["heads"].sum())
    evidence += (
        f"{sinking} of {len(later)} layers after the first {SKIP_LAYERS} reach {SINK_MASS:g}; there "
        f"{int(later['sink_heads'].sum())} of {total} heads put >= {SINK_MASS:g} and "
        f"{int(later['heads_over_half'].sum())} put > {HALF:g} on key 0, and the largest head reaches "
        f"{SINK_MASS:g} in {int((later['max'] >= SINK_MASS).sum())} of those layers. The "
        f"uniform share over the same queries is {uniform:.3g}, so {SINK_MASS:g} is "
        f"{SINK_MASS / uniform:.0f}x it."
    )
    null = Null(
        NULL_REAL,
        real_sinks(later["uniform"]),
        f"{int((later['uniform'] >= SINK_MASS).sum())} of {len(later)} layers' uniform share reach "
        f"{SINK_MASS:g} (largest {later['uniform'].max():.3g})",
    )
    return decide(
        claim,
        rule=RULE_REAL,
        holds=real_sinks(later["median"]),
        null=null,
        evidence=evidence,
        mde=mde,
        reads={"the later layers' median head": later["median"]},
        null_reads={"the later layers' uniform share": later["uniform"]},
    )


def summarize_real(folder: Path) -> tuple[Finding, Table, Figure, str]:
    """The real-model finding, its table (``table_real_layers``), heat map (``real_first_token_mass``)
    and note, written into ``folder`` from the two files of folder/real only."""
    out, config, folder = folder, read_real_config(folder), folder / REAL
    heads = head_table(pd.read_parquet(folder / REAL_TABLE))
    layers = layer_table(heads)
    io.write_table(out / "table_real_layers", layers)
    grid = heads.pivot(index="layer", columns="head", values="mass").sort_index().to_numpy()
    key0 = "BOS" if config["adds_bos"] else "first text token"
    plot_first_token_mass(
        grid,
        {"median head": layers["median"].to_numpy(), "largest head": layers["max"].to_numpy()},
        layers["uniform"].to_numpy(),
        SINK_MASS,
        SKIP_LAYERS,
        out / "real_first_token_mass",
        f"{config['model']}: softmax weight on key 0 ({key0}), mean over queries i >= {config['min_query']}",
    )
    table = Table(
        "table_real_layers",
        (
            f"{config['model']}, per layer (0-based) over its {config['heads']} heads: mean, median and max "
            f"first-token mass (softmax weight on key 0 averaged over queries i >= {config['min_query']} of "
            f"{config['documents']} documents x {config['tokens']} tokens), the heads above {HALF:g} and at or above "
            f"{SINK_MASS:g}, and the uniform share 1 / (keys attended) averaged over the same queries."
        ),
    )
    figure = Figure(
        "real_first_token_mass",
        (
            f"Left: first-token mass of every head of {config['model']} (rows: layers from 0 at the top; columns: "
            f"heads, 0-based), on a 0-1 colour scale with the value printed in each cell. Right: the median and "
            f"largest head per layer; the dashed line is the sink threshold {SINK_MASS:g}, the dotted one the "
            f"uniform share (the mass of a head that spreads evenly). The shaded layers 0-{SKIP_LAYERS - 1} are "
            "left out of the verdict."
        ),
    )
    note = (
        f"Real-model part: {config['model']} ({config['model_type']}, checkpoint {config['checkpoint']}, "
        f"{config['layers']} layers x {config['heads']} query heads, {config['dtype']} on {config['device']}); "
        f"{config['documents']} documents of generic text (attnlab.tasks.generic_text) x {config['tokens']} "
        f"tokens, one forward each ({config['seconds']:g} s in all). The tokenizer "
        f"{'adds BOS, so key 0 is BOS' if config['adds_bos'] else 'adds no BOS, so key 0 is the first text token'}"
        f" ({', '.join(config['first_tokens'])}). The softmax is redone in float64 from the scores the "
        f"model's own softmax sees (post-softcap, masked keys left out); queries that may not attend key 0 "
        f"(past a sliding window) are left out."
    )
    return real_finding(layers, config), table, figure, note
