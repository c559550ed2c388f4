"""ModelConfig refuses every bad field with one ConfigError naming the field, the value and what is allowed; from_dict
refuses unknown keys; the rowmap takes one name, one per layer or one per head; widths default to their formulas."""

from __future__ import annotations

import dataclasses
import re

import pytest

from attnlab.model.config import ConfigError, ModelConfig


def _tiny(**kw):
    return ModelConfig(
        **{"vocab": 16, "context": 64, "layers": 2, "heads": 2, "d_model": 32, "ffn_width": 64, "block": 32, **kw}
    )


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"positions": "sinusoid"}, "model.positions must be one of"),
        ({"d_model": 33}, "multiple of model.heads"),
        ({"rowmap": "relu_p4_bauto"}, "b=auto"),
        ({"rowmap": "nope"}, "model.rowmap"),
        ({"rowmap": ["softmax"]}, "lists 1 layers"),
        ({"rowmap": ["softmax", ["softmax"]]}, "layer 1 lists 1 heads"),
        ({"heads": 0}, "model.heads must be an int >= 1"),
        ({"dropout": 1.0}, "model.dropout"),
        ({"bias": "yes"}, "model.bias must be true or false"),
        ({"block": 8}, "model.block must be an int >= 32"),
    ],
)
def test_bad_fields_are_named(bad, message):
    with pytest.raises(ConfigError, match=message):
        _tiny(**bad)


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"scaler": "temperature"}, "model.scaler must be one of none, log_n, adaptive, direct, beta_n"),
        ({"scaler": "ssmax"}, "model.scaler 'ssmax' is now called 'log_n'"),
        ({"scaler_bound": 0}, "model.scaler_bound"),
        ({"inputs": "vectors"}, "model.vocab must be unset"),
        ({"inputs": "images"}, "model.inputs must be one of tokens, vectors"),
        ({"vocab": None}, "model.vocab is required"),
        ({"residual": "yes"}, "model.residual must be true or false"),
        ({"readout": "logits"}, "model.readout must be one of stream, writes, got 'logits'"),
        (
            {"readout": "writes"},
            "model.readout writes .* needs model.inputs vectors and model.residual true, got "
            "inputs 'tokens' and residual True",
        ),
        (
            {"readout": "writes", "inputs": "vectors", "vocab": None, "residual": False},
            "got inputs 'vectors' and residual False",
        ),
    ],
)
def test_bad_scaler_and_input_fields_are_named(bad, match):
    with pytest.raises(ConfigError, match=match):
        ModelConfig(**{"vocab": 11, "context": 12, **bad})


# The whole message, not a fragment: a user reading it must learn the field, what they gave and what would do.
@pytest.mark.parametrize(
    "bad, message",
    [
        ({"vocab": 1}, "model.vocab must be an int >= 2, got 1"),
        ({"vocab": True}, "model.vocab must be an int >= 2, got True"),
        ({"context": 0}, "model.context must be an int >= 1, got 0"),
        ({"layers": 0}, "model.layers must be an int >= 1, got 0"),
        ({"heads": 2.0}, "model.heads must be an int >= 1, got 2.0"),
        ({"d_model": 0}, "model.d_model must be an int >= 1, got 0"),
        ({"d_model": 33}, "model.d_model (33) must be a multiple of model.heads (2)"),
        ({"ffn_width": 0}, "model.ffn_width must be an int >= 1, got 0"),
        ({"d_model": 6}, "model.positions rope needs an even head width; d_model / heads = 3"),
        ({"positions": ["rope"]}, "model.positions must be one of none, learned, rope, alibi, nape, got ['rope']"),
        ({"rope_base": 1.0}, "model.rope_base must be a finite number > 1, got 1.0"),
        ({"rope_base": float("nan")}, "model.rope_base must be a finite number > 1, got nan"),
        ({"rope_scaling": 0.5}, "model.rope_scaling must be a finite number >= 1, got 0.5"),
        ({"alibi_slopes": "linear"}, "model.alibi_slopes must be one of geometric, inverse, got 'linear'"),
        ({"ffn": "swiglu2"}, "model.ffn must be one of none, gelu, swiglu, geglu, got 'swiglu2'"),
        ({"norm": "batchnorm"}, "model.norm must be one of layernorm, rmsnorm, none, got 'batchnorm'"),
        ({"norm_eps": 0}, "model.norm_eps must be a finite number > 0, got 0"),
        ({"dropout": -0.1}, "model.dropout must be a finite number >= 0, got -0.1"),
        ({"dropout": True}, "model.dropout must be a finite number >= 0, got True"),
        ({"dropout": 1.0}, "model.dropout must be in [0, 1), got 1.0"),
        ({"block": 31}, "model.block must be an int >= 32, got 31"),
        ({"scaler_delta": float("inf")}, "model.scaler_delta must be a finite number > -inf, got inf"),
        ({"scaler_bound": 0}, "model.scaler_bound must be a finite number > 0, got 0"),
        ({"rope_dynamic": 1}, "model.rope_dynamic must be true or false, got 1"),
        ({"ffn_matched": "no"}, "model.ffn_matched must be true or false, got 'no'"),
        ({"tie_embeddings": None}, "model.tie_embeddings must be true or false, got None"),
        ({"inputs": "vectors"}, "model.vocab must be unset for inputs vectors (vectors are d_model wide), got 16"),
        ({"vocab": None}, "model.vocab is required for inputs tokens"),
    ],
)
def test_each_refusal_names_the_field_the_value_and_what_is_allowed(bad, message):
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        _tiny(**bad)


def test_config_errors_are_value_errors():
    # Callers that catch ValueError around any user input must catch these too.
    assert issubclass(ConfigError, ValueError)


@pytest.mark.parametrize(
    "edge",
    [
        {"vocab": 2},
        {"context": 1},
        {"block": 32},
        {"rope_scaling": 1.0},
        {"dropout": 0.0},
        {"dropout": 0.99},
        {"scaler_delta": -3.0},
        {"positions": "none", "d_model": 6},
        {"ffn": "none"},
        {"norm": "none"},
    ],
)
def test_values_on_the_allowed_side_of_each_bound_are_taken(edge):
    assert all(getattr(_tiny(**edge), key) == value for key, value in edge.items())


def test_from_dict_rejects_unknown_and_missing_keys():
    with pytest.raises(ConfigError, match="unknown model field"):
        ModelConfig.from_dict({"vocab": 8, "context": 8, "width": 3})
    with pytest.raises(ConfigError, match="model.context is required"):
        ModelConfig.from_dict({"vocab": 8})
    assert ModelConfig.from_dict(_tiny().to_dict()) == _tiny()


def test_unknown_keys_are_listed_with_every_known_field():
    known = ", ".join(sorted(f.name for f in dataclasses.fields(ModelConfig)))
    with pytest.raises(ConfigError) as err:
        ModelConfig.from_dict({"vocab": 8, "context": 8, "zz": 1, "width": 3})
    assert str(err.value) == f"unknown model field(s) ['width', 'zz']; known: {known}"


def test_the_renamed_ssmax_scaler_points_to_log_n_and_ssmax_stays_a_row_map():
    with pytest.raises(ConfigError) as err:
        _tiny(scaler="ssmax")
    assert str(err.value) == (
        "model.scaler 'ssmax' is now called 'log_n' (ssmax names only the fixed-s row map "
        'ssmax_s{s}); set model.scaler = "log_n"'
    )
    assert _tiny(scaler="log_n").scaler == "log_n"
    assert _tiny(rowmap="ssmax_s0.43").head_maps() == [["ssmax_s0.43"] * 2] * 2


def test_one_name_per_layer_and_per_head_forms_give_each_head_its_map():
    assert _tiny(rowmap="sparsemax").head_maps() == [["sparsemax", "sparsemax"]] * 2
    assert _tiny(rowmap=["softmax", "sparsemax"]).head_maps() == [["softmax"] * 2, ["sparsemax"] * 2]
    mixed = _tiny(rowmap=["softmax", ["relu_p4_b0", "entmax_a1.5"]])
    assert mixed.head_maps() == [["softmax", "softmax"], ["relu_p4_b0", "entmax_a1.5"]]


def test_rowmap_lists_are_frozen_to_tuples_and_thawed_back_to_lists():
    # YAML gives lists; a frozen config must stay hashable and equal to one built from tuples.
    cfg = _tiny(rowmap=["softmax", ["relu_p4_b0", "entmax_a1.5"]])
    assert cfg.rowmap == ("softmax", ("relu_p4_b0", "entmax_a1.5"))
    assert cfg == _tiny(rowmap=("softmax", ("relu_p4_b0", "entmax_a1.5")))
    assert hash(cfg) == hash(_tiny(rowmap=("softmax", ("relu_p4_b0", "entmax_a1.5"))))
    assert cfg.to_dict()["rowmap"] == ["softmax", ["relu_p4_b0", "entmax_a1.5"]]
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    "rowmap, message",
    [
        (5, "model.rowmap must be a name, a list of names per layer or of per-head lists, got 5"),
        ({"a": 1}, "model.rowmap must be a name, a list of names per layer or of per-head lists, got {'a': 1}"),
        (["softmax", 3], "model.rowmap must be a name, a list of names per layer or of per-head lists, got 3"),
        ([], "model.rowmap lists 0 layers but model.layers is 2"),
        ([[], []], "model.rowmap layer 0 lists 0 heads but model.heads is 2"),
        (["softmax", ["softmax"] * 3], "model.rowmap layer 1 lists 3 heads but model.heads is 2"),
        ([[["softmax"]] * 2] * 2, "model.rowmap: row map name must be a string, got tuple"),
        (
            "relu_p4_bauto",
            "model.rowmap 'relu_p4_bauto' has b=auto, which is a zero-shot calibration; "
            "give b as a number for training",
        ),
    ],
)
def test_bad_rowmap_shapes_are_named(rowmap, message):
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        _tiny(rowmap=rowmap)


def test_unknown_rowmap_names_are_refused_with_the_registry_examples():
    with pytest.raises(ConfigError, match=r"^model\.rowmap: unknown row map 'softmax_x'; names look like: softmax, "):
        _tiny(rowmap="softmax_x")


def test_widths_default_to_their_formulas():
    cfg = ModelConfig(vocab=16, context=8, d_model=24, heads=3, positions="none")
    assert cfg.ffn_width is None and cfg.width == 4 * 24 and cfg.head_dim == 8
    assert _tiny(ffn_width=40).width == 40
    defaults = ModelConfig(vocab=16, context=8)
    assert (defaults.layers, defaults.heads, defaults.d_model, defaults.width) == (2, 4, 128, 512)


def test_alibi_slopes_default_to_each_position_kinds_source():
    assert _tiny(positions="alibi").slope_kind == "geometric"
    assert _tiny(positions="nape").slope_kind == "inverse"
    assert _tiny(positions="nape", alibi_slopes="geometric").slope_kind == "geometric"


def test_vector_inputs_need_no_vocabulary_and_the_config_is_frozen():
    cfg = ModelConfig(context=8, inputs="vectors")
    assert cfg.vocab is None and cfg.to_dict()["inputs"] == "vectors"
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.layers = 3
