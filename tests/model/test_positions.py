"""Positional encodings match hand-checked values and Hugging Face: ALiBi/NAPE slopes and biases, RoPE, Llama 3 and dynamic NTK scaling."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig
from transformers.modeling_rope_utils import _compute_dynamic_ntk_parameters
from transformers.models.bloom.modeling_bloom import build_alibi_tensor
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from attnlab.model import Decoder, ModelConfig
from attnlab.model.config import ConfigError
from attnlab.model.positions import (
    LearnedPositions,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    dynamic_ntk_base,
    llama3_frequencies,
    nape_slopes,
    rope_angles,
    rope_frequencies,
)


def same(t, values):
    """Exact equality with the values rounded to the tensor's dtype, as hand-written slopes are."""
    return torch.equal(t, torch.tensor(values, dtype=t.dtype))


def llama_config(head_dim, rope_parameters):
    return LlamaConfig(
        hidden_size=4 * head_dim,
        num_attention_heads=4,
        head_dim=head_dim,
        max_position_embeddings=32,
        rope_parameters={"rope_theta": 10000.0, **rope_parameters},
    )


# ALiBi and NAPE


def test_geometric_slopes_for_a_power_of_two():
    assert alibi_slopes(8).tolist() == [2.0**-k for k in range(1, 9)]


def test_geometric_slopes_for_non_powers_of_two_by_hand():
    # 6 heads: the 4-head slopes 2^-2, 2^-4, 2^-6, 2^-8, then the odd-indexed 8-head slopes 2^-1, 2^-3
    assert alibi_slopes(6).tolist() == [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8]
    # 12 heads: the 8-head slopes, then 2^(-8 i / 16) for i = 1, 3, 5, 7
    want = [2.0**-k for k in range(1, 9)] + [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5]
    torch.testing.assert_close(alibi_slopes(12), torch.tensor(want), rtol=1e-7, atol=0)


@pytest.mark.parametrize("n_heads", range(1, 34))
def test_geometric_slopes_match_bloom(n_heads):
    # BLOOM's bias at key position 1 (query-independent form) is the slope itself
    bloom = build_alibi_tensor(torch.ones(1, 2), n_heads, torch.float32)[:, 0, 1]
    torch.testing.assert_close(alibi_slopes(n_heads), bloom, rtol=1e-6, atol=0)


def test_inverse_slopes():
    assert same(alibi_slopes(4, kind="inverse"), [1.0, 1 / 2, 1 / 3, 1 / 4])


def test_bias_4x4_by_hand():
    bias = alibi_bias(torch.tensor([1.0, 0.5]), torch.arange(4), torch.arange(4))
    head1 = [[0, 0, 0, 0], [-1, 0, 0, 0], [-2, -1, 0, 0], [-3, -2, -1, 0]]
    head2 = [[0, 0, 0, 0], [-0.5, 0, 0, 0], [-1, -0.5, 0, 0], [-1.5, -1, -0.5, 0]]
    assert bias.tolist() == [head1, head2]


def test_bias_for_decoding_queries_uses_absolute_positions():
    # one query at position 5 against keys 3..6 (a KV cache): distances 2, 1, 0, future key
    bias = alibi_bias(torch.tensor([0.25]), torch.tensor([5]), torch.arange(3, 7))
    assert bias.tolist() == [[[-0.5, -0.25, 0.0, 0.0]]]


def test_nape_puts_alibi_on_the_first_half():
    assert same(nape_slopes(8), [1.0, 1 / 2, 1 / 3, 1 / 4, 0, 0, 0, 0])
    assert nape_slopes(8, kind="geometric").tolist() == [1 / 4, 1 / 16, 1 / 64, 1 / 256, 0, 0, 0, 0]
    # the ALiBi half has the slopes of a 6-head ALiBi model, including its non-power-of-two tail
    assert nape_slopes(12, kind="geometric").tolist() == alibi_slopes(6).tolist() + [0.0] * 6


def test_nape_odd_head_counts_give_nope_the_extra_head():
    assert nape_slopes(5).tolist() == [1.0, 1 / 2, 0, 0, 0]
    assert nape_slopes(1).tolist() == [0.0]


def test_nape_bias_is_zero_exactly_on_nope_heads():
    bias = alibi_bias(nape_slopes(4), torch.arange(3), torch.arange(3))
    assert bias[2:].abs().sum() == 0
    assert (bias[:2].tril(-1) < 0).sum() == 2 * 3


# RoPE


def test_frequencies_by_hand():
    assert same(rope_frequencies(4, base=100.0), [1.0, 0.1])
    torch.testing.assert_close(rope_frequencies(4, base=100.0, scaling=4.0), torch.tensor([0.25, 0.025]))


def test_scores_depend_only_on_the_offset():
    torch.manual_seed(0)
    q, k = torch.randn(2, 1, 1, 1, 16).unbind(0)
    inv_freq = rope_frequencies(16)

    def score(i, j):
        cq, sq = rope_angles(torch.tensor([i]), inv_freq)
        ck, sk = rope_angles(torch.tensor([j]), inv_freq)
        return (apply_rope(q, cq, sq) * apply_rope(k, ck, sk)).sum()

    for i, j in [(3, 1), (7, 7), (2, 9), (20, 0)]:
        for shift in (1, 5, 13):
            torch.testing.assert_close(score(i + shift, j + shift), score(i, j), rtol=1e-5, atol=1e-5)
    # and the offset matters, so the check above is not passing on an identity map
    assert abs(score(3, 1) - score(3, 2)) > 1e-2


def test_rotation_keeps_the_norm():
    torch.manual_seed(1)
    x = torch.randn(2, 3, 5, 8)
    cos, sin = rope_angles(torch.arange(5), rope_frequencies(8))
    torch.testing.assert_close(apply_rope(x, cos, sin).norm(dim=-1), x.norm(dim=-1))


def test_matches_hf_llama():
    torch.manual_seed(2)
    head_dim, tokens = 16, 6
    q, k = torch.randn(2, 2, 4, tokens, head_dim).unbind(0)
    positions = torch.tensor([[0, 1, 2, 3, 4, 5], [7, 8, 9, 10, 11, 12]])
    hf_cos, hf_sin = LlamaRotaryEmbedding(llama_config(head_dim, {"rope_type": "default"}))(q, positions)
    cos, sin = rope_angles(positions, rope_frequencies(head_dim))
    torch.testing.assert_close(cos, hf_cos)
    torch.testing.assert_close(sin, hf_sin)
    hf_q, hf_k = apply_rotary_pos_emb(q, k, hf_cos, hf_sin)
    torch.testing.assert_close(apply_rope(q, cos, sin), hf_q)
    torch.testing.assert_close(apply_rope(k, cos, sin), hf_k)
    # one (tokens, head_dim) table broadcast over the batch
    cos0, sin0 = rope_angles(positions[0], rope_frequencies(head_dim))
    torch.testing.assert_close(apply_rope(q, cos0, sin0)[:1], hf_q[:1])


def test_linear_scaling_at_f_times_p_equals_unscaled_at_p():
    p = torch.arange(0, 40, 3)
    scaled = rope_angles(4 * p, rope_frequencies(8, scaling=4.0))
    plain = rope_angles(p, rope_frequencies(8))
    for a, b in zip(scaled, plain):
        torch.testing.assert_close(a, b)
    hf = LlamaRotaryEmbedding(llama_config(8, {"rope_type": "linear", "factor": 4.0}))
    torch.testing.assert_close(rope_frequencies(8, scaling=4.0), hf.inv_freq)


@pytest.mark.parametrize("head_dim, context, factor", [(8, 32, 16.0), (64, 64, 16.0), (32, 8192, 8.0), (16, 64, 4.0)])
def test_llama3_scaling_matches_hugging_face_s_llama3_rope(head_dim, context, factor):
    hf = LlamaRotaryEmbedding(
        LlamaConfig(
            hidden_size=4 * head_dim,
            num_attention_heads=4,
            head_dim=head_dim,
            max_position_embeddings=16 * context,
            rope_parameters={
                "rope_theta": 10000.0,
                "rope_type": "llama3",
                "factor": factor,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": context,
            },
        )
    )
    ours = llama3_frequencies(rope_frequencies(head_dim), factor, context)
    torch.testing.assert_close(ours, hf.inv_freq.float())
    # long wavelengths are divided by the factor, short ones kept
    plain = rope_frequencies(head_dim)
    assert torch.equal(ours[0], plain[0]) and ours[-1] <= plain[-1]
    with pytest.raises(ValueError, match="factor must be a finite number >= 1"):
        llama3_frequencies(plain, 0.5, context)


def test_a_llama3_scaled_decoder_uses_those_frequencies():
    cfg = ModelConfig(
        vocab=11, context=16, layers=1, heads=2, d_model=16, positions="rope", rope_type="llama3", rope_scaling=16.0
    )
    cos, _ = Decoder(cfg).rope(40, torch.device("cpu"))
    expected, _ = rope_angles(torch.arange(40), llama3_frequencies(rope_frequencies(8), 16.0, 16))
    torch.testing.assert_close(cos, expected)
    with pytest.raises(ConfigError, match="rope_type must be one of linear, llama3"):
        ModelConfig(vocab=11, context=16, rope_type="yarn")


def test_dynamic_ntk_base_unchanged_up_to_training_length():
    for factor in (1.0, 2.0):
        assert dynamic_ntk_base(10000.0, 16, 1, 32, factor=factor) == 10000.0
        assert dynamic_ntk_base(10000.0, 16, 32, 32, factor=factor) == 10000.0


def test_dynamic_ntk_base_follows_seed_003_by_hand():
    # head_dim 4: exponent d / (d - 2) = 2, so twice the training length quadruples the base
    assert dynamic_ntk_base(10000.0, 4, 64, 32) == pytest.approx(40000.0, rel=1e-12)
    assert dynamic_ntk_base(100.0, 8, 96, 32) == pytest.approx(100.0 * 3 ** (4 / 3), rel=1e-12)


@pytest.mark.parametrize(("n", "factor"), [(10, 2.0), (32, 2.0), (33, 2.0), (100, 2.0), (100, 1.0), (500, 8.0)])
def test_dynamic_ntk_matches_hf(n, factor):
    config = llama_config(16, {"rope_type": "dynamic", "factor": factor})
    hf_inv_freq, _ = _compute_dynamic_ntk_parameters(config, seq_len=n)
    ours = rope_frequencies(16, base=dynamic_ntk_base(10000.0, 16, n, 32, factor=factor))
    torch.testing.assert_close(ours, hf_inv_freq)


# learned absolute positions


def test_learned_positions_look_up_rows():
    pe = LearnedPositions(context=4, dim=3)
    out = pe(torch.tensor([[0, 3], [2, 2]]))
    assert out.shape == (2, 2, 3)
    torch.testing.assert_close(out[0, 1], pe.table.weight[3])
    torch.testing.assert_close(out[1, 0], out[1, 1])
    # an int is a whole window 0 .. t - 1, as the decoder asks for it
    torch.testing.assert_close(pe(3), pe.table.weight[:3])
    assert pe(0).shape == (0, 3)


def test_learned_positions_refuse_positions_beyond_the_table():
    pe = LearnedPositions(context=4, dim=3)
    with pytest.raises(ValueError, match=r"positions must lie in \[0, 3\] \(context=4\), got values in \[0, 4\]"):
        pe(torch.arange(5))
    with pytest.raises(ValueError, match=r"got values in \[-1, 0\]"):
        pe(torch.tensor([-1, 0]))
    with pytest.raises(ValueError, match=r"got values in \[0, 4\]"):
        pe(5)
    with pytest.raises(ValueError, match="token count must be >= 0, got -1"):
        pe(-1)
    with pytest.raises(ValueError, match="an int token count or an integer tensor, got dtype torch.float32"):
        pe(torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="an int token count or an integer tensor, got 2.0"):
        pe(2.0)


# bad inputs


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: alibi_slopes(0), "n_heads must be a positive int, got 0"),
        (lambda: alibi_slopes(2.0), "n_heads must be a positive int, got 2.0"),
        (lambda: alibi_slopes(True), "n_heads must be a positive int, got True"),
        (lambda: alibi_slopes(4, kind="linear"), r"kind must be one of \('geometric', 'inverse'\), got 'linear'"),
        (lambda: nape_slopes(-2), "n_heads must be a positive int, got -2"),
        (lambda: nape_slopes(4, kind="exp"), "kind must be one of .*, got 'exp'"),
        (lambda: alibi_bias(torch.tensor([-1.0]), torch.arange(2), torch.arange(2)), "slopes must be >= 0"),
        (lambda: alibi_bias(torch.ones(2, 1), torch.arange(2), torch.arange(2)), r"slopes must be a 1-D float"),
        (lambda: alibi_bias(torch.ones(2), torch.zeros(1, 2), torch.arange(2)), r"query_positions must be 1-D"),
        (lambda: rope_frequencies(7), "head_dim must be an even int >= 2, got 7"),
        (lambda: rope_frequencies(0), "head_dim must be an even int >= 2, got 0"),
        (lambda: rope_frequencies(8, base=1.0), "base must be a finite number > 1, got 1.0"),
        (lambda: rope_frequencies(8, scaling=0.25), r"scaling must be a finite number >= 1 .*, got 0.25"),
        (lambda: dynamic_ntk_base(10000.0, 2, 64, 32), "head_dim must be an even int >= 4, got 2"),
        (lambda: dynamic_ntk_base(10000.0, 8, 0, 32), "n must be a positive int, got 0"),
        (lambda: dynamic_ntk_base(0.0, 8, 64, 32), "base must be a finite number > 1, got 0.0"),
        (lambda: dynamic_ntk_base(10000.0, 8, 64, 32, factor=0.5), r"factor must be a finite number >= 1 .*, got 0.5"),
        (lambda: rope_angles(torch.arange(3), torch.ones(2, 2)), "inv_freq must be a non-empty 1-D float"),
        (lambda: rope_angles(torch.zeros(1, 1, 3), torch.ones(2)), r"positions must be \(tokens,\) or"),
        (lambda: apply_rope(torch.zeros(2, 3, 8), torch.ones(3, 8), torch.ones(3, 8)), "x must be \\(batch, heads"),
        (lambda: apply_rope(torch.zeros(1, 1, 3, 7), torch.ones(3, 7), torch.ones(3, 7)), "head_dim must be even"),
        (lambda: apply_rope(torch.zeros(1, 1, 3, 8), torch.ones(4, 8), torch.ones(3, 8)), r"cos must be .* \(4, 8\)"),
        (
            lambda: apply_rope(torch.zeros(2, 1, 3, 8), torch.ones(3, 8), torch.ones(3, 3, 8)),
            r"sin must be .* batch 1 or 2, got shape \(3, 3, 8\)",
        ),
        (lambda: LearnedPositions(0, 8), "context must be a positive int, got 0"),
    ],
)
def test_bad_inputs_raise_clear_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()
