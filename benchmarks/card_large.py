"""The card's time on a 0.5B model: a Qwen2-architecture GGUF of Qwen2.5-0.5B's shape, then `attnlab card` on it.

No 0.5B model is among the ones `attnlab fetch` offers, and none is downloaded: the GGUF is written here with random
N(0, 0.02) weights in F16 (what the card computes does not depend on the weights' values, only its labels do: a random
model is reported untrained and its findings not checked) and SmolLM2's BPE tokenizer, padded with unused tokens to
the vocabulary's size. It needs `attnlab fetch smollm2` (the tokenizer).

    python benchmarks/card_large.py --out runs/card-large              # quick budget, the first run converts the GGUF
    python benchmarks/card_large.py --out runs/card-large --budget standard

Prints the card's wall time; the GGUF (about 1 GB) is kept beside the card for a second, cached run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Shape:
    """A Qwen2 decoder's shape (Qwen2.5-0.5B's by default: 24 layers of 896, 14 query and 2 KV heads, FFN 4864,
    vocabulary 151,936, tied embeddings, a 32K window)."""

    layers: int = 24
    d_model: int = 896
    ffn: int = 4864
    heads: int = 14
    kv_heads: int = 2
    vocab: int = 151_936
    context: int = 32_768


def _strings(reader, name: str) -> list[str]:
    field = reader.fields[name]
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


def _ints(reader, name: str) -> list[int]:
    field = reader.fields[name]
    return [int(field.parts[i][0]) for i in field.data]


def write_gguf(out: Path, tokenizer_gguf: Path, shape: Shape = Shape(), seed: int = 0) -> Path:
    """A Qwen2 GGUF of ``shape`` at ``out``, random N(0, 0.02) weights in F16, norms at one, biases at zero, and the
    BPE tokenizer of ``tokenizer_gguf`` padded with unused tokens to ``shape.vocab``."""
    import gguf

    reader = gguf.GGUFReader(tokenizer_gguf)
    tokens = _strings(reader, "tokenizer.ggml.tokens")
    types = _ints(reader, "tokenizer.ggml.token_type")
    if shape.vocab < len(tokens):
        raise ValueError(f"vocab {shape.vocab} is smaller than the tokenizer's {len(tokens)} tokens")
    extra = shape.vocab - len(tokens)
    tokens += [f"<|attnlab_unused_{i}|>" for i in range(extra)]
    types += [gguf.TokenType.UNUSED] * extra
    head, kv = shape.d_model // shape.heads, shape.kv_heads * (shape.d_model // shape.heads)

    writer = gguf.GGUFWriter(str(out), "qwen2")
    writer.add_name("random-qwen2")
    writer.add_block_count(shape.layers)
    writer.add_context_length(shape.context)
    writer.add_embedding_length(shape.d_model)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(_strings(reader, "tokenizer.ggml.merges"))
    for name, add in (("bos", writer.add_bos_token_id), ("eos", writer.add_eos_token_id)):
        add(_ints(reader, f"tokenizer.ggml.{name}_token_id")[0])

    rng = np.random.default_rng(seed)

    def normal(*dims: int) -> np.ndarray:
        return (rng.standard_normal(dims, dtype=np.float32) * 0.02).astype(np.float16)

    writer.add_tensor("token_embd.weight", normal(shape.vocab, shape.d_model))
    for i in range(shape.layers):
        block = f"blk.{i}."
        writer.add_tensor(block + "attn_norm.weight", np.ones(shape.d_model, np.float32))
        for proj, rows in (("q", shape.d_model), ("k", kv), ("v", kv)):
            writer.add_tensor(f"{block}attn_{proj}.weight", normal(rows, shape.d_model))
            writer.add_tensor(f"{block}attn_{proj}.bias", np.zeros(rows, np.float32))
        writer.add_tensor(block + "attn_output.weight", normal(shape.d_model, head * shape.heads))
        writer.add_tensor(block + "ffn_norm.weight", np.ones(shape.d_model, np.float32))
        writer.add_tensor(block + "ffn_gate.weight", normal(shape.ffn, shape.d_model))
        writer.add_tensor(block + "ffn_up.weight", normal(shape.ffn, shape.d_model))
        writer.add_tensor(block + "ffn_down.weight", normal(shape.d_model, shape.ffn))
    writer.add_tensor("output_norm.weight", np.ones(shape.d_model, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def main(argv: list[str] | None = None) -> int:
    from attnlab.loading import fetch

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the GGUF and the card")
    parser.add_argument("--budget", choices=("quick", "standard"), default="quick")
    args = parser.parse_args(argv)
    tokenizer = fetch.fetched("smollm2")
    if tokenizer is None:
        print("the tokenizer comes from SmolLM2's GGUF: run `attnlab fetch smollm2` first", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    model = args.out / "random-qwen2-0.5b.gguf"
    if not model.is_file():
        print(f"writing {model}: random weights of Qwen2.5-0.5B's shape in F16 (about 1 GB)", flush=True)
        start = time.perf_counter()
        write_gguf(model, tokenizer)
        print(f"wrote {model} ({model.stat().st_size / 1e9:.2f} GB) in {time.perf_counter() - start:.0f} s")
    start = time.perf_counter()
    card = [sys.executable, "-m", "attnlab", "card", str(model), "--budget", args.budget]
    done = subprocess.run([*card, "--out", str(args.out / f"card-{args.budget}"), "--overwrite"], check=False)
    print(f"attnlab card --budget {args.budget}: rc {done.returncode}, {(time.perf_counter() - start) / 60:.1f} min")
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
