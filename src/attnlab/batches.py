"""What every training data stream shares, below both ``tasks`` and ``train``: ``rank_rows``, the rows of a
global batch that each rank takes, and ``DataError``, what a stream raises for a request it cannot serve.
A task stream and a text stream thus split a batch across ranks by one rule, with one error and message."""

from __future__ import annotations

from attnlab.errors import Error


class DataError(Error, ValueError):
    """A corpus, tokenizer or batch request that the data streams cannot serve."""


def rank_rows(batch: int, rank: int, world: int) -> tuple[int, int]:
    """Rows [lo, hi) of a global batch that rank ``rank`` of ``world`` takes: the rule every stream follows,
    so a run on N processes sees the single-process batch."""
    if world < 1 or not 0 <= rank < world:
        raise DataError(f"rank {rank} of world {world}: allowed are world >= 1 and 0 <= rank < world")
    if batch < 1 or batch % world:
        raise DataError(
            f"global batch {batch} is not a positive multiple of world size {world}; allowed: a "
            "batch divisible by the number of ranks"
        )
    rows = batch // world
    return rank * rows, (rank + 1) * rows
