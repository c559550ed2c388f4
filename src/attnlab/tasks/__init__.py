"""Synthetic tasks and prompt suites (Polynomial Concentration App. B, E, X, Z, AA, AI; Vasylenko et al. 2025 App. G.1,
H.3; Attention Sinks Essential §3.2).

    >>> from attnlab import tasks
    >>> prompts = tasks.build_suite("niah", tokenizer, 200, pad=128)
    >>> tasks.answer_correct(prompts[0], generated_ids)
    >>> batch = tasks.TASKS["copy"].generate(n=64, length=64, seed=0)      # ids, targets (-100 unscored)
    >>> stream = tasks.TaskStream("mqmtar", length=64, seed=0)              # what attnlab.train reads
"""

from attnlab.tasks import niah, token_suites  # noqa: F401  (each registers its suites on import, in this order)
from attnlab.tasks.scoring import answer_correct, answer_keys, decoy_hit, is_chat, max_new_tokens
from attnlab.tasks.suites import SUITES, Prompt, Suite, SuiteError, build_suite, sizing
from attnlab.tasks.synthetic import (
    TASKS,
    Task,
    TaskBatch,
    TaskError,
    TaskStream,
    VectorBatch,
    exact_match,
    get_task,
    register,
    scored_accuracy,
    show,
    trigger_mask,
)
from attnlab.tasks.text import CUE_WORDS, generic_text, novel_path

__all__ = [
    "CUE_WORDS",
    "SUITES",
    "TASKS",
    "Prompt",
    "Suite",
    "SuiteError",
    "Task",
    "TaskBatch",
    "TaskError",
    "TaskStream",
    "VectorBatch",
    "answer_correct",
    "answer_keys",
    "build_suite",
    "decoy_hit",
    "exact_match",
    "generic_text",
    "get_task",
    "is_chat",
    "max_new_tokens",
    "novel_path",
    "register",
    "scored_accuracy",
    "show",
    "sizing",
    "trigger_mask",
]
