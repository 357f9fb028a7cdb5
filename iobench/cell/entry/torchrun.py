"""The launcher of a multi-rank cell: torch's own torchrun, tied to the sweep that started it.

    python -m iobench.cell.entry.torchrun [torchrun arguments] -m iobench.cell.entry.rank CELL.json RUN_DIR

(the command is the protocol's: cell/protocol.py)

It is ``torch.distributed.run`` in a process that dies with the sweep (lifeline.py), so a killed
sweep's torchrun stops its ranks; each rank is tied to torchrun the same way, because torchrun
starts every rank in a session of its own, out of reach of the sweep's kill of the cell's group.
"""

from __future__ import annotations

import sys

from iobench.cell.lifeline import die_with_parent


def main() -> None:
    die_with_parent()
    from torch.distributed.run import main as torchrun

    torchrun(sys.argv[1:])


if __name__ == "__main__":
    main()
