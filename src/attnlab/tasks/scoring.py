"""How a generation is read against a prompt: how many tokens to generate, the answer key of App. S, and whether
a generation names the answer or a planted decoy (Polynomial Concentration App. E, Z, AA, AI)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from attnlab.tasks.suites import Prompt, SuiteError, _suite

# A chat model answers in a sentence ("The secret word is shell."): its prompts are scored on the first words it
# generates, this many tokens, instead of on the first token.
CHAT_NEW_TOKENS = 16


def max_new_tokens(name: str, chat: bool = False) -> int:
    """Tokens to generate when scoring suite ``name``: 1 for single-token suites, 24 (App. AA) or 56 (App. AI); at
    least ``CHAT_NEW_TOKENS`` for prompts framed by a chat template (``chat``)."""
    own = _suite(name).max_new_tokens
    return max(own, CHAT_NEW_TOKENS) if chat else own


def is_chat(prompt: Prompt) -> bool:
    """Whether ``prompt`` is framed as a user message of a chat template (``build_suite(..., chat=True)``)."""
    return "trail" in prompt.meta


def answer_keys(prompt: Prompt) -> dict[int, int]:
    """Query position -> the key position holding its answer (Polynomial Concentration App. S's answer key).

    Every suite's last input position answers from ``answer_positions[0]``; a prompt without one (literary
    completion) has no answer key. Induction has an answer at every position of the repeat: the token after
    the current token's first occurrence, the planted B of App. H, one segment length back plus one.
    """
    if not prompt.answer_positions:
        return {}
    last = len(prompt.input_ids) - 1
    keys = {last: prompt.answer_positions[0]}
    if prompt.suite == "induction":
        segment, repeat = prompt.meta["segment"], prompt.meta["repeat"]
        end = len(prompt.input_ids) - prompt.meta.get("trail", 0)
        keys.update({q: q - segment + 1 for q in range(end - repeat, end)})
    return keys


def _generated(prompt: Prompt, generated_ids: Any) -> list[int]:
    flat = np.asarray(generated_ids.tolist() if hasattr(generated_ids, "tolist") else list(generated_ids))
    if flat.ndim != 1:
        raise SuiteError(f"generated_ids must be one prompt's 1-D token ids, got shape {flat.shape}")
    return [int(t) for t in flat[: max_new_tokens(prompt.suite, is_chat(prompt))]]


def decoy_hit(prompt: Prompt, generated_ids: Any, tokenizer: Any = None) -> bool | None:
    """Whether a generation names one of the wrong answers the prompt plants on purpose (Polynomial
    Concentration App. Z's decoy tracking): the first token is a decoy's first token (first-token suites), or
    a decoy's text is inside the decoded generation (substring suites). None for a prompt without decoys."""
    if not prompt.meta.get("decoys"):
        return None
    return _names(prompt, generated_ids, prompt.meta["decoy_ids"], tokenizer, "decoy_hit")


def _names(prompt: Prompt, generated_ids: Any, targets: Sequence[Sequence[int]], tokenizer: Any, caller: str) -> bool:
    """Whether a generation names one of ``targets`` (token ids in place) as the prompt's suite scores: its
    first token is a target's first token, or a target, decoded, is inside the decoded generation. A chat-framed
    prompt of a single-token suite is read as a sentence: a target, decoded, as a whole word among its first
    ``CHAT_NEW_TOKENS`` tokens."""
    suite = _suite(prompt.suite)
    ids = _generated(prompt, generated_ids)
    if suite.scoring == "first token" and not is_chat(prompt):
        return bool(ids) and any(ids[0] == t[0] for t in targets)
    if tokenizer is None:
        raise SuiteError(f"{prompt.suite} is scored on decoded text: call {caller}(prompt, generated_ids, tokenizer)")
    said = tokenizer.decode(ids)
    if suite.scoring == "first token":
        words = [tokenizer.decode([t[0]]).strip() for t in targets]
        return any(word and re.search(rf"(?<!\w){re.escape(word)}(?!\w)", said) for word in words)
    return any(tokenizer.decode(list(t)).strip() in said for t in targets)


def answer_correct(prompt: Prompt, generated_ids: Any, tokenizer: Any = None) -> bool:
    """Exact match of a generation (the new token ids only) against the prompt's answer.

    Single-token suites compare the first generated token with ``answer_ids[0]`` (App. E). ``uuid_niah`` and
    ``passkey_niah`` need ``tokenizer``: the planted value, as the tokenizer decodes ``answer_ids``, must be a
    substring of the decoded first ``max_new_tokens(suite)`` tokens (App. AA, AI).
    """
    return _names(prompt, generated_ids, [prompt.answer_ids], tokenizer, "answer_correct")
