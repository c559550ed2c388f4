"""What a claim is and how it is decided, for the studies and the card alike: a ``Finding`` with its rule, null
control and minimum detectable effect (``finding``), the verdict labels, and the decision and false-positive
rate of a rule (``verdict``). Knows nothing of models or files."""

from attnlab.findings.finding import CHECK_VERDICTS, CLAIM_VERDICTS, MDE, VERDICTS, Finding, Null, named
from attnlab.findings.verdict import FPR_MAX, decide, false_positive_rate

__all__ = [
    "CHECK_VERDICTS",
    "CLAIM_VERDICTS",
    "FPR_MAX",
    "MDE",
    "VERDICTS",
    "Finding",
    "Null",
    "named",
    "decide",
    "false_positive_rate",
]
