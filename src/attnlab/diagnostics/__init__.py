"""Row-level concentration diagnostics: per-row statistics of attention score rows, streamed.

``row_stats`` gives one record per score row; ``heads`` turns per-row tables into head types; ``theory_checks``
measures Vasylenko et al. 2025's non-dispersion results (Lemma 2, Prop. 1, Prop. 3) on synthetic rows.
"""

from attnlab.diagnostics.heads import HeadThresholds, head_types
from attnlab.diagnostics.nondispersion import theory_checks
from attnlab.diagnostics.rows import RowOptions, row_stats

__all__ = ["HeadThresholds", "RowOptions", "head_types", "row_stats", "theory_checks"]
