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

from .calibrate import Calibration, cpu_bound
from .claims import WRITE_UP, WRITE_UP_TABLE, Claim
from .placements import Option, Scenario, options
from .reasons import label, standing, why_ahead

SOURCE = WRITE_UP
SCALING_CLAIM = 3.2 / 4  # "96 cores ~ 3.2 x faster than 24": 3.2 of a linear 4


@dataclass(frozen=True)
class Check:
    rule: str
    source: str
    model_says: str
    agrees: bool | None  # the rule and the model reach the same verdict here; None: cannot say


def _unknown(o: Option) -> str:
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
    """The write-up's storage rule for one range of sizes, at ``claim.check_at_bytes``."""
    size = claim.check_at_bytes
    rule = (
        f"{claim.sizes()}: {claim.words}, ~{claim.bytes_per_s / 1e9:g} GB/s (checked at {size / 1e12:g} TB)"
    )
    if claim.setup == "local" and s.nvme_bytes < size:
        have = f"{s.nvme_bytes / 1e12:.2f} TB of NVMe per node" if s.nvme_bytes else "no local NVMe"
        return Check(rule, SOURCE, f"cannot be judged on this server: it has {have}", None)
    ranked = options(replace(s, dataset_bytes=size), cal)
    best = ranked[0]
    mine = next(o for o in ranked if o.setup == claim.setup)
    if best.setup == claim.setup:
        if best.judged:
            return Check(rule, SOURCE, f"{label(best)} leads: {standing(best)}", True)
        return Check(
            rule,
            SOURCE,
            f"{label(best)} leads, but on figures not measured or given here: {_unknown(best)}",
            None,
        )
    if best.judged and (mine.judged or not mine.feasible):
        fits = (
            f"the dataset fits a node's NVMe ({s.nvme_bytes / 1e12:.2f} TB); "
            if best.setup == "local" and claim.setup != "local"
            else ""
        )
        return Check(rule, SOURCE, f"{label(best)} leads: {fits}{why_ahead(best, mine)}", False)
    if not best.judged:
        said = f"{label(best)} leads, but its figures are not measured or given here: {_unknown(best)}"
    else:
        said = (
            f"{label(best)} leads ({standing(best)}), but {mine.name}'s figures are not measured or given "
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
        rule=f"{rule} (4 x {s.node_accelerators} x {s.accelerator_memory_bytes / 2**30:,.0f} GiB = {wanted / 1e9:,.0f} GB per node)",
        source=SOURCE,
        model_says=f"the leading option needs {need / 1e9:,.0f} GB per node (loader buffers and cache); "
        f"the node has {s.ram_bytes / 1e9:,.0f} GB",
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
