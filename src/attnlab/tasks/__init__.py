"""Synthetic tasks and prompt suites (seed 000 App. B, E, AA, AI).

    >>> from attnlab import tasks
    >>> prompts = tasks.build_suite("niah", tokenizer, 200, pad=128)
    >>> tasks.answer_correct(prompts[0], generated_ids)
"""

from .prompts import SUITES, Prompt, Suite, SuiteError, answer_correct, answer_keys, build_suite, max_new_tokens
from .text import CUE_WORDS, generic_text

__all__ = [
    "CUE_WORDS", "SUITES", "Prompt", "Suite", "SuiteError", "answer_correct", "answer_keys", "build_suite", "generic_text",
    "max_new_tokens",
]
