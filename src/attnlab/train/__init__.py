"""The training engine for attnlab's own decoder (issue 5): data streams, optimizer groups and schedules,
the seed-002 upper-Q/K intervention and its release rule, the entropy floor, probes, atomic checkpoints
and torchrun DDP."""
