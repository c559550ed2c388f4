"""Entropy (softmax's log-free shortcut and the xlogy sum alike), support, max weight, top-two gap, sink index and
key mass equal per-row loops, on masked rows, at small and large inverse temperatures, for every normalized map."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab import rowmaps
from attnlab.diagnostics.dispersion import dispersion, key_mass, normalized_entropy, sink_index, weights
from diagnostics.row_refs import dispersion_row, sink_key, softmax_row


def _rows(seed, rows=24, n=15, causal=False):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(rows, n, generator=g, dtype=torch.float64) * 3
    z[::4, 1] = z[::4].amax(-1)  # a tie at the maximum
    if causal:
        allowed = torch.ones(n, n, dtype=torch.bool).tril()[:rows]
    else:
        allowed = torch.rand(rows, n, generator=g) > 0.4
        allowed[:, 3] = True
        allowed[5] = False
        allowed[5, 7] = True  # one allowed key: entropy 0, normalized entropy undefined
    return torch.where(allowed, z, -math.inf), allowed


def _first_second(zm):
    first = zm.max(-1).indices
    rest = zm.scatter(-1, first.unsqueeze(-1), -math.inf).max(-1)
    return first, torch.where(rest.values > -math.inf, rest.indices, first)


def _check(out, w_rows, allowed, rel=1e-10):
    for i, w in enumerate(w_rows):
        ref = dispersion_row(w, allowed[i].tolist())
        for key, want in ref.items():
            got = float(out[key][i])
            if math.isnan(want):
                assert math.isnan(got), (i, key)
            else:
                assert got == pytest.approx(want, rel=rel, abs=1e-12), (i, key, got, want)


@pytest.mark.parametrize("beta", [0.01, 1.0, 7.5, 60.0])
def test_softmax_shortcut_and_xlogy_entropy_match_the_loop(beta):
    zm, allowed = _rows(1)
    first, second = _first_second(zm)
    n_keys = allowed.sum(-1)
    w = weights(zm, rowmaps.get("softmax"), beta)
    loop = [softmax_row(zm[i].tolist(), allowed[i].tolist(), beta) for i in range(zm.shape[0])]
    assert torch.allclose(w, torch.tensor(loop, dtype=torch.float64), rtol=1e-12, atol=1e-300)
    shortcut = dispersion(w, zm, first, second, n_keys, beta, softmax=True)
    plain = dispersion(w, zm, first, second, n_keys, beta, softmax=False)
    _check(shortcut, loop, allowed)
    _check(plain, loop, allowed)
    assert float(shortcut["entropy"][5]) == 0.0 and math.isnan(float(shortcut["entropy_norm"][5]))


@pytest.mark.parametrize("name", ["entmax_a1.5", "sparsemax", "relu_p2_b0.5", "topk_k3", "sigmoid_b0"])
def test_other_maps_have_exact_zeros_counted_out_of_the_support(name):
    zm, allowed = _rows(2)
    beta = 1.7
    w = weights(zm, rowmaps.get(name), beta)
    assert torch.equal(w, rowmaps.get(name)(zm * beta))
    first, second = _first_second(zm)
    out = dispersion(w, zm, first, second, allowed.sum(-1), beta, softmax=False)
    _check(out, w.tolist(), allowed)
    if name != "sigmoid_b0":
        assert (out["support"] < allowed.sum(-1)).any()


def test_weights_refuse_a_map_that_does_not_sum_to_one():
    zm, _ = _rows(3)
    with pytest.raises(ValueError, match="'wortsman_p2_sqrtL' is not"):
        weights(zm, rowmaps.get("wortsman_p2_sqrtL"), 1.0)


def test_normalized_entropy_divides_by_the_log_of_the_allowed_keys():
    entropy = torch.tensor([0.0, 1.0, math.log(3), 2.0], dtype=torch.float64)
    got = normalized_entropy(entropy, torch.tensor([1, 2, 3, 100]))
    assert math.isnan(got[0]) and got[1:].tolist() == pytest.approx([1 / math.log(2), 1.0, 2 / math.log(100)])


@pytest.mark.parametrize("sink", [0, 1, 4])
def test_sink_index_is_the_sink_th_allowed_key_and_key_mass_reads_it(sink):
    for causal in (True, False):
        zm, allowed = _rows(4, rows=15, causal=causal)
        n_keys = allowed.sum(-1)
        index = sink_index(zm, n_keys, sink, full=False)
        w = weights(zm, rowmaps.get("softmax"), 1.0)
        mass = key_mass(w, index)
        for i in range(zm.shape[0]):
            key = sink_key(allowed[i].tolist(), sink)
            assert int(index[i]) == (-1 if key is None else key), (causal, i)
            assert math.isnan(mass[i]) if key is None else float(mass[i]) == float(w[i, key]), (causal, i)
    full = torch.zeros(3, 6, dtype=torch.float64)
    assert sink_index(full, torch.full((3,), 6), sink, full=True).tolist() == [sink if sink < 6 else -1] * 3


def test_key_mass_reads_any_index_per_row():
    w = torch.tensor([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]], dtype=torch.float64)
    got = key_mass(w, torch.tensor([2, -1]))
    assert got[0] == 0.7 and math.isnan(got[1])
