"""The published rules of thumb, each set against what the model predicts for the target node.

They come from a vendor-style write-up (quoted in docs/recommend.md "Published claims"): hypotheses
to test on the user's hardware, never inputs to the ranking. A rule is judged only on figures
measured or given for this case, never on the write-up's own figures (that would test it against
itself) nor on rates the demand caps (a pipeline that feeds the demand at 24 and at 96 cores says
nothing about how preprocessing scales). A rule about hardware the target does not have, or that
needs a figure nobody gave, says so instead of agreeing or disagreeing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from iobench.analysis.verdict import AU_TARGET

from .calibrate import Calibration, cpu_bound
from .claims import WRITE_UP, WRITE_UP_TABLE, Claim
from .placements import PlacementOption, Scenario, options
from .reasons import standing, why_ahead

SOURCE = WRITE_UP
SCALING_CLAIM = 3.2 / 4  # "96 cores ~ 3.2 x faster than 24": 3.2 of a linear 4
# the setups a row of the write-up names: "object storage" behind an NVMe cache is any object
# backend (Ceph's RADOS Gateway included)
CLAIMED_SETUPS = {"local": ("local",), "object+nvme": ("object+nvme", "ceph+nvme"), "ceph+ram": ("ceph+ram",)}


@dataclass(frozen=True)
class Check:
    rule: str
    source: str
    model_says: str
    agrees: bool | None  # the rule and the model reach the same verdict here; None: cannot say


def _unknown(o: PlacementOption) -> str:
    """Which of an option's storage figures are not measured or given, and where they come from."""
    if o.conditional:
        return o.conditional
    weak = [
        f"{name.split(' (')[0]}: {f.origin}"
        for name, f in o.inputs.items()
        if name.startswith(("backend", "delivered")) and not f.known
    ]
    return "; ".join(weak) + " (give --tier-rate, --rates or --results to judge it)"


def tier_check(s: Scenario, cal: Calibration | None, claim: Claim) -> Check:
    """The write-up's storage rule for one range of sizes, at ``claim.check_at_bytes``. It agrees
    only where the model's leader is the row's setup, judged on measured or given figures, and
    reaches the target AU: a rule never agrees with an option that starves the accelerators."""
    size = claim.check_at_bytes
    u = s.units
    rule = f"{claim.sizes(u)}: {claim.words}, ~{u.rate(claim.bytes_per_s)} (checked at {u.size(size)})"
    if claim.setup == "local" and s.nvme_bytes < size:
        have = f"{u.size(s.nvme_bytes)} of NVMe per node" if s.nvme_bytes else "no local NVMe"
        return Check(rule, SOURCE, f"cannot be judged on this server: it has {have}", None)
    ranked = options(replace(s, dataset_bytes=size), cal)
    best = ranked[0]
    setups = CLAIMED_SETUPS[claim.setup]
    mine = next(o for o in ranked if o.setup in setups)
    if best.setup in setups:
        if not best.judged:
            return Check(
                rule,
                SOURCE,
                f"{best.label} leads, but on figures not measured or given here: {_unknown(best)}",
                None,
            )
        if not best.reaches:
            return Check(
                rule,
                SOURCE,
                f"{best.label} leads but does not reach AU {AU_TARGET:.2f}: {standing(best, u)}"
                + (f"; it does not fit the node: {best.why_not}" if not best.feasible else ""),
                False,
            )
        return Check(rule, SOURCE, f"{best.label} leads: {standing(best, u)}", True)
    if best.judged and (mine.judged or not mine.feasible):
        fits = (
            f"the dataset fits a node's NVMe ({u.size(s.nvme_bytes)}); "
            if best.setup == "local" and claim.setup != "local"
            else ""
        )
        return Check(rule, SOURCE, f"{best.label} leads: {fits}{why_ahead(best, mine, u)}", False)
    if not best.judged:
        said = f"{best.label} leads, but its figures are not measured or given here: {_unknown(best)}"
    else:
        said = (
            f"{best.label} leads ({standing(best, u)}), but {mine.name}'s figures are not measured or given "
            f"here: {_unknown(mine)}"
        )
    return Check(rule, SOURCE, said, None)


def _ram_check(s: Scenario, cal: Calibration | None) -> Check:
    rule = "host RAM >= 4 x total GPU memory"
    if not s.accelerator_memory_bytes:
        return Check(rule, SOURCE, "the accelerator's memory is not known", None)
    best = options(s, cal)[0]
    need = best.ram.needed_bytes
    wanted = 4 * s.accelerator_memory_bytes * s.node_accelerators
    return Check(
        rule=f"{rule} (4 x {s.node_accelerators} x {s.units.size(s.accelerator_memory_bytes)} = "
        f"{s.units.size(wanted)} per node)",
        source=SOURCE,
        model_says=f"the leading option needs {s.units.size(need)} per node (loader buffers and cache); "
        f"the node has {s.units.size(s.ram_bytes)}",
        agrees=(s.ram_bytes >= wanted) == (s.ram_bytes >= need),
    )


def _scaling_measured(cal: Calibration | None) -> tuple[float, float, float] | None:
    """(fewer cores, more cores, rate ratio) from CPU-bound cells whose workers filled hosts of two
    core counts: a measurement of how preprocessing scales with the cores."""
    if cal is None:
        return None
    full = [c for c in cal.cells if cpu_bound(c) and c.workers >= c.cores_usable]
    counts = sorted({c.cores_usable for c in full})
    if len(counts) < 2:
        return None
    best = {n: max(c.samples_per_s for c in full if c.cores_usable == n) for n in (counts[0], counts[-1])}
    return counts[0], counts[-1], best[counts[-1]] / best[counts[0]]


def _cores_checks(s: Scenario, cal: Calibration | None) -> list[Check]:
    # the local option is always in the list; its CPU figures are every option's
    cpu = next(o for o in options(s, cal) if o.decode in ("cpu", "none"))
    what = "reading" if cpu.decode == "none" else "CPU decode"
    rate = cpu.inputs.get("CPU decode+augment per core (samples/s)") or cpu.inputs.get(
        "CPU to read a sample, no decoding (ms per sample)"
    )
    out = [
        Check(
            rule="at least 1 CPU core per 2 GPUs",
            source=SOURCE,
            model_says=f"{what} for {s.node_accelerators} x {s.accelerator} on a node needs {cpu.cores_needed:,.0f} "
            f"cores ({cpu.cores_per_accelerator:,.1f} per GPU, trainers included), at {rate.source if rate else '?'}",
            agrees=cpu.cores_per_accelerator <= 0.5,
        )
    ]
    rule = "DataLoader preprocessing: 96 cores ~ 3.2 x faster than 24"
    measured = _scaling_measured(cal)
    few, many = replace(s, cores=24), replace(s, cores=96)
    model = many.loader_cores / few.loader_cores
    if measured is None:
        out.append(
            Check(
                rule,
                SOURCE,
                f"no measurement at two core counts. The model takes preprocessing to scale with "
                f"the cores left after the trainers' ({many.loader_cores} / {few.loader_cores} = {model:.1f} x, "
                "its capacity, not capped by the demand); a sweep on 24 and on 96 cores (taskset, or a cgroup "
                "CPU limit) would judge it",
                None,
            )
        )
    else:
        lo, hi, ratio = measured
        efficiency = ratio / (hi / lo)
        out.append(
            Check(
                rule,
                SOURCE,
                f"measured: CPU-bound cells on {lo} and {hi} cores delivered {ratio:.2f} x ({efficiency:.0%} of linear); "
                f"the claim is {SCALING_CLAIM:.0%} of linear",
                math.isclose(efficiency, SCALING_CLAIM, rel_tol=0.15),
            )
        )
    return out


def checks(s: Scenario, cal: Calibration | None) -> list[Check]:
    return [*(tier_check(s, cal, c) for c in WRITE_UP_TABLE), _ram_check(s, cal), *_cores_checks(s, cal)]
