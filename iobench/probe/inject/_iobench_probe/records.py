"""What a probed process writes: one JSON array per line, its first item the kind, the rest the
fields named here in this order. The hooks write the arrays; ``iobench probe`` reads them back by
these names (iobench/probe/reader.py), so this table is the one definition of the format.

Times are ``time.perf_counter()`` readings (CLOCK_MONOTONIC on Linux: one clock for every process
of the host), CPU times ``time.process_time()`` or ``time.thread_time()`` readings, in seconds.
"""

from __future__ import annotations

# a tag names one stream of batches in one process: "<pid>-<n>" (a DataLoader, or the loaders
# of one kind that process re-created, e.g. one per epoch; a DALI iterator)
FIELDS: dict[str, tuple[str, ...]] = {
    # a process of the job loaded the hooks
    "hello": ("pid", "ppid", "t", "argv", "executable", "ranks", "python"),
    # torch.utils.data was imported and patched (version)
    "torch": ("t", "version"),
    # a stream's first iterator: what the loader is (a dict, see loop.loader_info)
    "loader": ("tag", "t", "info"),
    # an iterator of the stream asked for at t (an epoch began), built at t_ready (workers started)
    "epoch": ("tag", "t", "t_ready", "epoch"),
    # one next() that handed the loop a batch: called at t_call (CPU reading cpu_call), returned
    # at t_return with `samples` samples; phase: 0 measured, 1 replayed from memory (the step
    # alone), 2 the batch the loader-alone phase ended on
    "step": ("tag", "t_call", "t_return", "cpu_call", "samples", "phase"),
    # one next() that ended an epoch (StopIteration)
    "end": ("tag", "t_call", "t_return"),
    # a DataLoader worker (or the loop's own process, worker -1) made one batch: fetch() from t0 to
    # t1; in the dataset (__getitem__, __getitems__ or an IterableDataset's iterator): wall, CPU and
    # time runnable but waiting for a core; the same for collate; the batch's samples; what the
    # process's read calls returned (rchar) and what it read from block devices (read_bytes)
    "fetch": (
        "tag",
        "worker",
        "t0",
        "t1",
        "get_wall",
        "get_cpu",
        "get_runq",
        "collate_wall",
        "collate_cpu",
        "collate_runq",
        "samples",
        "rchar",
        "read_bytes",
    ),
    # a worker process started (its pid)
    "worker": ("tag", "worker", "t", "pid"),
    # a host-to-device copy (Tensor.to / Tensor.cuda from the CPU to a device)
    "h2d": ("t0", "t1", "bytes", "non_blocking"),
    # DataLoader's pin-memory step for one batch
    "pin": ("t0", "t1"),
    # the device's time for a step of a stream: CUDA events recorded when next() returned and
    # when the loop called it again, read once both had passed (no synchronisation)
    "device": ("tag", "step", "seconds"),
    # the loader alone: from t_start the stream's own iterator was drained with nothing consuming;
    # `untimed` batches (the queue the workers had filled) first, then `batches` batches of
    # `samples` samples timed from t_from to t_end; ended: the epoch ran out first
    "alone": ("tag", "t_start", "t_from", "t_end", "batches", "samples", "untimed", "ended"),
    # a phase of the probe's a stream could not run: "alone" (its epochs are shorter than the
    # phase needs), and why, in words
    "skip": ("tag", "t", "phase", "why"),
    # the probe stopped the job at a stream's step (the window and its phases were done)
    "stop": ("tag", "t", "step"),
    # a hook could not do its work (the job went on without it)
    "error": ("t", "where", "message"),
}

PHASE_MEASURED, PHASE_REPLAYED, PHASE_ALONE = 0, 1, 2

# the environment of a probed job: where the records go (its presence switches the hooks on),
# and whether the ceilings are to be measured (the loop then keeps its last batches)
ENV_DIR = "IOBENCH_PROBE_DIR"
ENV_CEILINGS = "IOBENCH_PROBE_CEILINGS"
CONTROL_NAME = "control.json"  # written by iobench probe: where each stream's window ends
HOOK_ERROR_PREFIX = "hook-error-"  # a process whose hooks failed to load leaves <prefix><pid>.txt


def log_name(pid: int) -> str:
    return f"p{pid}.jsonl"
