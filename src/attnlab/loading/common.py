"""What loading a checkpoint and converting a GGUF file share: the error that names what to do, and transformers'
quiet mode (one module under both, so neither imports the other's)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from attnlab.errors import Error


class LoadError(Error, ValueError):
    """A checkpoint folder that cannot be loaded; the message says what to do."""


def first_line(exc: BaseException) -> str:
    """An exception's first line, else its type's name: transformers' messages run on into tables and hints. A first
    line that ends in a colon is joined to the next (huggingface_hub's validation errors say what failed there)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return f"{lines[0]} {lines[1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]


@contextlib.contextmanager
def refusing(what: str) -> Iterator[None]:
    """What transformers, huggingface_hub, safetensors, torch.load and gguf raise on a hostile file (a type its
    config fields do not allow, a division by a head count of 0, a tensor table they cannot read), as one
    LoadError line ``what: <their first line>``. Only their calls run inside it, so a bug of attnlab keeps its
    traceback."""
    from huggingface_hub.errors import StrictDataclassError
    from safetensors import SafetensorError

    # torch and some models assert on a config value as they build a layer (a padding id outside the vocabulary),
    # and a config can name a quantizer whose package is not installed (ImportError)
    hostile = (OSError, ValueError, KeyError, IndexError, TypeError, ZeroDivisionError, RuntimeError, AssertionError)
    try:
        yield
    except LoadError:
        raise
    except (*hostile, ImportError, SafetensorError, StrictDataclassError) as exc:
        raise LoadError(f"{what}: {first_line(exc)}") from None


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
