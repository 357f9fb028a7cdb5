"""What ``iobench recommend`` answers, as one typed record: the terminal and the --json document
both read it (render.py)."""

from __future__ import annotations

from dataclasses import dataclass

from iobench.analysis.knee import Knee

from .answer import Answer
from .calibrate import Calibration
from .changes import Change
from .crossovers import Crossover, Leader
from .hostcheck import Carried
from .hypotheses import Check
from .mixrule import MixCell
from .placements import PlacementOption, Scenario
from .scale import AtScale
from .validate import CellCheck

SCHEMA_VERSION = 2  # of the --json document: 2 adds schema_version and recommendation


@dataclass(frozen=True)
class Recommendation:
    scenario: Scenario
    answer: Answer  # what to buy, why, what would change it (the options' first feasible known one)
    options: tuple[PlacementOption, ...]  # ranked, best first
    changes: tuple[Change, ...]  # what would make an option reach the target, cheapest first
    crossovers: tuple[Crossover, ...]  # dataset sizes where the leader changes, with the reason
    leaders: tuple[Leader, ...]
    hypotheses: tuple[Check, ...]  # the published claims and rules of thumb, judged or not
    # from --results: the sweep's cells as model inputs, what of them carries to the target, each
    # cell predicted without itself, the job predicted at scale, the worker count that trains fastest
    calibration: Calibration | None = None
    carried_over: tuple[Carried, ...] = ()
    validation: tuple[CellCheck, ...] = ()
    at_scale: tuple[AtScale, ...] = ()
    knees: tuple[Knee, ...] = ()
    mix_cells: tuple[MixCell, ...] = ()  # --results' partial-hit cache cells, each predicted by both rules
