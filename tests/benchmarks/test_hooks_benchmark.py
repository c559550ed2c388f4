"""benchmarks/hooks.py's audit forward still runs the audit's code path and writes its rows."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

from attnlab.analyses import readout

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "hooks.py"


def test_audit_forward_writes_one_row_per_layer_head_and_sampled_query(tmp_path):
    from transformers import AutoModelForCausalLM, LlamaConfig

    spec = importlib.util.spec_from_file_location("bench_hooks", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
    ids = torch.randint(0, 64, (1, 70), generator=torch.Generator().manual_seed(0))
    rows = bench.audit_forward(model, ids, 16, tmp_path)
    assert rows == 2 * 4 * len(readout.select_queries("every:16", 70)) == 2 * 4 * 5  # 15, 31, 47, 63, 69
