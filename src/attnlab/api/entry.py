"""In-memory entry points on model objects: ``audit``, ``substitute``, ``heads``, ``sinks`` and ``row_stats``.

Each takes a Hugging Face causal LM and its tokenizer already in memory (on whatever device the model is on)
and returns a pandas DataFrame; nothing is read from or written to disk. The ``attnlab`` commands of the
same names run the very same reading and scoring code (``analyses.audit.read_audit``,
``analyses.substitute.substitution``, ``analyses.heads.read_heads``) and only add the files, so a row of
``attnlab.audit`` equals, value for value, the row the command writes to its rows_b<label>.parquet.

    >>> import attnlab
    >>> rows = attnlab.audit(model, tokenizer, "niah", n_prompts=4, b=(0.0, "auto"))
    >>> attnlab.diagnostics.stats.aggregate(rows[rows["b"] == 0], fractions=["safe_p4"], medians=["s_p4"])

Bad arguments raise TypeError or ValueError naming the argument and what it takes, before any forward.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from attnlab import rowmaps, tasks
from attnlab.analyses.audit import TARGETS, read_audit
from attnlab.analyses.heads import RULES, SUITE, classify_heads, read_heads
from attnlab.analyses.readout import FLAGS, check_queries
from attnlab.analyses.run import check_count, check_model, check_tokenizer, evaluating, recipe_b_auto, suite_prompts
from attnlab.analyses.sinks import MIN_QUERY, first_token_mass, head_table, sink_documents
from attnlab.analyses.substitute import expand_recipes, substitution
from attnlab.api.checks import as_prompts, biases, check_biases, locate
from attnlab.devices import model_device
from attnlab.diagnostics import rows as _rows
from attnlab.diagnostics.stream import RowStatsCollector
from attnlab.errors import ArgumentError, ArgumentTypeError
from attnlab.site import DEFAULT_BLOCK

__all__ = ["audit", "heads", "row_stats", "sinks", "substitute"]


def _queries(queries) -> str:
    try:
        return check_queries(queries)
    except ValueError:
        raise ArgumentError(f"queries takes 'last', 'all' or 'every:N' with N >= 1, got {queries!r}") from None


def _degrees(p) -> tuple[float, ...]:
    p = tuple(p) if isinstance(p, (list, tuple, range, np.ndarray)) else (p,)
    good = all(isinstance(q, (int, float)) and not isinstance(q, bool) and math.isfinite(q) and q > 0 for q in p)
    if not p or not good or len({f"{q:g}" for q in p}) != len(p):
        raise ArgumentError(f"p takes one or more distinct finite degrees > 0, got {p!r}")
    return tuple(float(q) if isinstance(q, float) else q for q in p)


def audit(
    model,
    tokenizer,
    prompts="niah",
    *,
    n_prompts: int = 20,
    seed: int = 0,
    pad: int | None = None,
    length: int | None = None,
    p=(2, 4, 8, 16),
    b=(0.0,),
    queries: str = "every:16",
    target: str = "argmax",
    tau: float | None = None,
    sigmoid: bool = False,
    b_auto: float | None = None,
    bos: bool = False,
    chat: bool = False,
    block: int = DEFAULT_BLOCK,
    progress: bool = False,
) -> pd.DataFrame:
    """Per-row concentration diagnostics of a model's attention on a prompt suite, in memory
    (Polynomial Concentration §5.2, Tables 1/10/11; gap counting of Hayase & Karakida 2026 §4 alongside).

    One forward per prompt; every layer's pre-map score rows that ``queries`` chooses are reduced to
    ``diagnostics.row_stats`` records at each bias, never storing an attention map. The rows are those the
    ``attnlab audit`` command writes to rows_b<label>.parquet, value for value.

    Args:
        model: a transformers causal LM (e.g. LlamaForCausalLM, Qwen2ForCausalLM), on any device.
        tokenizer: its Hugging Face tokenizer.
        prompts: a suite name of ``attnlab.tasks.SUITES`` (built with ``n_prompts``, ``seed``, ``pad``,
            ``length``, ``bos``, ``chat``), or a list of texts, token-id lists or ``tasks.Prompt``.
        p: degrees of S_p (§4). b: a bias, "auto" (b_auto, the 5%-mass calibration of App. B/J, on generated
            generic text unless ``b_auto`` gives it) or a list of them.
        queries: "last", "all" or "every:N" (the rows that see N, 2N, ... keys, and the last).
        target: "argmax", or "answer" to read suite rows against their planted answer key only (App. S).
        tau: cap of r = clamp(z + b, 0, tau) (§3). sigmoid: add S_sigma (App. T).
        block: query rows per score block. progress: show a progress bar.

    Returns:
        One row per layer, head, prompt, read query and bias: columns layer, head, prompt (index into the
        prompts), query (position), b (the bias value), answer_key, then ``row_stats``'s columns (status,
        s_p<p>, p_star, entropy, sink_mass, lambda_n, ...). ``attrs`` holds b_auto and the biases by label.
        ``diagnostics.stats.aggregate`` reads it as it is (filter one b first).
    """
    check_model(model)
    check_tokenizer(tokenizer)
    p, queries = _degrees(p), _queries(queries)
    if target not in TARGETS:
        raise ArgumentError(f"target takes {' or '.join(map(repr, TARGETS))}, got {target!r}")
    if tau is not None and not (isinstance(tau, (int, float)) and math.isfinite(tau) and tau > 0):
        raise ArgumentError(f"tau takes None or a finite number > 0, got {tau!r}")
    check_count("block", block, api=True)
    bias_values = check_biases(b, b_auto)
    prompts = as_prompts(
        model, tokenizer, prompts, n_prompts=n_prompts, seed=seed, pad=pad, length=length, bos=bos, chat=chat
    )
    if target == "answer" and not any(tasks.answer_keys(q) for q in prompts):
        raise ArgumentError("target='answer' needs prompts with planted answers (a suite name); these have none")
    with evaluating(model):
        bias_list, b_auto = biases(model, tokenizer, bias_values, b_auto)
        frames = read_audit(
            model,
            prompts,
            bias_list,
            lambda label, opt: RowStatsCollector(opt, flags=FLAGS),
            p=p,
            queries=queries,
            target=target,
            tau=tau,
            sigmoid=bool(sigmoid),
            block=block,
            progress=progress,
        )
    parts = []
    for bias in bias_list:
        frame = frames[f"b{bias.label}"].copy()
        frame.insert(4, "b", float(bias.value))
        parts.append(frame)
    rows = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    rows.attrs.update(b_auto=b_auto, biases={bias.label: bias.value for bias in bias_list})
    return rows


def substitute(
    model,
    tokenizer,
    recipes,
    prompts="niah",
    *,
    n_prompts: int = 20,
    seed: int = 0,
    pad: int | None = None,
    length: int | None = None,
    b_auto: float | None = None,
    bos: bool = False,
    chat: bool = False,
    answers: bool = False,
    progress: bool = False,
):
    """Zero-shot substitution of softmax by other row maps on every head, scored by exact match of the
    greedy continuation (Polynomial Concentration §5.3, Tables 2-3), in memory.

    Args:
        model, tokenizer: a transformers causal LM on any device and its tokenizer.
        recipes: a row-map name (``relu_p4_bauto``, ``sigmoid_b0``, ``wortsman_p2_L``, ``entmax_a1.5`` ...),
            "paper" for the paper's 14 recipes, or a list of them. softmax is always scored first.
        prompts: a suite name of ``attnlab.tasks.SUITES`` or a list of ``tasks.Prompt`` (they carry answers).
        n_prompts, seed, pad, length, bos, chat: how the suite is built (``tasks.build_suite``).
        b_auto: the bias of the ``_bauto`` recipes; calibrated as App. B/J when None and one needs it.
        answers: also return the per-prompt answers.

    Returns:
        The accuracy table the ``attnlab substitute`` command writes (recipe, map, correct, n, accuracy %,
        Wilson lo/hi, delta pp from softmax; decoy counts on decoy suites), ``attrs`` holding b_auto and the
        resolved maps; with ``answers``, (table, answers) where answers has one row per recipe and prompt.
    """
    check_model(model)
    check_tokenizer(tokenizer)
    names = (recipes,) if isinstance(recipes, str) else recipes
    if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) for n in names):
        raise ArgumentTypeError(f"recipes takes a row-map name or a non-empty list of them, got {recipes!r}")
    names = expand_recipes(tuple(names))
    for name in names:
        rowmaps.get(name)  # ValueError naming the unknown map and the known ones
    if len(set(names)) != len(names):
        raise ArgumentError(f"recipes has repeated names: {list(names)}")
    if b_auto is not None and not (isinstance(b_auto, (int, float)) and math.isfinite(b_auto)):
        raise ArgumentError(f"b_auto takes None or a finite number, got {b_auto!r}")
    if not isinstance(prompts, str) and not all(isinstance(q, tasks.Prompt) for q in prompts):
        raise ArgumentTypeError(
            "prompts takes a suite name or a list of tasks.Prompt: substitution scores answers, "
            "which plain texts do not carry"
        )
    built = as_prompts(
        model, tokenizer, prompts, n_prompts=n_prompts, seed=seed, pad=pad, length=length, bos=bos, chat=chat
    )
    suite = prompts if isinstance(prompts, str) else built[0].suite
    with evaluating(model):
        b_auto = recipe_b_auto(model, tokenizer, names, model_device(model), b_auto)
        records, table, resolved = substitution(model, tokenizer, built, suite, names, b_auto, progress=progress)
    table.attrs.update(b_auto=b_auto, resolved=resolved)
    return (table, records) if answers else table


def heads(
    model,
    tokenizer,
    *,
    n_prompts: int = 80,
    length: int = 1024,
    seed: int = 0,
    queries: str = "every:16",
    rule: str = "labels",
    bos: bool = False,
    counts: bool = False,
    block: int = DEFAULT_BLOCK,
    progress: bool = False,
):
    """The sink / induction / local / diffuse type of every head from induction prompts
    (Polynomial Concentration App. H), in memory; as the ``attnlab heads`` command.

    Args:
        model, tokenizer: a transformers causal LM on any device and its tokenizer.
        n_prompts, length, seed, bos: the induction prompts (``tasks.build_suite("induction", ...)``).
        queries: "last", "all" or "every:N", the rows read.
        rule: "labels" (a head carries every type whose test holds) or "paper" (the first that holds).
        counts: also return the heads per type.

    Returns:
        One row per (layer, head): its features (induction, entropy, locality, sink), labels and head_type,
        as heads.csv; with ``counts``, (that table, heads per type as types.csv).
    """
    check_model(model)
    check_tokenizer(tokenizer)
    queries = _queries(queries)
    if rule not in RULES:
        raise ArgumentError(f"rule takes {' or '.join(map(repr, RULES))}, got {rule!r}")
    check_count("block", block, api=True)
    prompts = suite_prompts(model, tokenizer, SUITE, n_prompts, seed=seed, length=length, bos=bool(bos), api=True)
    with evaluating(model):
        rows = read_heads(
            model,
            prompts,
            lambda opt: RowStatsCollector(opt, flags=FLAGS),
            queries=queries,
            block=block,
            progress=progress,
        )["heads"]
    types, table = classify_heads(rows, rule=rule)
    return (types, table) if counts else types


def sinks(
    model,
    tokenizer,
    texts=None,
    *,
    n_documents: int = 4,
    tokens: int = 256,
    seed: int = 0,
    min_query: int = MIN_QUERY,
    per_document: bool = False,
) -> pd.DataFrame:
    """First-token mass of every head: the softmax weight on key 0 averaged over the queries i >=
    ``min_query`` that may attend it, beside the uniform share 1 / (keys attended) over the same queries
    (Attention Sinks Essential §4's sink measure, §1-2 and §3.5's claim), as the sinks study's real-model
    part measures it.

    Args:
        model, tokenizer: a transformers causal LM on any device and its tokenizer.
        texts: documents, each a text (tokenized with the tokenizer's special tokens, so key 0 is BOS where
            it adds one) or a token-id list; None: ``n_documents`` documents of generic text of ``tokens``
            tokens (seed ``seed``), the study's own.
        min_query: the first query position counted; every document must be longer.
        per_document: return one row per document, layer and head instead of pooling over documents.

    Returns:
        One row per (layer, head), 0-based: mass and uniform pooled over documents (weighted by their query
        counts), queries, and ratio = mass / uniform; with ``per_document`` the study's raw table
        (document, layer, head, queries, mass, uniform).
    """
    check_model(model)
    check_tokenizer(tokenizer)
    check_count("min_query", min_query, 0, api=True)
    docs = sink_documents(model, tokenizer, texts, n_documents=n_documents, tokens=tokens, seed=seed)
    short = [d for d, ids in enumerate(docs) if len(ids) <= min_query]
    if short:
        raise ArgumentError(
            f"texts {short} have no query at position >= min_query = {min_query}; pass longer "
            "texts or a smaller min_query"
        )
    with evaluating(model):
        raw = first_token_mass(model, docs, min_query)
    return raw if per_document else head_table(raw)


def row_stats(
    scores, mask=None, *, layer: int | None = None, head=None, query_offset: int = 0, **options
) -> pd.DataFrame:
    """``diagnostics.row_stats`` with the location of every row
    (Polynomial Concentration §3-4 and App. B's row layout; Hayase & Karakida 2026 §4 for the gap columns).

    Args:
        scores: pre-map scores, keys last: (batch, heads, queries, keys) gives batch, head and query columns;
            (heads, queries, keys) gives head and query columns when ``layer`` or ``head`` is given;
            (queries, keys) gives a query column when ``layer`` or ``head`` is given.
        mask: bool, True where a key may be attended, broadcasting to ``scores``.
        layer: a layer index, added as a ``layer`` column.
        head: the labels of the head axis (a list of ints, one per head), or for (queries, keys) scores
            the single head's index; default 0..H-1.
        query_offset: the absolute position of the first query row.
        **options: ``diagnostics.row_stats``'s keywords (p, b, tau, target, eps, beta, sink, rowmap,
            sigmoid, r, gamma).

    Returns:
        One record per score row in C order: the location columns (layer, batch, head, query; those that
        apply) first, then every ``diagnostics.row_stats`` column.
    """
    if not isinstance(scores, (torch.Tensor, np.ndarray)):
        raise ArgumentTypeError(f"scores takes a tensor or array (..., keys), got {type(scores).__name__}")
    where = locate(tuple(scores.shape), layer=layer, head=head, query_offset=query_offset)
    frame = _rows.row_stats(scores, mask, **options)
    return pd.concat([pd.DataFrame(where), frame], axis=1) if where else frame
