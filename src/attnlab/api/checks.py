"""Argument checks and prompt building for ``attnlab.api.entry``: every bad argument is a TypeError or ValueError
naming the argument as the Python API spells it (``p``, ``n_prompts``), found before any forward pass."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from attnlab import hooks, tasks
from attnlab.analyses.run import Bias, calibration_ids, check_count, check_ids, fits_context, suite_prompts
from attnlab.devices import model_device
from attnlab.errors import ArgumentError, ArgumentTypeError


def as_prompts(
    model,
    tokenizer,
    prompts,
    *,
    n_prompts: int = 20,
    seed: int = 0,
    pad: int | None = None,
    length: int | None = None,
    bos: bool = False,
    chat: bool = False,
) -> list[tasks.Prompt]:
    """A suite name's prompts, or the given texts / token-id lists / ``tasks.Prompt`` as prompts numbered
    from 0 (texts tokenized with the tokenizer's special tokens, led by BOS with ``bos``)."""
    if isinstance(prompts, str):
        return suite_prompts(
            model,
            tokenizer,
            prompts,
            n_prompts,
            seed=seed,
            pad=pad,
            length=length,
            bos=bool(bos),
            chat=bool(chat),
            api=True,
        )
    if not isinstance(prompts, Sequence) or not prompts:
        raise ArgumentTypeError(
            f"prompts takes a suite name ({', '.join(sorted(tasks.SUITES))}) or a non-empty list of "
            f"texts, token-id lists or tasks.Prompt, got {type(prompts).__name__}"
        )
    out = []
    for i, item in enumerate(prompts):
        if isinstance(item, tasks.Prompt):
            out.append(item)
            continue
        if isinstance(item, str):
            ids = list(tokenizer(item, add_special_tokens=True)["input_ids"])
            if bos and getattr(tokenizer, "bos_token_id", None) is not None and ids[:1] != [tokenizer.bos_token_id]:
                ids = [tokenizer.bos_token_id, *ids]
            if not ids:
                raise ArgumentError(f"prompts[{i}] tokenizes to no token")
        else:
            ids = check_ids(item, f"prompts[{i}]", model)
        out.append(tasks.Prompt(tuple(ids), (), (), "custom", i, {}))
    fits_context(model, max(len(p.input_ids) + len(p.answer_ids) for p in out), "prompts")
    return out


def _bias_specs(b) -> list[float | None]:
    """``b`` as a list of finite numbers and None (for "auto"); ValueError naming ``b`` otherwise."""
    items = [b] if isinstance(b, (str, int, float, np.floating, np.integer)) else b
    if not isinstance(items, (list, tuple)) or not items:
        raise ArgumentTypeError(f"b takes a number, 'auto' or a non-empty list of them, got {b!r}")
    values = []
    for item in items:
        if isinstance(item, str) and item == "auto":
            values.append(None)
        elif (
            isinstance(item, (int, float, np.floating, np.integer))
            and not isinstance(item, bool)
            and math.isfinite(item)
        ):
            values.append(float(item))
        else:
            raise ArgumentError(f"b takes finite numbers or 'auto', got {item!r}")
    if len(set(values)) != len(values):
        raise ArgumentError(f"b needs distinct values, got {list(items)}")
    return values


def _label(value: float) -> str:
    """A bias's label as the command spells it ("0", "0.5"), exact where %g would round."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def check_biases(b, b_auto: float | None = None) -> list[float | None]:
    """``b`` as a list of finite numbers and None (for "auto"), ``b_auto`` checked; before any work."""
    if b_auto is not None and (
        isinstance(b_auto, bool) or not isinstance(b_auto, (int, float)) or not math.isfinite(b_auto)
    ):
        raise ArgumentError(f"b_auto takes None or a finite number, got {b_auto!r}")
    return _bias_specs(b)


def biases(
    model, tokenizer, values: list[float | None], b_auto: float | None = None
) -> tuple[list[Bias], float | None]:
    """The biases ``check_biases`` gave, "auto" (None) resolved to ``b_auto``, else calibrated as
    ``analyses.run.biases`` does (Polynomial Concentration App. B/J, on generated generic text); returns
    them and b_auto."""
    if None in values and b_auto is None:
        b_auto = hooks.calibrate_b_auto(model, calibration_ids(model, tokenizer, model_device(model)))
    return [Bias("auto", float(b_auto)) if v is None else Bias(_label(v), v) for v in values], b_auto


def locate(shape: tuple[int, ...], *, layer=None, head=None, query_offset: int = 0) -> dict[str, np.ndarray]:
    """The location columns of ``row_stats``'s rows (C order over ``shape[:-1]``): batch, head, query for
    (batch, heads, queries, keys); head, query for (heads, queries, keys) and query for (queries, keys) when
    ``layer`` or ``head`` is given; a layer column when ``layer`` is given."""
    if layer is not None:
        check_count("layer", layer, 0, api=True)
    check_count("query_offset", query_offset, 0, api=True)
    labelled = layer is not None or head is not None
    ndim = len(shape)
    if ndim == 4 or (ndim == 3 and labelled):
        lead = shape[:-1]
        n_heads = lead[-2]
        if head is None:
            heads = np.arange(n_heads, dtype=np.int64)
        elif isinstance(head, (list, tuple, range, np.ndarray)) and len(head) == n_heads:
            heads = np.array([check_count("head", h, 0, api=True) for h in head], dtype=np.int64)
        else:
            raise ArgumentError(f"head takes {n_heads} head labels (one per head of scores {shape}), got {head!r}")
    elif ndim == 2 and labelled:
        lead = shape[:-1]
        heads = None if head is None else check_count("head", head, 0, api=True)
    elif head is not None:
        raise ArgumentError(
            f"head labels need scores of shape (heads, queries, keys) or (batch, heads, queries, "
            f"keys), or (queries, keys) with one head index; got shape {shape}"
        )
    else:
        return {} if layer is None else {"layer": np.full(math.prod(shape[:-1]), layer, dtype=np.int64)}
    n_rows, n_q = math.prod(lead), lead[-1]
    where: dict[str, np.ndarray] = {}
    if layer is not None:
        where["layer"] = np.full(n_rows, layer, dtype=np.int64)
    if ndim == 4:
        where["batch"] = np.repeat(np.arange(lead[0], dtype=np.int64), lead[1] * n_q)
    if ndim >= 3:
        where["head"] = np.tile(np.repeat(heads, n_q), n_rows // (len(heads) * n_q) if n_rows else 0)
    elif heads is not None:
        where["head"] = np.full(n_rows, heads, dtype=np.int64)
    where["query"] = np.tile(np.arange(query_offset, query_offset + n_q, dtype=np.int64), n_rows // n_q if n_q else 0)
    return where
