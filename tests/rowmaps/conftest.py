"""Shared setup for the rowmaps tests."""

import torch

# The suite is sized for 2 CPU cores; more threads only add contention on tiny tensors.
torch.set_num_threads(min(torch.get_num_threads(), 2))
