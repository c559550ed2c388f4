"""What loading a checkpoint and converting a GGUF file share: the error that names what to do, and transformers'
quiet mode (one module under both, so neither imports the other's)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from attnlab.errors import Error


class LoadError(Error, ValueError):
    """A checkpoint folder that cannot be loaded; the message says what to do."""


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' own progress bars and warnings off (loading, saving): attnlab's commands print one
    progress bar and, on failure, one line."""
    from transformers.utils import logging

    bars, level = logging.is_progress_bar_enabled(), logging.get_verbosity()
    logging.disable_progress_bar()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(level)
        if bars:
            logging.enable_progress_bar()
