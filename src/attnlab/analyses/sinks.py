"""The first-token mass of a model's heads: the measurement of ``attnlab.sinks`` and of the sinks study's
real-model part (``studies.sinks.real``), Attention Sinks Essential §4's sink measure on a pretrained model.

One forward per document; an observer at every layer's attention site redoes the softmax in float64 from the
pre-map scores and sums, per head, the weight on key 0 over the queries i >= ``min_query`` that may attend it,
beside the uniform share 1 / (keys attended) over the same queries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from attnlab import hooks, tasks
from attnlab.analyses.run import RunError, check_count, check_ids, context_length, fits_context
from attnlab.errors import ArgumentError, ArgumentTypeError
from attnlab.site import ScoreBlock

# Queries before this 0-based position are left out: there the uniform share 1/(i+1) is itself large,
# so a high weight on key 0 says nothing about a sink.
MIN_QUERY = 8

DOC_SEED = 4_004_000  # any fixed seed; generic_text's stream is apart from every suite's and b_auto's


def first_key_sums(block: ScoreBlock, min_query: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per head of one score block, over its queries at positions >= ``min_query`` whose row may attend
    key 0: the summed softmax weight on key 0, the summed uniform share 1 / (allowed keys) and the count
    (three float64 (heads,) tensors, summed over the batch too). Attention Sinks Essential §4 measures a sink as the
    weight on the first position; the softmax is redone in float64 over the allowed keys only, from the
    very scores the model's own softmax sees."""
    z = block.scores.double()
    allowed = block.allowed.expand_as(z)
    w0 = torch.exp(z[..., 0] - torch.logsumexp(z.masked_fill(~allowed, -math.inf), dim=-1))
    positions = torch.arange(block.scores.shape[-2], device=z.device) + block.first_position
    counted = allowed[..., 0] & (positions >= min_query)
    uniform = 1.0 / allowed.sum(-1).clamp(min=1).double()
    return ((w0 * counted).sum((0, 2)), (uniform * counted).sum((0, 2)), counted.sum((0, 2)).double())


@torch.no_grad()
def first_token_mass(model, documents: list[list[int]], min_query: int = MIN_QUERY) -> pd.DataFrame:
    """One row per (document, layer, head): the first-token mass (mean softmax weight on key 0 over the
    queries i >= ``min_query`` that may attend it; Attention Sinks Essential §4's sink measure on a pretrained
    model), the
    uniform share 1 / (allowed keys) averaged over the same queries, and their count."""
    short = [d for d, ids in enumerate(documents) if len(ids) <= min_query]
    if short:
        raise RunError(f"documents {short} have no query at position >= {min_query}")
    device = next(model.parameters()).device
    rows = []
    for d, ids in enumerate(documents):
        sums: dict[int, list[torch.Tensor]] = {}

        def observe(block: ScoreBlock, sums: dict[int, list[torch.Tensor]] = sums) -> None:
            parts = first_key_sums(block, min_query)
            seen = sums.get(block.layer)
            sums[block.layer] = list(parts) if seen is None else [a + b for a, b in zip(seen, parts, strict=True)]

        with hooks.observed(model, observe):
            model(torch.tensor([ids], device=device))
        for layer in sorted(sums):
            mass, uniform, count = (t.cpu().numpy() for t in sums[layer])
            # a sliding window past which no counted query sees key 0 leaves the head with no measure (NaN)
            shares = np.divide([mass, uniform], count, out=np.full((2, len(mass)), np.nan), where=count > 0)
            for head in range(len(mass)):
                rows.append((d, layer, head, int(count[head]), shares[0, head], shares[1, head]))
    return pd.DataFrame(rows, columns=["document", "layer", "head", "queries", "mass", "uniform"])


def documents(tokenizer, n: int, tokens: int, seed: int) -> list[list[int]]:
    """``n`` documents of generic text, tokenized with the tokenizer's special tokens, cut to ``tokens``."""
    docs = []
    for d in range(n):
        # every word is at least one token, so ``tokens`` words always fill the document
        text = tasks.generic_text(tokens, seed=DOC_SEED + 1000 * seed + d)
        ids = tokenizer(text, add_special_tokens=True)["input_ids"]
        if len(ids) < tokens:
            raise RunError(f"the tokenizer turned {tokens} words into only {len(ids)} tokens")
        docs.append(ids[:tokens])
    return docs


def head_table(raw: pd.DataFrame) -> pd.DataFrame:
    """Per (layer, head): the first-token mass and the uniform share pooled over documents (weighted by
    their query counts), and mass / uniform."""
    weighted = raw.assign(mass=raw["mass"] * raw["queries"], uniform=raw["uniform"] * raw["queries"])
    table = weighted.groupby(["layer", "head"], sort=True)[["mass", "uniform", "queries"]].sum().reset_index()
    table["mass"] /= table["queries"]
    table["uniform"] /= table["queries"]
    table["ratio"] = table["mass"] / table["uniform"]
    return table


def sink_documents(
    model, tokenizer, texts, *, n_documents: int = 4, tokens: int = 256, seed: int = 0
) -> list[list[int]]:
    """The token ids ``attnlab.sinks`` reads: ``texts`` (texts, tokenized with the tokenizer's special tokens,
    or token-id lists), or with None ``n_documents`` documents of generic text of ``tokens`` tokens (``documents``,
    cut to the model's context); ValueError or TypeError naming the argument otherwise."""
    if texts is None:
        check_count("n_documents", n_documents, api=True)
        check_count("tokens", tokens, 2, api=True)
        check_count("seed", seed, 0, api=True)
        try:
            return documents(tokenizer, n_documents, min(tokens, context_length(model) or tokens), seed)
        except RunError as exc:
            raise ArgumentError(f"tokens: {exc}") from None
    if isinstance(texts, str) or not isinstance(texts, Sequence) or not texts:
        raise ArgumentTypeError(
            f"texts takes a non-empty list of texts or token-id lists (or None), got {type(texts).__name__}"
        )
    docs = []
    for i, text in enumerate(texts):
        if isinstance(text, str):
            docs.append(list(tokenizer(text, add_special_tokens=True)["input_ids"]))
        else:
            docs.append(check_ids(text, f"texts[{i}]", model))
    fits_context(model, max(len(d) for d in docs), "texts")
    return docs
