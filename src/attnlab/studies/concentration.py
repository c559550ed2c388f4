"""The ``concentration`` study ("When Does Polynomial Attention Concentrate?", cited as Polynomial
Concentration): when does polynomial attention concentrate like softmax?

A small Llama decoder is trained with softmax on the induction suite (or the user's ``--model`` is
taken as is) and saved as a Hugging Face checkpoint in ``folder/model``; then the checkpoint engines run
on it, each into its own subfolder:

- ``audit`` (§5.2, Tables 1/10/11): prevalence of the unsafe regime S_p >= 1 at p in {2, 4, 8, 16} and
  b in {0, auto}, with the per-row rho, A_act, S_p and p* (Cor. 4.3) kept in ``rows_b*.parquet``;
- ``substitute`` (§5.3, Table 3): the 14 recipes put in place of softmax on every head;
- ``ablate`` (§5.4, App. D/V): the top-, bottom- and random-K heads by median S_p polynomialized.

``summarize`` reads those folders back into the phase plot of per-head median (rho, A_act) against the
boundaries A (1 - rho)^p = 1 (Thm. 4.1: S_p <= A (1 - rho)^p), the lower-bound validation (p >= p*
predicts S_p <= 1), the substitution table, the matched diagnostic (per ReLU cell, the measured-safe
fraction of the rows that answer, over all heads and over the K heads the ablation substituted first,
beside the cell's change in accuracy) and the ablation table, and decides the paper's screen: cells with a
very low measured-safe fraction collapse under substitution.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import string
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from .. import io, tasks
from ..commands import ablate, audit, substitute
from ..commands import heads as head_types
from ..hooks.load import quiet_transformers
from ..report.sections import Figure, Section, Table
from .concentration_findings import finding, iid_prevalence, prevalence_finding, sufficiency_finding
from .runner import Study, StudyConfig, load_config, register, section

P = (2, 4, 8, 16)
B = ("0", "auto")
# Polynomial Concentration §5.3's sweep: ReLU^p at both biases, normalized sigmoid, and Wortsman et al.'s
# unnormalized ReLU^p.
RECIPES = substitute.PAPER_RECIPES
SUITE = "induction"
# Polynomial Concentration App. B/E/AI's diagnostic suites, audited on a pretrained model.
REAL_SUITES = ("niah", "induction", "mqar", "copying", "uuid_niah")
# The matched diagnostic (Polynomial Concentration §5.5, Table 5) reads one row per layer, head and scored prompt:
# the last position, the one that answers.
MATCHED_QUERIES = "last"
# Table 5's top-K column conditions on the fixed causal head set of the ablation; its K = 40 is 8-14% of its
# models' heads, so the largest ablated K within 15% of the heads plays that part here.
CAUSAL_SHARE = 0.15
TRAIN_SEED_OFFSET = 1000  # training prompts come from another seed than the evaluation prompts


@dataclass(frozen=True)
class TrainPlan:
    """The toy model the study trains with softmax on the induction suite: a Llama decoder's shape (layers,
    heads, hidden and FFN width, context) and its training (steps of ``batch`` prompts, AdamW's peak lr)."""

    layers: int
    heads: int
    hidden: int
    ffn: int
    context: int
    steps: int
    batch: int
    lr: float


@dataclass(frozen=True)
class Plan:
    """One budget of the study (Polynomial Concentration §5.2-§5.5, App. H): the prompts' length (``pad``, where
    given: the scored suite's padding instead), the audit's prompts per suite and query stride (``every``), the
    prompts scored per recipe, the ablation's K, random draws and ranking prompts, the audited ``suites`` and
    the scored ``suite``, the head-type prompts, and ``train``: the toy model's (None where a pretrained model
    is audited as given)."""

    length: int
    audit_prompts: int
    every: int
    prompts: int
    k: tuple[int, ...]
    random_draws: int
    rank_prompts: int
    suites: tuple[str, ...]
    suite: str
    heads_prompts: int
    train: TrainPlan | None = None
    pad: int | None = None


# The toy plans audit and score the suite they train on; a pretrained model (REAL) is audited on every
# diagnostic suite and scored on NIAH, as Polynomial Concentration §5.5 scores its matched diagnostic.
BUDGETS: dict[str, Plan] = {
    # ~250 steps take the 2-layer model's answer-position loss from 6.3 to ~0.05 (100% accuracy) in
    # seconds on 2 CPU cores; the engines then dominate.
    "smoke": Plan(train=TrainPlan(layers=2, heads=4, hidden=64, ffn=128, context=256, steps=250, batch=32, lr=3e-3),
                  length=48, audit_prompts=20, every=4, prompts=200, k=(2, 4), random_draws=5, rank_prompts=20,
                  suites=(SUITE,), suite=SUITE, heads_prompts=20),
    # Polynomial Concentration scores 200 prompts per cell (500 in its fresh-seed replication) and ablates K in
    # {5, 10, 20, 40} of a pretrained model's heads.
    "full": Plan(train=TrainPlan(layers=4, heads=8, hidden=256, ffn=1024, context=1024, steps=3000, batch=64,
                                 lr=1e-3),
                 length=256, audit_prompts=100, every=4, prompts=500, k=(5, 10, 20), random_draws=5, rank_prompts=50,
                 suites=(SUITE,), suite=SUITE, heads_prompts=80),
}
REAL: dict[str, Plan] = {
    # Sized for a 135M-270M model on 2 CPU cores: the scored NIAH suite at Polynomial Concentration's pad = 8 (about 130
    # tokens; softmax scored 80% on SmolLM2 and 95% on Gemma 3 there, against 75% and 45% at 256 tokens),
    # the other suites audited at 256 tokens.
    "smoke": Plan(length=256, pad=8, audit_prompts=4, every=16, prompts=20, k=(10, 40), random_draws=3,
                  rank_prompts=4, suites=REAL_SUITES, suite="niah", heads_prompts=8),
    # Polynomial Concentration §5.5: NIAH at pad = 128 (~1500 tokens), 200 prompts per cell, K in
    # {5, 10, 20, 40, 80}, 5 random draws, head types over 80 prompts.
    "full": Plan(length=1024, pad=128, audit_prompts=20, every=8, prompts=200, k=(5, 10, 20, 40, 80),
                 random_draws=5, rank_prompts=20, suites=REAL_SUITES, suite="niah", heads_prompts=80),
}


def plan_for(cfg: StudyConfig) -> Plan:
    """The budget's plan: the toy one, or the pretrained-model one when ``--model`` is given."""
    return (BUDGETS if cfg.model is None else REAL)[cfg.budget]


def _tokenizer():
    """A word-level tokenizer over the task lexicon and the prompt templates, built offline, with BOS."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    from ..tasks import suites as templates
    from ..tasks.text import lexicon

    fixed = " ".join([templates.NIAH_CUE, templates.PASSKEY_CUE, templates.RULER_INTRO, templates.RULER_NEEDLE,
                      templates.RULER_QUESTION])
    words = sorted({w for ws in lexicon().values() for w in ws} | set(re.findall(r"[a-z]+", fixed.lower())))
    vocab = ["<unk>", "<s>", *string.punctuation, *words]
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(vocab)}, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tok.decoder = decoders.WordPiece()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", unk_token="<unk>", pad_token="<unk>")


def _batch(prompts: list[tasks.Prompt]) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and labels, with the loss only where ``tasks.answer_keys`` names an answer (the repeat)."""
    ids = torch.tensor([list(p.input_ids) + list(p.answer_ids) for p in prompts])
    labels = torch.full_like(ids, -100)
    for i, p in enumerate(prompts):
        for q, k in tasks.answer_keys(p).items():
            labels[i, q] = ids[i, k]
    return ids[:, :-1], labels[:, :-1]


def train(plan: Plan, seed: int, out: Path, progress: bool, device: str = "cpu") -> None:
    """Train a softmax Llama on induction prompts and save it with its tokenizer to ``out`` (moved into
    place only when finished, so a folder holding one is complete), with its loss per step in
    ``train_loss.csv``. Not resumable mid-run: a smoke model takes seconds, and a half-trained one is discarded."""
    from transformers import LlamaConfig, LlamaForCausalLM

    spec, tok = plan.train, _tokenizer()
    prompts = tasks.build_suite(SUITE, tok, spec.steps * spec.batch, seed=TRAIN_SEED_OFFSET + seed,
                                length=plan.length)
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=spec.hidden, intermediate_size=spec.ffn,
                         num_hidden_layers=spec.layers, num_attention_heads=spec.heads,
                         num_key_value_heads=spec.heads, max_position_embeddings=spec.context,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.bos_token_id,
                         pad_token_id=tok.pad_token_id, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=spec.lr, total_steps=spec.steps, pct_start=0.1)
    log, start = [], time.time()
    for step in range(spec.steps):
        ids, labels = (t.to(device) for t in _batch(prompts[step * spec.batch:(step + 1) * spec.batch]))
        logits = model(input_ids=ids).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        log.append({"step": step, "loss": loss.item()})
        if progress and (step % 50 == 0 or step == spec.steps - 1):
            print(f"concentration train step {step} loss {loss.item():.3f} ({time.time() - start:.0f}s)", flush=True)
    stage = Path(tempfile.mkdtemp(prefix=".model-", dir=out.parent))
    with quiet_transformers():
        model.cpu().save_pretrained(stage)
        tok.save_pretrained(stage)
    io.write_table(stage / "train_loss", pd.DataFrame(log))
    stage.rename(out)


def model_path(cfg: StudyConfig, folder: Path) -> str:
    """The model the engines load: the user's (a name, GGUF or folder) or the one trained here."""
    return cfg.model if cfg.model is not None else str(folder / "model")


def _done(folder: Path) -> bool:
    return (folder / "config.json").is_file()


def compute(cfg: StudyConfig, folder: Path, progress: bool) -> None:
    plan = plan_for(cfg)
    model = model_path(cfg, folder)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # the full budget is meant for a GPU
    if cfg.model is None and not _done(folder / "model"):
        for stale in folder.glob(".model-*"):
            shutil.rmtree(stale, ignore_errors=True)
        train(plan, cfg.seed, folder / "model", progress, device)
    common = dict(model=str(model), seed=cfg.seed, device=device)
    # The scored suite is audited on the very prompts the sweep scores (the matched diagnostic).
    sized = {s: ({"pad": plan.pad} if s == plan.suite and plan.pad is not None
                 else {"length": plan.length}) for s in plan.suites}
    # Every engine after the first audit reuses its calibrated b_auto: one calibration per study.
    b_auto = None
    for suite in (plan.suite, *(s for s in plan.suites if s != plan.suite)):
        out = folder / "audit" / suite
        if not _done(out):
            audit.run(audit.AuditConfig(**common, **sized[suite], suite=suite, prompts=plan.audit_prompts, p=P,
                                        b=B, queries=f"every:{plan.every}", b_auto=b_auto), out, progress=progress)
        b_auto = json.loads((out / "config.json").read_text())["b_auto"]
    suite = dict(common, **sized[plan.suite], suite=plan.suite, prompts=plan.prompts, b_auto=b_auto)
    if not _done(folder / "audit_matched"):
        audit.run(audit.AuditConfig(**suite, p=P, b=B, queries=MATCHED_QUERIES), folder / "audit_matched",
                  progress=progress)
    if not _done(folder / "substitute"):
        substitute.run(substitute.SubstituteConfig(**suite, recipes=RECIPES), folder / "substitute", progress=progress)
    layers_heads = json.loads((folder / "audit" / plan.suite / "config.json").read_text())
    n_heads = layers_heads["layers"] * layers_heads["heads"]
    if not _done(folder / "ablate"):
        ablate.run(ablate.AblateConfig(**suite, k=tuple(k for k in plan.k if k <= n_heads // 2) or (1,),
                                       random_draws=plan.random_draws, rank_prompts=plan.rank_prompts,
                                       rank_length=plan.length, queries=f"every:{plan.every}"),
                   folder / "ablate", progress=progress)
    if not _done(folder / "heads"):
        head_types.run(head_types.HeadsConfig(**common, prompts=plan.heads_prompts, length=plan.length,
                                              queries=f"every:{plan.every}"), folder / "heads", progress=progress)


# ---- summarize: everything below reads only the folder's files ----

def _rows(audit_folder: Path, b: str, *, answering: bool = False) -> pd.DataFrame:
    """The audit's active rows; ``answering``: only each prompt's last query position (taken over every row,
    so that a head whose last row is dead contributes none rather than an earlier one)."""
    cols = ["layer", "head", "prompt", "query", "status", "rho", "a_act", "p_star",
            *(f"{k}_p{p}" for p in P for k in ("s", "safe", "pred_safe", "safe_eps"))]
    rows = pd.read_parquet(audit_folder / f"rows_b{b}.parquet", columns=cols)
    if answering:
        rows = rows[rows["query"] == rows.groupby("prompt")["query"].transform("max")]
    return rows[rows["status"] == "active"]


def prevalence_table(folder: Path, suites) -> pd.DataFrame:
    """Each audited suite's prevalence lines (Polynomial Concentration Table 1), one block per suite."""
    return pd.concat([pd.read_csv(folder / "audit" / s / "audit.csv").assign(suite=s) for s in suites],
                     ignore_index=True).pipe(lambda t: t[["suite", *t.columns[:-1]]])


def causal_k(ks, n_heads: int) -> int:
    """The K of the fixed causal head set: the largest ablated K within CAUSAL_SHARE of the heads, else the
    smallest ablated K."""
    ks = sorted(int(k) for k in ks)
    within = [k for k in ks if k <= CAUSAL_SHARE * n_heads]
    return within[-1] if within else ks[0]


def matched(rows: dict[str, pd.DataFrame], sub: pd.DataFrame, causal: list[tuple[int, int]]) -> pd.DataFrame:
    """Polynomial Concentration §5.5, Table 5: per ReLU cell (p, b), the measured-safe % of the answering rows
    over every head and over the fixed ``causal`` head set (the ablation's top-K), beside the cell's
    substitution accuracy."""
    by = sub.set_index("recipe")
    base = float(by.loc[substitute.BASELINE, "accuracy %"])
    top = pd.MultiIndex.from_tuples(causal, names=["layer", "head"])
    lines = []
    for p in P:
        for b in B:
            r = rows[b]
            in_top = pd.MultiIndex.from_frame(r[["layer", "head"]]).isin(top)
            cell = by.loc[f"relu_p{p}_b{b}"]
            lines.append({"recipe": f"relu_p{p}_b{b}", "p": p, "b": b, "rows": len(r),
                          "all-head safe %": audit.percent(r[f"safe_p{p}"]),
                          f"top-{len(causal)} safe %": audit.percent(r.loc[in_top, f"safe_p{p}"]),
                          "softmax %": base, "accuracy %": float(cell["accuracy %"]),
                          "lo": float(cell["lo"]), "hi": float(cell["hi"]), "delta pp": float(cell["delta pp"])})
    return pd.DataFrame(lines)


def _notes(cfg: StudyConfig, plan: Plan, folder: Path, audit_cfg: dict[str, Any],
           ks: list[int]) -> list[str]:
    """What a reader needs to weigh the numbers: b_auto, the model and its training, the sizes of the run."""
    notes = [f"b = auto resolves to {audit_cfg['b_auto']:.3f} (Polynomial Concentration App. B calibration on "
             "generic text)."]
    if cfg.model is None:
        spec = plan.train
        loss = pd.read_csv(folder / "model" / "train_loss.csv")["loss"]
        notes.append(f"{cfg.budget} budget: the model is a {spec.layers}-layer x {spec.heads}-head Llama, "
                     f"{spec.hidden} wide, trained here with softmax for {spec.steps} steps on induction prompts "
                     f"of {plan.length} tokens (answer-position loss {loss.iloc[0]:.2f} -> "
                     f"{loss.iloc[-10:].mean():.3f}, mean of the last 10 steps); the Polynomial Concentration paper "
                     "audits pretrained Llama-3 "
                     "(1-8B), Qwen3, Gemma-4 and Pythia checkpoints on prompts up to ~4K tokens.")
    else:
        notes.append(f"Model: {cfg.model} ({audit_cfg['model_type']}, {audit_cfg['layers']} layers x "
                     f"{audit_cfg['heads']} heads), pretrained, run as given in float32. A GGUF's weights are "
                     "dequantized from its 4-bit blocks: the numbers are those of the quantized model, not of its "
                     "bf16 original.")
    size = f"pad {plan.pad}" if plan.pad is not None else f"{plan.length} tokens"
    notes.append(f"Evaluation: {plan.prompts} {plan.suite} prompts ({size}) per recipe and subset "
                 f"(the paper: 200); the other suites at {plan.length} tokens; audit over "
                 f"{plan.audit_prompts} prompts per suite "
                 f"({', '.join(plan.suites)}), a query every {plan.every} tokens and the last; the matched "
                 f"diagnostic over the {plan.prompts} scored prompts' last positions; ablation K in "
                 f"{ks} with {plan.random_draws} random draws, ranked on induction; head types "
                 f"over {plan.heads_prompts} induction prompts (Polynomial Concentration App. H).")
    return notes


def prevalence_null(folder: Path, plan: Plan) -> dict[str, float]:
    """``iid_prevalence`` at the key counts of the active b = 0 rows of every audited suite."""
    keys = pd.concat([pd.read_parquet(folder / "audit" / s / "rows_b0.parquet", columns=["status", "n_keys"])
                      for s in plan.suites])
    return iid_prevalence(keys.loc[keys["status"] == "active", "n_keys"], plan.audit_prompts)


def summarize(folder: Path) -> Section:
    from ..report import plot_concentration as plots

    cfg = load_config(folder)
    plan = plan_for(cfg)
    rows = {b: _rows(folder / "audit" / plan.suite, b) for b in B}
    answering = {b: _rows(folder / "audit_matched", b, answering=True) for b in B}
    audit_cfg = json.loads((folder / "audit" / plan.suite / "config.json").read_text())
    prevalence = prevalence_table(folder, plan.suites)
    sub = pd.read_csv(folder / "substitute" / "substitute.csv")
    abl = pd.read_csv(folder / "ablate" / "ablate.csv")
    types = pd.read_csv(folder / "heads" / "types.csv")
    k = causal_k(abl["k"], audit_cfg["layers"] * audit_cfg["heads"])
    causal = ablate.subsets(pd.read_csv(folder / "ablate" / "ranking.csv"), k, 0)[0][2]
    valid = audit.bound_validation(rows, P)
    heads, diag = audit.head_medians(rows, P), matched(answering, sub, causal)
    for stem, table in (("prevalence", prevalence), ("head_medians", heads), ("bound_validation", valid),
                        ("substitution", sub), ("matched", diag), ("ablation", abl), ("head_types", types)):
        io.write_table(folder / stem, table)
    plots.plot_phase(heads, P, folder / "phase")
    plots.plot_p_star({b: r["p_star"].to_numpy(dtype=float) for b, r in rows.items()}, P, folder / "p_star")
    plots.plot_matched(diag, k, folder / "matched")
    plots.plot_substitution(sub, folder / "substitution")

    base = float(sub.set_index("recipe").loc[substitute.BASELINE, "accuracy %"])
    warning = substitute.baseline_warning(base, plan.suite)
    warnings = () if warning is None else (warning,)
    notes = _notes(cfg, plan, folder, audit_cfg, sorted(set(abl["k"])))
    return section(
        "concentration", folder,
        question="How often do a softmax model's attention rows sit in the regime where ReLU^p attention cannot "
                 "concentrate (S_p >= 1), does the bound A (1 - rho)^p predict it, and does putting polynomial maps "
                 "in place of softmax break the model where rows are unsafe?",
        findings=(*([prevalence_finding(prevalence, prevalence_null(folder, plan))] if cfg.model is not None
                    else []), finding(diag, plan.prompts), sufficiency_finding(diag, plan.prompts)),
        tables=(Table("prevalence", "Audit (Polynomial Concentration Table 1): per suite, b and p, the unsafe % of "
                                    "active rows with "
                                    "its Wilson 95% interval and the medians of rho, A_act and S_p."),
                Table("bound_validation", "Lower-bound validation: rows predicted safe (p >= p*) vs measured safe "
                                          "(S_p < 1), named as Polynomial Concentration Table 8 names "
                                          "them: FN would violate the bound, FP are its conservatism."),
                Table("substitution", "Substitution sweep (Polynomial Concentration Table 3): exact-match accuracy % "
                                      "of each recipe "
                                      "on every head, Wilson 95% interval, change from softmax in pp."),
                Table("matched", f"Matched diagnostic (Polynomial Concentration Table 5): per ReLU cell, the "
                                 f"measured-safe % (S_p < 1) of the rows that answer (each scored prompt's last "
                                 f"position, one row per head; 'rows' counts the active ones) over all heads and over "
                                 f"the fixed causal set, the top-{k} heads the ablation substituted; beside the "
                                 f"cell's accuracy."),
                Table("ablation", "Group head ablation (relu_p2_bauto on K heads): change in accuracy for top-, "
                                  "bottom- and random-K; decisive when top-K is worse than every random draw."),
                Table("head_types", "Head types (Polynomial Concentration App. H): heads passing the sink, induction "
                                    "or local test, a head counted under every test it passes (diffuse: none); "
                                    "per-head features, labels and App. H's first-match type in heads/heads.csv."),
                Table("head_medians", "Per b and head: median rho and A_act over active rows, measured-safe % per p.")),
        figures=(Figure("phase", "Phase plot: each point is one head's median (rho, A_act) over active rows, one "
                                 "panel per b; the curves are the boundaries A (1 - rho)^p = 1 (legend below). A "
                                 "row above the p curve can have S_p >= 1 (unsafe at p); a row below it is "
                                 "guaranteed safe, so a head whose median sits above the curve has many rows at risk."),
                 Figure("p_star", "Histogram of p* = log A / log(1/(1 - rho)) over active rows (log2 axis), per b; "
                                  "rows left of a dashed p line are predicted safe at that p. Rows at p* = 0 and "
                                  "p* = inf, off a log axis, are counted in the panel title."),
                 Figure("matched", f"Matched diagnostic: per ReLU cell, accuracy % under substitution (Wilson "
                                   f"interval) against the measured-safe % of the answering rows over all heads "
                                   f"(circle) and over the ablation's top-{k} heads (cross, joined by a line); one "
                                   "colour per p, two cells (b = 0, auto) each. The dashed line is softmax. The "
                                   "claim predicts points near 0% safe at the bottom."),
                 Figure("substitution", "Accuracy % of every recipe with Wilson 95% intervals; the dashed line is "
                                        "softmax.")),
        notes=tuple(notes), warnings=warnings)


def model_row(folder: Path) -> dict[str, Any]:
    """One model's line of the cross-model table (Polynomial Concentration Table 1's layout: one row per model),
    read from
    a summarized study folder."""
    cfg = load_config(folder)
    plan = plan_for(cfg)
    audit_cfg = json.loads((folder / "audit" / plan.suite / "config.json").read_text())
    prevalence = pd.read_csv(folder / "prevalence.csv")
    cells = prevalence[(prevalence["p"] == 2) & (prevalence["b"].astype(str) == "0")].set_index("suite")
    sub = pd.read_csv(folder / "substitution.csv").set_index("recipe")
    recipes = sub.drop(index=substitute.BASELINE)
    best = recipes["accuracy %"].idxmax()
    findings = json.loads((folder / "section.json").read_text())["findings"]
    verdicts = {f["claim"].split(":")[0]: f["verdict"] for f in findings}
    return {"model": cfg.model or "trained here", "type": audit_cfg["model_type"],
            "layers x heads": f"{audit_cfg['layers']} x {audit_cfg['heads']}", "b_auto": audit_cfg["b_auto"],
            **{f"{suite} unsafe % (p2, b0)": float(cells.loc[suite, "unsafe %"]) for suite in plan.suites},
            f"softmax % ({plan.suite})": float(sub.loc[substitute.BASELINE, "accuracy %"]),
            "best recipe": best, "best recipe %": float(recipes.loc[best, "accuracy %"]),
            **{f"verdict: {claim}": verdict for claim, verdict in verdicts.items()}}


def compare(folders: list[Path], into: Path) -> Section | None:
    """The cross-model table over the folders made with ``--model`` (one row per model), or None when
    fewer than two are."""
    given = [f for f in folders if load_config(f).model is not None]
    if len(given) < 2:
        return None
    table = pd.DataFrame([model_row(f) for f in given])
    io.write_table(into / "models", table)
    command = shlex.join(["attnlab", "report", *map(str, given)])
    return Section(
        study="concentration", title="Across models: polynomial-unsafe prevalence and substitution",
        source=STUDY.source, command=command,
        question="Do the pretrained models agree: how unsafe are their rows on each suite, and does any recipe "
                 "replace softmax?",
        tables=(Table("models", "One row per model (Polynomial Concentration Table 1's layout): unsafe % of active "
                                "rows at p = 2, "
                                "b = 0 per suite, softmax's and the best recipe's accuracy, and each finding's "
                                "verdict; every cell is read from that model's study folder."),),
        notes=tuple(f"{row['model']}: {folder}" for row, folder in zip(table.to_dict("records"), given)))


STUDY = register(Study(
    name="concentration", title="When does polynomial attention concentrate? Audit, substitution and ablation",
    source="Polynomial Concentration",
    compute=compute, summarize=summarize, compare=compare, takes_model=True))
