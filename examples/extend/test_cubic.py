"""cubic is ReLU(z)^3 / sum_j ReLU(z_j)^3, written out by hand, masked keys included."""

import torch

import cubic  # noqa: F401  (registers the map)
from attnlab import rowmaps


def test_cubic_matches_its_formula():
    z = torch.tensor([[1.0, -2.0, 0.5, 2.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True, True, False]])
    r = z.clamp_min(0) ** 3 * mask
    torch.testing.assert_close(rowmaps.get("cubic")(z, mask), r / r.sum())
