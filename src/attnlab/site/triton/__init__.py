"""The site's fused Triton kernels (CUDA; tested on CPU tensors under ``TRITON_INTERPRET=1``): ReLU^p and
sigmoid attention (``relu_sigmoid``) and alpha-entmax attention (``entmax``), each a forward and a recomputing
backward. Nothing here imports triton until a kernel module is imported."""
