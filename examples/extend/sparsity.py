"""A study of one's own: how many of 64 keys keep weight under 1.5-entmax, against softmax
(``attnlab study sparsity`` runs it once this module is imported, e.g. from a plugin or a script)."""

from pathlib import Path

import pandas as pd
import torch

from attnlab import io, rowmaps
from attnlab.findings import MDE, Null, decide
from attnlab.report.sections import Section, Table
from attnlab.studies import Study, StudyConfig, register, section

MAPS = ("softmax", "entmax_a1.5")


def compute(cfg: StudyConfig, folder: Path, progress: bool) -> None:
    """Raw results: the support of each map on 256 Gaussian score rows."""
    scores = torch.randn(256, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(cfg.seed))
    support = {name: (rowmaps.get(name)(scores) > 0).sum(-1).tolist() for name in MAPS}
    io.write_table(folder / "support", pd.DataFrame(support))


def summarize(folder: Path) -> Section:
    """Everything the report shows, recomputed from the raw file."""
    median = pd.read_csv(folder / "support.csv").median()
    table = pd.DataFrame({"map": list(MAPS), "median_support": [median[m] for m in MAPS]})
    io.write_table(folder / "median_support", table)
    # the rule, fixed before reading: the median row keeps weight on fewer than all 64 keys; softmax is the null
    finding = decide(
        "alpha-entmax gives exactly zero weight to low-scoring keys (Vasylenko et al. 2025 §2.2)",
        rule="the median support is below 64 keys",
        holds=bool(median["entmax_a1.5"] < 64),
        null=Null("softmax on the same rows", bool(median["softmax"] < 64), f"median support {median['softmax']:g}"),
        mde=MDE(None, None, "keys", "a threshold on exact zeros: no effect size applies"),
        evidence=f"median support {median['entmax_a1.5']:g} of 64 keys; softmax {median['softmax']:g}",
    )
    return section(
        "sparsity",
        folder,
        question="How many of 64 keys keep weight under 1.5-entmax?",
        findings=(finding,),
        tables=(Table("median_support", "Median number of keys with nonzero weight, per map."),),
    )


register(
    Study(
        name="sparsity",
        title="Sparsity of 1.5-entmax",
        source="Vasylenko et al. 2025",
        compute=compute,
        summarize=summarize,
    )
)
