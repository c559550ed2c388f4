"""The in-memory entry points on a model and tokenizer already loaded, each returning a pandas DataFrame
(``entry``: ``audit``, ``substitute``, ``heads``, ``sinks``, ``row_stats``), and their argument checks
(``checks``). ``attnlab.card`` builds on them from ``attnlab.cards``; nothing here imports the card."""

from attnlab.api.entry import audit, heads, row_stats, sinks, substitute

__all__ = ["audit", "heads", "row_stats", "sinks", "substitute"]
