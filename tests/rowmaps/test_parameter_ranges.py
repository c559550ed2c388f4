"""Row-map names with non-finite or out-of-range parameters are rejected at parse time with one line naming the parameter, its value and the allowed range; the range ends are accepted and give finite rows."""

from __future__ import annotations

import pytest
import torch

from attnlab import rowmaps

Z = torch.tensor([[0.5, -1.0, 2.0, 0.0, 1.5], [30.0, -40.0, 100.0, 99.0, 0.0]])


@pytest.mark.parametrize(
    "name,words",
    [
        ("relu_p4_b1e999", ["bias b", "inf", "[-10000, 10000]"]),
        ("relu_p4_b1e300", ["bias b", "1e+300", "[-10000, 10000]"]),
        ("relu_p4_b-2e4", ["bias b", "-20000", "[-10000, 10000]"]),
        ("sigmoid_b-1e300", ["bias b", "-1e+300", "[-10000, 10000]"]),
        ("sigmoid_b1e999", ["bias b", "inf"]),
        ("softmax_t1e-40", ["temperature t", "1e-40", "[0.0001, 10000]"]),
        ("softmax_t1e300", ["temperature t", "1e+300", "[0.0001, 10000]"]),
        ("softmax_t1e999", ["temperature t", "inf"]),
        ("ssmax_s1e300", ["scale s", "1e+300", "[0.0001, 10000]"]),
        ("ssmax_s1e-300", ["scale s", "1e-300", "[0.0001, 10000]"]),
        ("logn_xi1e9_n2", ["xi", "1e+09", "[-8, 8]"]),
        ("logn_xi-1e9_n2", ["xi", "-1e+09", "[-8, 8]"]),
        ("logn_xi1e999_n2", ["xi", "inf"]),
        ("logn_xi1_n" + "9" * 400, ["n_train", "inf"]),
        ("relu_p1e300_b1", ["degree p", "1e+300", "(0, 256]"]),
        ("relu_p1e999_b1", ["degree p", "inf"]),
        ("wortsman_p1e300_L", ["degree p", "1e+300", "(0, 256]"]),
        ("entmax_a1e999", ["alpha", "inf"]),
        ("entmax_a50", ["alpha", "50", "[1, 4]", "cannot resolve the threshold"]),
        ("entmax_a4.001", ["alpha", "4.001", "[1, 4]"]),
    ],
)
def test_absurd_parameters_rejected_in_one_line(name, words):
    with pytest.raises(ValueError) as err:
        rowmaps.get(name)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(name + ":"), msg
    for w in words:
        assert w in msg, msg


@pytest.mark.parametrize(
    "name",
    [
        "relu_p4_b1e4",
        "relu_p4_b-1e4",
        "sigmoid_b1e4",
        "sigmoid_b-1e4",
        "softmax_t1e-4",
        "softmax_t1e4",
        "ssmax_s1e-4",
        "ssmax_s1e4",
        "logn_xi8_n2",
        "logn_xi-8_n2",
        "relu_p256_b1",
        "relu_p1e-3_b1",
        "wortsman_p256_L",
        "entmax_a4",
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_range_ends_accepted_and_finite(name, dtype):
    rm = rowmaps.get(name)
    mask = torch.tensor([[True, False, True, True, True]]).expand(Z.shape)
    out = rm(Z.to(dtype), mask)
    assert not out.isnan().any(), (name, out)
    if rm.normalized:
        assert torch.isfinite(out).all()
        dead = rm.family == "relu_p" and rm.params["b"] < -100  # every z + b <= 0: the row attends nowhere
        assert torch.allclose(out.sum(-1), torch.full((2,), 0.0 if dead else 1.0, dtype=dtype)), (name, out)


def test_with_bias_checks_the_range():
    with pytest.raises(ValueError, match=r"bias b = 100000 .*\[-10000, 10000\]"):
        rowmaps.get("relu_p4_bauto").with_bias(1e5)
