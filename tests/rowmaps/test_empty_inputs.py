"""Every registered row map returns an empty tensor of the input's shape and dtype for inputs with no rows or no keys, as torch.softmax does, on the kernel and torch-ops paths."""

from __future__ import annotations

import pytest
import torch

from attnlab import rowmaps
from attnlab.rowmaps import FAMILIES

pytestmark = pytest.mark.usefixtures("kernel_path")


def _resolved(name, **opts):
    rm = rowmaps.get(name, **opts)
    return rm.with_bias(0.5) if rm.needs_bias else rm


# Every family's example, and every alpha and method that takes its own code path.
MAPS = [_resolved(f.example) for f in FAMILIES.values()] + [
    _resolved(name, **opts)
    for name, opts in [
        ("entmax_a1.1", {}),
        ("entmax_a1.25", {}),
        ("entmax_a2", {}),
        ("entmax_a3", {}),
        ("entmax_a1.5", {"method": "sort"}),
        ("sparsemax", {"method": "sort"}),
        ("relu_p16_b0", {}),
        ("relu_p3_b1", {}),
        ("relu_p2_b-1", {"dead": "uniform"}),
        ("relu_p8_b0.5", {"dead": "softmax"}),
        ("sigmoid_b1.5", {}),
        ("topk_k3", {}),
    ]
]
SHAPES = [(0, 5), (3, 0), (0, 0), (2, 0, 5), (0,)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=["f32", "f64", "bf16"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("rm", MAPS, ids=lambda rm: f"{rm.name} {rm.options}" if rm.options else rm.name)
def test_empty_input_gives_empty_output(rm, shape, dtype):
    z = torch.zeros(shape, dtype=dtype, requires_grad=True)
    out = rm(z, torch.ones(shape, dtype=torch.bool))
    assert out.shape == z.shape and out.dtype == dtype
    out.sum().backward()
    assert z.grad.shape == z.shape


@pytest.mark.parametrize("rm", MAPS, ids=lambda rm: f"{rm.name} {rm.options}" if rm.options else rm.name)
def test_empty_rows_along_another_dim(rm):
    z = torch.zeros(4, 0, 3)
    assert rm(z, dim=1).shape == z.shape and rm(z, dim=0).shape == z.shape


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_map_functions_called_directly(shape):
    z = torch.zeros(shape)
    for alpha in (1.1, 1.25, 1.5, 2.0, 3.0):
        assert rowmaps.entmax(z, alpha).shape == z.shape
    assert rowmaps.relu_power(z, 4, 1.0).shape == z.shape
    assert rowmaps.sigmoid_normalized(z, 0.0).shape == z.shape
