"""The registry parses every family's names and parameters, rejects bad names/options/inputs with clear errors, and handles b=auto and RowMapLayer."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from attnlab import rowmaps
from attnlab.rowmaps import FAMILIES, RowMap, RowMapLayer
from rowmaps.rowmap_refs import assert_close_np, ref_relu_power, ref_sigmoid, ref_softmax

Z = torch.tensor([[0.5, -1.0, 2.0, 0.0, 1.5]], dtype=torch.float64)


@pytest.mark.parametrize("family", list(FAMILIES.values()), ids=[f.example for f in FAMILIES.values()])
def test_every_example_parses_and_runs(family):
    rm = rowmaps.get(family.example)
    assert isinstance(rm, RowMap)
    assert rm.name == family.example
    if rm.needs_bias:
        rm = rm.with_bias(0.5)
    out = rm(Z)
    assert out.shape == Z.shape and out.dtype == Z.dtype and torch.isfinite(out).all()
    if rm.normalized:
        assert abs(out.sum().item() - 1) < 1e-12
    for opt in family.options:
        assert opt in ("method", "dead")


def test_families_have_distinct_examples_and_metadata():
    examples = [f.example for f in FAMILIES.values()]
    assert len(set(examples)) == len(examples)
    for f in FAMILIES.values():
        assert f.formula and f.source and f.params


@pytest.mark.parametrize(
    "name,family,params",
    [
        ("relu_p4_b3.55", "relu_p", {"p": 4.0, "b": 3.55}),
        ("relu_p2_b-1", "relu_p", {"p": 2.0, "b": -1.0}),
        ("relu_p2_b-0.3", "relu_p", {"p": 2.0, "b": -0.3}),
        ("relu_p16_b0", "relu_p", {"p": 16.0, "b": 0.0}),
        ("relu_p1.5_b1e-2", "relu_p", {"p": 1.5, "b": 0.01}),
        ("sigmoid_b1.5", "sigmoid", {"b": 1.5}),
        ("sigmoid_b-2", "sigmoid", {"b": -2.0}),
        ("entmax_a1.5", "entmax", {"alpha": 1.5}),
        ("entmax_a3", "entmax", {"alpha": 3.0}),
        ("sparsemax", "entmax", {"alpha": 2.0}),
        ("softmax_t0.5", "softmax", {"t": 0.5}),
        ("ssmax_s0.43", "ssmax", {"s": 0.43}),
        ("logn_xi2_n8192", "logn", {"xi": 2.0, "n_train": 8192.0}),
        ("topk_k3", "topk", {"k": 3}),
        ("wortsman_p2_sqrtL", "wortsman", {"p": 2.0, "by": "sqrtL"}),
        ("wortsman_p1_L", "wortsman", {"p": 1.0, "by": "L"}),
    ],
)
def test_parameters_parse(name, family, params):
    rm = rowmaps.get(name)
    assert rm.family == family
    for key, value in params.items():
        assert rm.params[key] == value, (key, rm.params)


def test_parsed_parameters_are_used():
    z = Z + 0.9  # keeps some keys alive for b = -1
    for name, p, b in (("relu_p4_b3.55", 4, 3.55), ("relu_p2_b-1", 2, -1.0), ("relu_p1_b0", 1, 0.0)):
        assert_close_np(rowmaps.get(name)(z), ref_relu_power(z, None, p, b), 1e-14, msg=name)


def test_unknown_name_lists_examples():
    with pytest.raises(ValueError) as err:
        rowmaps.get("softmaxx")
    msg = str(err.value)
    assert "softmaxx" in msg
    for f in FAMILIES.values():
        assert f.example in msg


@pytest.mark.parametrize(
    "name",
    [
        "relu_p4",
        "relu_p4_bx",
        "entmax",
        "entmax_a",
        "topk_k-1",
        "wortsman_p2_n",
        "SOFTMAX",
        "softmax ",
        "",
        "relu_p_b1",
    ],
)
def test_malformed_names_rejected(name):
    with pytest.raises(ValueError, match="unknown row map"):
        rowmaps.get(name)


@pytest.mark.parametrize(
    "name,words",
    [
        ("entmax_a0.5", ["alpha", "[1, 4]"]),
        ("entmax_a0.999", ["alpha"]),
        ("softmax_t0", ["temperature"]),
        ("softmax_t-1", ["temperature"]),
        ("ssmax_s0", ["scale"]),
        ("relu_p0_b1", ["degree"]),
        ("relu_p-2_b1", ["degree"]),
        ("wortsman_p0_L", ["degree"]),
        ("topk_k0", ["k"]),
        ("logn_xi2_n1", ["n_train"]),
    ],
)
def test_bad_parameters_name_the_problem(name, words):
    with pytest.raises(ValueError) as err:
        rowmaps.get(name)
    msg = str(err.value)
    assert name in msg
    for w in words:
        assert w in msg, msg


def test_bad_options():
    with pytest.raises(ValueError, match=r"unknown option.*foo"):
        rowmaps.get("softmax", foo=1)
    with pytest.raises(ValueError, match=r"unknown option.*dead"):
        rowmaps.get("entmax_a1.5", dead="zeros")
    with pytest.raises(ValueError, match=r"unknown option.*method"):
        rowmaps.get("relu_p2_b0", method="sort")
    with pytest.raises(ValueError, match="dead"):
        rowmaps.get("relu_p2_b0", dead="bogus")
    with pytest.raises(ValueError, match="method"):
        rowmaps.get("entmax_a1.5", method="bisect")
    with pytest.raises(ValueError, match="sort"):
        rowmaps.get("entmax_a3", method="sort")


def test_name_must_be_string():
    with pytest.raises(TypeError):
        rowmaps.get(1.5)


def test_bias_auto_needs_resolving():
    rm = rowmaps.get("relu_p4_bauto")
    assert rm.needs_bias
    assert not rowmaps.get("relu_p4_b1").needs_bias
    with pytest.raises(ValueError) as err:
        rm(Z)
    assert "resolve" in str(err.value) and "with_bias" in str(err.value)
    resolved = rm.with_bias(3.55)
    assert resolved.name == "relu_p4_b3.55"
    assert not resolved.needs_bias
    assert resolved.params["b"] == pytest.approx(3.55)
    assert_close_np(resolved(Z), ref_relu_power(Z, None, 4, 3.55), 1e-14)

    sig = rowmaps.get("sigmoid_bauto")
    assert sig.needs_bias
    with pytest.raises(ValueError, match="with_bias"):
        sig(Z)
    assert sig.with_bias(-2).name == "sigmoid_b-2"
    assert_close_np(sig.with_bias(-2)(Z), ref_sigmoid(Z, None, -2.0), 1e-14)


def test_with_bias_keeps_options_and_rejects_bad_bias():
    rm = rowmaps.get("relu_p2_bauto", dead="softmax").with_bias(-10)
    assert rm.name == "relu_p2_b-10" and rm.params["dead"] == "softmax"
    assert_close_np(rm(Z), ref_softmax(Z, None), 1e-12)  # every z - 10 < 0: dead row -> softmax
    with pytest.raises(ValueError):
        rowmaps.get("relu_p2_bauto").with_bias(float("nan"))
    with pytest.raises(ValueError):
        rowmaps.get("relu_p2_bauto").with_bias(float("inf"))
    with pytest.raises(ValueError, match="bias"):
        rowmaps.get("softmax").with_bias(1.0)
    # re-biasing an already resolved map
    assert rowmaps.get("relu_p4_b1").with_bias(2.5).name == "relu_p4_b2.5"


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool, torch.complex64])
def test_non_float_scores_rejected(dtype):
    with pytest.raises(TypeError, match="dtype"):
        rowmaps.get("softmax")(torch.zeros(2, 3, dtype=dtype))


def test_non_tensor_scores_rejected():
    with pytest.raises(TypeError):
        rowmaps.get("softmax")([[1.0, 2.0]])


@pytest.mark.parametrize(
    "mask",
    [torch.ones(2, 3, dtype=torch.int64), torch.ones(2, 3), torch.ones(2, 3, dtype=torch.uint8), [[True] * 3] * 2],
)
def test_non_bool_mask_rejected(mask):
    with pytest.raises(TypeError, match="bool"):
        rowmaps.get("softmax")(torch.zeros(2, 3), mask)


@pytest.mark.parametrize("shape", [(2, 4), (3, 3), (2, 2, 3), (4,)])
def test_mismatched_mask_shape_rejected(shape):
    with pytest.raises(ValueError, match="mask shape"):
        rowmaps.get("entmax_a1.5")(torch.zeros(2, 3), torch.ones(shape, dtype=torch.bool))


def test_broadcast_mask_accepted():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(2, 3, 5, generator=g, dtype=torch.float64)
    mask = torch.tensor([True, False, True, True, False])
    out = rowmaps.get("softmax")(z, mask)
    assert_close_np(out, ref_softmax(z, mask.expand(2, 3, 5)), 1e-14)
    out = rowmaps.get("softmax")(z, mask[None, None, :].expand(1, 3, 5))
    assert_close_np(out, ref_softmax(z, mask.expand(2, 3, 5)), 1e-14)


def test_bad_dim_and_scalar_rejected():
    with pytest.raises(ValueError, match="dim"):
        rowmaps.get("softmax")(torch.zeros(2, 3), dim=2)
    with pytest.raises(ValueError, match="dim"):
        rowmaps.get("softmax")(torch.zeros(2, 3), dim=-3)
    with pytest.raises(ValueError):
        rowmaps.get("softmax")(torch.tensor(1.0))


def test_empty_key_axis():
    out = rowmaps.get("entmax_a1.5")(torch.zeros(3, 0))
    assert out.shape == (3, 0)


def test_rowmap_layer():
    layer = RowMapLayer("relu_p4_b1", dead="uniform")
    assert isinstance(layer, torch.nn.Module)
    assert "relu_p4_b1" in repr(layer)
    assert list(layer.parameters()) == []
    g = torch.Generator().manual_seed(3)
    z = torch.randn(2, 3, 6, generator=g, dtype=torch.float64)
    mask = torch.rand(2, 3, 6, generator=g) > 0.3
    assert_close_np(layer(z), ref_relu_power(z, None, 4, 1.0, "uniform"), 1e-14)
    assert_close_np(layer(z, mask), ref_relu_power(z, mask, 4, 1.0, "uniform"), 1e-14)
    seq = torch.nn.Sequential(RowMapLayer("softmax_t0.5"))
    assert_close_np(seq(z), ref_softmax(z, None, lambda L: 2.0), 1e-14)
    with pytest.raises(ValueError):
        RowMapLayer("nope")


def test_rowmap_is_frozen_and_comparable():
    a, b = rowmaps.get("entmax_a1.5"), rowmaps.get("entmax_a1.5")
    assert a == b
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.name = "x"
    assert rowmaps.get("entmax_a1.5", method="sort") != a
    assert np.isclose(a.params["alpha"], 1.5)


def test_user_family_registers_once_and_builds_like_a_builtin():
    @rowmaps.register("cube_test", formula="ReLU(z_i)^3 / sum_j ReLU(z_j)^3", source="a user's notes")
    def _cube(name, match):
        return {}, lambda z: rowmaps.relu_power(z, 3.0, 0.0)

    try:
        rm = rowmaps.get("cube_test")
        assert (rm.family, rm.formula, rm.normalized) == ("cube_test", "ReLU(z_i)^3 / sum_j ReLU(z_j)^3", True)
        assert_close_np(rm(Z), ref_relu_power(Z, None, 3, 0.0), 1e-14)
        assert list(FAMILIES)[-1] == "cube_test"
        with pytest.raises(ValueError, match="already registered"):
            rowmaps.register("cube_test", formula="x", source="y")(_cube)
    finally:
        FAMILIES.unregister("cube_test")
    with pytest.raises(ValueError, match="unknown row map"):
        rowmaps.get("cube_test")


def test_user_family_example_must_match_its_pattern():
    with pytest.raises(ValueError, match="does not match"):
        rowmaps.register("bad_test", pattern=r"bad_(\d+)", example="bad_x", formula="f", source="s")(
            lambda name, m: ({}, None)
        )
    assert "bad_test" not in FAMILIES


def test_built_maps_carry_their_family_text_once():
    for f in FAMILIES.values():
        rm = rowmaps.get(f.example)
        assert rm.formula == f.formula
