"""The commands that run on a checkpoint, one module each with its config dataclass: ``audit``,
``substitute``, ``ablate``, ``heads``, ``temperature`` (on a Hugging Face checkpoint) and ``lengthgen``
(trains its own decoders); ``runs`` holds what the checkpoint commands share (loading, prompts, b_auto,
staged outputs) and ``readout`` the reading of chosen score rows into diagnostics tables."""
