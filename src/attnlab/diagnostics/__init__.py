"""Row-level concentration diagnostics: per-row statistics of attention score rows, streamed.

``row_stats`` gives one record per score row; ``heads`` turns per-row tables into head types.
"""

from .heads import HeadThresholds, head_types
from .rows import RowOptions, row_stats

__all__ = ["HeadThresholds", "RowOptions", "head_types", "row_stats"]
