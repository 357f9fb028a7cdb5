"""The launcher of a multi-rank cell: torch's own torchrun, tied to the sweep that started it.

    python -m iobench.cell.torchrun [torchrun arguments] -m iobench.cell.rank CELL.json RUN_DIR

It is ``torch.distributed.run`` in a process that dies with the sweep (lifeline.py), so a killed
sweep's torchrun stops its ranks; each rank is tied to torchrun the same way, because torchrun
starts every rank in a session of its own, out of reach of the sweep's kill of the cell's group.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from iobench.cell.lifeline import die_with_parent


@dataclass(frozen=True)
class NodePlace:
    """Where this node stands in a multi-node run, from its own sweep command line."""

    node_rank: int
    endpoint: str  # HOST:PORT on node 0, where torchrun's rendezvous store listens


def torchrun_command(
    spec: Path,
    run_dir: Path,
    *,
    ranks_per_node: int,
    nodes: int,
    place: NodePlace | None,
    run_id: str,
    timeout_s: int,
) -> list[str]:
    """One cell on ``ranks_per_node`` ranks here (and as many on each of the other nodes).

    One node: ``--standalone`` (a rendezvous on a free local port). Several: torchrun's static
    rendezvous at node 0's endpoint, so node k's ranks are k x ranks_per_node onwards and rank 0
    (which writes the results) is on node 0; ``run_id`` (the cell) keeps one cell's rendezvous
    apart from the next one's on the same port, and the nodes wait up to ``timeout_s`` (the cell's
    limit) for each other.
    """
    cmd = [sys.executable, "-m", "iobench.cell.torchrun", f"--nproc-per-node={ranks_per_node}"]
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
            f"--rdzv-conf=timeout={timeout_s}",
        ]
    return [*cmd, "--max-restarts=0", "-m", "iobench.cell.rank", str(spec), str(run_dir)]


def main() -> None:
    die_with_parent()
    from torch.distributed.run import main as torchrun

    torchrun(sys.argv[1:])


if __name__ == "__main__":
    main()
