"""attnlab: how concentrated is attention, and what happens when the row map is changed.

The in-memory API on a model and tokenizer already loaded, each returning a pandas DataFrame (``attnlab.api``):
``attnlab.audit``, ``attnlab.substitute``, ``attnlab.heads``, ``attnlab.sinks`` and ``attnlab.row_stats``, and
``attnlab.card``, one checkpoint's card built from them (a ``Card``, ``attnlab.cards``). They are imported on first
use, so that ``import attnlab`` stays light. ``attnlab.Error`` is the base of every error that names what the caller
gave wrong.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnlab.errors import Error

__version__ = "0.1.0"

API = ("audit", "card", "heads", "row_stats", "sinks", "substitute")
__all__ = ["Error", "__version__", *API]

if TYPE_CHECKING:
    from attnlab.api import audit, heads, row_stats, sinks, substitute  # noqa: F401
    from attnlab.cards import card  # noqa: F401


def __getattr__(name: str):
    if name == "card":
        from attnlab.cards import build

        return build.card
    if name in API:
        from attnlab import api

        return getattr(api, name)
    raise AttributeError(f"module 'attnlab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *API})
