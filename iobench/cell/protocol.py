"""The sweep↔cell protocol, in one place: the command that starts a cell (one process, or torchrun
and its ranks) and what the sweep tells it through the environment. The sweep's side
(sweep/runner.py, sweep/supervise.py) and the cell's (lifeline.py, live.py, ranks/distributed.py, entry/rank.py)
both read these names.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from iobench.results.spec import RunSettings

# the file of a cell's live figures that the sweep polls for its progress display (live.py)
LIVE_ENV = "IOBENCH_LIVE_FILE"
# the sweep's pid: a cell (or its torchrun) dies with it (lifeline.py)
PARENT_ENV = "IOBENCH_SWEEP_PID"
# the directory the sweep gives a cell's ranks for their error reports (ranks/distributed.py)
RANK_ERRORS_ENV = "IOBENCH_RANK_ERRORS"


def cell_environment(live: Path, rank_errors: Path) -> dict[str, str]:
    """The variables the sweep adds to a cell's environment."""
    return {LIVE_ENV: str(live), PARENT_ENV: str(os.getpid()), RANK_ERRORS_ENV: str(rank_errors)}


@dataclass(frozen=True)
class NodePlace:
    """Where this node stands in a multi-node run, from its own sweep command line."""

    node_rank: int
    endpoint: str  # HOST:PORT on node 0, where torchrun's rendezvous store listens


def cell_command(
    spec: Path, run_dir: Path, run: RunSettings, *, place: NodePlace | None, run_id: str
) -> list[str]:
    """The command that measures the cell written to ``spec`` into ``run_dir``: one process, or
    torchrun with ``run.ranks_per_node`` ranks here (and as many on each of the other nodes).

    One node: ``--standalone`` (a rendezvous on a free local port). Several: torchrun's static
    rendezvous at node 0's endpoint, so node k's ranks are k x ranks_per_node onwards and rank 0
    (which writes the results) is on node 0; ``run_id`` (the cell) keeps one cell's rendezvous
    apart from the next one's on the same port, and the nodes wait up to the cell's time limit for
    each other.
    """
    ranks, nodes = run.ranks_per_node, run.nodes
    if ranks == 1 and nodes == 1:
        return [sys.executable, "-m", "iobench.cell.entry.process", str(spec), str(run_dir)]
    cmd = [sys.executable, "-m", "iobench.cell.entry.torchrun", f"--nproc-per-node={ranks}"]
    if nodes == 1:
        cmd.append("--standalone")
    else:
        if place is None:
            raise ValueError(
                f"run.nodes={nodes}: each node's sweep needs its --node-rank and --rdzv-endpoint"
            )
        host, _, port = place.endpoint.rpartition(":")
        cmd += [
            f"--nnodes={nodes}",
            f"--node-rank={place.node_rank}",
            f"--master-addr={host}",
            f"--master-port={port}",
            f"--rdzv-id={run_id}",
            f"--rdzv-conf=timeout={run.timeout_s}",
        ]
    return [*cmd, "--max-restarts=0", "-m", "iobench.cell.entry.rank", str(spec), str(run_dir)]
