"""Checkpoints: real sharded state saved and restored with torch.distributed.checkpoint (DCP) on a
tier, timed the way a training job feels them.

DCP's planner decides what each rank writes; where the bytes go is a storage writer's and reader's
job. iobench brings its own (``writer.py``, ``reader.py``) over a store of parts (``store.py``: local
files buffered or O_DIRECT, ``localstore.py``; RADOS objects, ``radosstore.py``), with aligned buffers,
requests in flight, checksums and a commit that happens only after the whole write (``.metadata``
last, then one rename). Object stores are written through their clients' own DCP paths
(``targets.py``). ``staging.py`` copies device state to reused (pinned) host buffers for an
asynchronous save; ``checkpointer.py`` saves every K steps of a training loop in one of three modes
and records what each save blocked; ``timing.py`` measures save and load (cold and warm) on their own.
"""
