"""The concentration study's toy model: a small Llama decoder trained with softmax on the induction suite, with a
word-level tokenizer built offline, and saved as a Hugging Face checkpoint for the engines to load."""

from __future__ import annotations

import re
import string
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

from attnlab import io, tasks
from attnlab.loading.load import quiet_transformers
from attnlab.studies.concentration.plan import SUITE, Plan

TRAIN_SEED_OFFSET = 1000  # training prompts come from another seed than the evaluation prompts


def _tokenizer():
    """A word-level tokenizer over the task lexicon and the prompt templates, built offline, with BOS."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    from attnlab.tasks import suites as templates
    from attnlab.tasks.text import lexicon

    fixed = " ".join(
        [
            templates.NIAH_CUE,
            templates.PASSKEY_CUE,
            templates.RULER_INTRO,
            templates.RULER_NEEDLE,
            templates.RULER_QUESTION,
        ]
    )
    words = sorted({w for ws in lexicon().values() for w in ws} | set(re.findall(r"[a-z]+", fixed.lower())))
    vocab = ["<unk>", "<s>", *string.punctuation, *words]
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(vocab)}, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tok.decoder = decoders.WordPiece()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", unk_token="<unk>", pad_token="<unk>")


def _batch(prompts: list[tasks.Prompt]) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and labels, with the loss only where ``tasks.answer_keys`` names an answer (the repeat)."""
    ids = torch.tensor([list(p.input_ids) + list(p.answer_ids) for p in prompts])
    labels = torch.full_like(ids, -100)
    for i, p in enumerate(prompts):
        for q, k in tasks.answer_keys(p).items():
            labels[i, q] = ids[i, k]
    return ids[:, :-1], labels[:, :-1]


def build(spec, tok, device: str = "cpu"):
    """(model, optimizer) of the study's toy: a softmax Llama of ``spec``'s shape over ``tok``'s vocabulary, on
    ``device``, with AdamW at ``spec.lr``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=spec.hidden,
        intermediate_size=spec.ffn,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.heads,
        max_position_embeddings=spec.context,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.bos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).to(device)
    return model, torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.01)


def step(model, opt, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """One optimizer step on a batch of induction prompts (``_batch``): cross-entropy on the answer positions,
    gradients clipped to norm 1; returns the loss."""
    logits = model(input_ids=ids).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss


def train(plan: Plan, seed: int, out: Path, progress: bool, device: str = "cpu") -> None:
    """Train a softmax Llama on induction prompts and save it with its tokenizer to ``out`` (moved into
    place only when finished, so a folder holding one is complete), with its loss per step in
    ``train_loss.csv``. Not resumable mid-run: a smoke model takes seconds, and a half-trained one is discarded."""
    spec, tok = plan.train, _tokenizer()
    prompts = tasks.build_suite(SUITE, tok, spec.steps * spec.batch, seed=TRAIN_SEED_OFFSET + seed, length=plan.length)
    torch.manual_seed(seed)
    model, opt = build(spec, tok, device)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=spec.lr, total_steps=spec.steps, pct_start=0.1)
    log, start = [], time.time()
    for i in range(spec.steps):
        ids, labels = (t.to(device) for t in _batch(prompts[i * spec.batch : (i + 1) * spec.batch]))
        loss = step(model, opt, ids, labels)
        sched.step()
        log.append({"step": i, "loss": loss.item()})
        if progress and (i % 50 == 0 or i == spec.steps - 1):
            print(f"concentration train step {i} loss {loss.item():.3f} ({time.time() - start:.0f}s)", flush=True)
    stage = Path(tempfile.mkdtemp(prefix=".model-", dir=out.parent))
    with quiet_transformers():
        model.cpu().save_pretrained(stage)
        tok.save_pretrained(stage)
    io.write_table(stage / "train_loss", pd.DataFrame(log))
    stage.rename(out)
