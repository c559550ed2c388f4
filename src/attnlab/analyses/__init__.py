"""The analyses of one checkpoint, one module each with its config dataclass, in memory: ``audit``, ``lengths``,
``substitute``, ``ablate``, ``heads``, ``matched``, ``temperature``, ``xi_sweep``, ``fit_xi``, ``diagnose`` and
``sinks``; ``run`` is the one home of what they share (argument checks, loading, prompts, b_auto, staged outputs),
``readout`` reads chosen score rows into diagnostics tables and ``sections`` builds ``attnlab report``'s section of
a folder an analysis wrote. The commands of the same names only add the files."""
