"""The attention site: one call that turns a layer's query, key and value into its attention output.

Every model attnlab touches (a Hugging Face checkpoint through ``attnlab.hooks``, or attnlab's own
decoder) attends through :func:`attend`, so an observer that reads score rows and a per-head row-map
substitution work the same everywhere. A call says three things besides its tensors, each a small object:
how the scores are formed (:class:`Scores`: scaling, softcap, a position bias as :class:`Slopes` or a block
function, a learnable row scale), which keys a query may attend (:class:`Causal` with an optional window, a
mask tensor, or all), and what else the layer does (:class:`Plan`). Queries are processed in blocks, so
memory is O(block x keys) beyond the inputs, whatever the context length.

With no substitution and no length multiplier, the arithmetic is exactly that of transformers' eager
attention (``matmul * scaling``, tanh softcap, additive mask, float32 softmax cast back, ``matmul``):
outputs are bit-identical to the eager forward (float64 inputs get a float64 softmax instead), the query blocks
(:func:`query_blocks`) being split so that none changes a GEMM's rounding.

Where nothing needs a block of scores (no observer, no gradient, no dropout) and the attention is causal,
a row-map plan or a position bias takes the fused path instead (:mod:`attnlab.site.fused`), which computes
only the scores a query may attend and equals the block-materializing path to float rounding. On CUDA (or
wherever ``Plan.kernel="triton"`` asks), a call whose every head has one ReLU^p, sigmoid or alpha-entmax map and
nothing else to do goes to the fused Triton kernels instead (:mod:`attnlab.site.route` says which calls).
"""

from attnlab.site.blockwise import attend
from attnlab.site.spec import (
    DEFAULT_BLOCK,
    MIN_BLOCK,
    VANILLA,
    Causal,
    LengthScale,
    Observer,
    Plan,
    ScoreBlock,
    Scores,
    Slopes,
    WeightBlock,
    WeightObserver,
)
from attnlab.site.tiles import allowed_keys, causal_mask, key_span, linear_bias, position_bias, query_blocks

__all__ = [
    "DEFAULT_BLOCK",
    "MIN_BLOCK",
    "VANILLA",
    "Causal",
    "LengthScale",
    "Observer",
    "Plan",
    "ScoreBlock",
    "Scores",
    "Slopes",
    "WeightBlock",
    "WeightObserver",
    "allowed_keys",
    "attend",
    "causal_mask",
    "key_span",
    "linear_bias",
    "position_bias",
    "query_blocks",
]
