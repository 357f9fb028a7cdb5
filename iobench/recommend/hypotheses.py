"""The published rules of thumb, each set against what the model predicts for the target server.

They come from a vendor-style write-up (quoted in docs/recommend.md "Published claims"):
hypotheses to test on the user's hardware, never inputs to the ranking. Each is judged on the
server the recommendation is for: a rule about hardware the target does not have cannot be
judged there, and says so.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from .calibrate import Calibration
from .crossovers import label
from .placements import Scenario, options

SOURCE = "docs/recommend.md 'Published claims'"
# the write-up's storage rule, checked at one size inside each of its ranges: (size, tier, rule)
TIER_RULE = (
    (0.5e12, "local NVMe", "< 1 TB: 4 x NVMe RAID0"),
    (5e12, "object store + NVMe cache", "1-10 TB: 2 x NVMe cache + object storage"),
    (50e12, "Ceph + RAM cache", "> 10 TB: Ceph + memory cache"),
)


@dataclass(frozen=True)
class Check:
    rule: str
    source: str
    model_says: str
    agrees: bool | None  # the rule and the model reach the same verdict here; None: cannot say

    def as_dict(self) -> dict:
        return asdict(self)


def _tier_checks(s: Scenario, cal: Calibration | None) -> list[Check]:
    out = []
    for size, tier, rule in TIER_RULE:
        at = f"{rule} (checked at {size / 1e12:g} TB)"
        if tier == "local NVMe" and s.nvme_bytes < size:
            have = f"{s.nvme_bytes / 1e12:.2f} TB of NVMe" if s.nvme_bytes else "no local NVMe"
            out.append(Check(at, SOURCE, f"cannot be judged on this server: it has {have}", None))
            continue
        best = options(replace(s, dataset_bytes=size), cal)[0]
        out.append(
            Check(
                rule=at,
                source=SOURCE,
                model_says=f"{label(best)} leads: AU {best.prediction.au:.2f}, {best.prediction.binding}-bound",
                agrees=best.name == tier,
            )
        )
    return out


def _ram_check(s: Scenario, cal: Calibration | None) -> Check:
    rule = "host RAM >= 4 x total GPU memory"
    if not s.accelerator_memory_bytes:
        return Check(rule, SOURCE, "the accelerator's memory is not known", None)
    best = options(s, cal)[0]
    need = best.ram.needed_bytes
    wanted = 4 * s.accelerator_memory_bytes * s.accelerators
    return Check(
        rule=f"{rule} (4 x {s.accelerators} x {s.accelerator_memory_bytes / 2**30:,.0f} GiB = {wanted / 1e9:,.0f} GB)",
        source=SOURCE,
        model_says=f"the leading option needs {need / 1e9:,.0f} GB (loader buffers and cache); "
        f"the target server has {s.ram_bytes / 1e9:,.0f} GB",
        agrees=(s.ram_bytes >= wanted) == (s.ram_bytes >= need),
    )


def _cores_checks(s: Scenario, cal: Calibration | None) -> list[Check]:
    # the object store and Ceph options are always feasible: a CPU-decode option always exists
    cpu = next(o for o in options(s, cal) if o.decode == "cpu" and o.feasible)
    per_gpu = cpu.cores_needed / s.accelerators
    out = [
        Check(
            rule="at least 1 CPU core per 2 GPUs",
            source=SOURCE,
            model_says=f"CPU decode for {s.accelerators} x {s.accelerator} needs {cpu.cores_needed:,.0f} cores "
            f"({per_gpu:,.1f} per GPU)",
            agrees=per_gpu <= 0.5,
        )
    ]
    few, many = replace(s, cores=24), replace(s, cores=96)
    a = next(o for o in options(few, cal) if o.decode == "cpu" and o.feasible)
    b = next(o for o in options(many, cal) if o.decode == "cpu" and o.feasible)
    ratio = b.prediction.samples_per_s / a.prediction.samples_per_s
    out.append(
        Check(
            rule="DataLoader preprocessing: 96 cores ~ 3.2 x faster than 24",
            source=SOURCE,
            model_says=f"{ratio:.1f} x ({a.prediction.samples_per_s:,.0f} -> {b.prediction.samples_per_s:,.0f} "
            f"samples/s; {b.prediction.binding} binds at 96 cores)",
            agrees=math.isclose(ratio, 3.2, rel_tol=0.15),
        )
    )
    return out


def checks(s: Scenario, cal: Calibration | None) -> list[Check]:
    return [*_tier_checks(s, cal), _ram_check(s, cal), *_cores_checks(s, cal)]
