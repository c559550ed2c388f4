"""A forward read for its score rows alone keeps the last position's logits only, on every architecture the hooks
cover, and the score blocks an observer sees are the full forward's, bit for bit; a model whose forward takes no
``logits_to_keep`` gets its plain forward."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnlab import hooks
from hooks.models import VOCAB, build, configs


def _blocks(model, ids, forward) -> list[torch.Tensor]:
    seen = []
    with hooks.observed(model, lambda block: seen.append(block.scores.clone())), torch.no_grad():
        forward(model, ids)
    return seen


@pytest.mark.parametrize("name", sorted(configs()))
def test_the_score_blocks_are_the_full_forwards_and_one_logit_row_is_kept(name):
    model = build(name)
    ids = torch.randint(3, VOCAB, (1, 40), generator=torch.Generator().manual_seed(0))
    full = _blocks(model, ids, lambda m, i: m(input_ids=i))
    last = _blocks(model, ids, hooks.last_forward)
    assert len(full) == len(last) > 0 and all(torch.equal(a, b) for a, b in zip(full, last))
    with torch.no_grad():
        kept = hooks.last_forward(model, ids).logits
        whole = model(input_ids=ids).logits
    assert kept.shape == (1, 1, whole.shape[-1])
    torch.testing.assert_close(kept[0, -1], whole[0, -1], rtol=1e-5, atol=1e-5)


def test_a_forward_without_logits_to_keep_is_called_plainly():
    class Plain(nn.Module):
        def forward(self, input_ids):
            return input_ids * 2

    assert torch.equal(hooks.last_forward(Plain(), torch.ones(1, 3)), torch.full((1, 3), 2.0))
