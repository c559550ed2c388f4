"""The training engine for attnlab's own decoder: data streams, optimizer groups and schedules,
the Zhu et al. 2026 upper-Q/K intervention and its release rule, the entropy floor, probes, atomic checkpoints
and torchrun DDP."""
