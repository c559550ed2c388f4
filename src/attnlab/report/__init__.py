"""Figures and reports: rendering only, from tables and arrays the studies and commands hand over."""

from attnlab.report.figures import plot_row_weights

__all__ = ["plot_row_weights"]
