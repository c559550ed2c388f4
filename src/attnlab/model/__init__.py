"""attnlab's own causal decoder: positional encodings, FFNs, norms and learnable scalers.

Attention goes through ``attnlab.site`` so that diagnostics, probes and substitutions see it.
"""

from attnlab.model.config import ConfigError, ModelConfig
from attnlab.model.decoder import Decoder, loss

__all__ = ["ConfigError", "Decoder", "ModelConfig", "loss"]
