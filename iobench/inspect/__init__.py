"""`iobench inspect`: what this host has for feeding accelerators, and the pitfalls it sees.

Every reader takes a root directory (``/`` on a live host) holding ``sys/`` and ``proc/``, so tests
and bug reports can run the inspector against a recorded tree. GPUs come through NVML
(``loaders.observe.nvml``), which describes the live machine only. Nothing is imported here: the CLI
builds its parser from ``cli.py`` without loading the readers (or torch, which ``loaders`` imports).
"""
