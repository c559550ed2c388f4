"""Shared setup for the rowmaps tests: makes the reference module ``rowmap_refs`` importable."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# The suite is sized for 2 CPU cores; more threads only add contention on tiny tensors.
torch.set_num_threads(min(torch.get_num_threads(), 2))
