"""``decide`` and the verdict rule's false-positive rate, where studies written against the earlier layout import
them; they live in ``attnlab.findings.verdict``."""

from attnlab.findings.verdict import FPR_MAX, decide, false_positive_rate

__all__ = ["FPR_MAX", "decide", "false_positive_rate"]
