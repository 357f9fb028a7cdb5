"""What recommend's answer must be for ANY input, property-tested over a generated grid of jobs and
nodes (docs/recommend.md, *What holds for any input*):

1. the recommendation fits its node (capacity, RAM, cores; its remote reads within the storage
   network), or there is none;
2. it has the highest AU of the feasible options whose rates are known (ties: fewer cores, then
   less hardware);
3. when no option reaches the target AU the answer says so first, and names the cheapest change
   that would, which does when applied (a rate, drives, RAM, cores, GPU decode);
4. a published rule never "agrees" with an option below the target;
5. a rate measured on another kind of device, or a buffered read that fits in RAM, is refused or
   flagged before it is used, and an answer is never judged on a flagged figure.

The grid: dataset 10 GB - 1 PB (16 sizes), 1-4,096 accelerators (15 counts) of every catalog type
(8) at 1-16 per node, the node's RAM (8), cores (12), NVMe drives (0-16) of 6 sizes and 3 PCIe
generations, its storage network (6), the workload decoded or read (2) at 5 sample sizes, the
trainers' cores kept or not (2), and each of 4 backend rates missing, given (4 values) or measured by
a sweep (4 values). GRID_SIZE counts it; hypothesis draws FUZZ's examples from it each run.
"""

from __future__ import annotations

import json
import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iobench.accelerators.demand import DEMANDS, accelerator_facts, load_accelerator_table, lookup_demand
from iobench.analysis.verdict import AU_TARGET
from iobench.recommend.answer import Answer, answer
from iobench.recommend.calibrate import Calibration, Figure, MeasuredOn, TierFigures
from iobench.recommend.changes import COST, apply, changes
from iobench.recommend.claims import WRITE_UP_TABLE
from iobench.recommend.hypotheses import CLAIMED_SETUPS, tier_check
from iobench.recommend.placements import PlacementOption, Scenario, evaluate, options
from iobench.recommend.rates import read_benchmark
from iobench.recommend.servers import nvme_read_per_device
from iobench.recommend.storages import HARDWARE
from tests.helpers.faultkit import FUZZ

TB, GB = 1e12, 1e9
DATASETS = [10 * GB * 10 ** (k / 3) for k in range(16)]  # 10 GB .. 1 PB
COUNTS = [1, 2, 3, 4, 7, 8, 9, 16, 32, 64, 100, 256, 512, 1024, 4096]
TYPES = sorted(load_accelerator_table())
PER_NODE = range(1, 17)
RAMS = [1 * GB, 16 * GB, 64 * GB, 256 * GB, 512 * GB, 1 * TB, 2 * TB, 4 * TB]
CORES = [1, 2, 4, 8, 16, 32, 64, 96, 112, 128, 192, 256]
DRIVES = range(0, 17)
DRIVE_SIZES = [0.96 * TB, 1.92 * TB, 3.84 * TB, 7.68 * TB, 15.36 * TB, 30.72 * TB]
GENERATIONS = [3, 4, 5]
NICS = [None, 12.5 * GB, 25 * GB, 50 * GB, 100 * GB, 200 * GB]
SAMPLES = [1e3, 115_657.0, 322_957.0, 2_164_832.0, 146_600_628.0]
RATES = [0.5 * GB, 2.5 * GB, 10 * GB, 50 * GB]
KEYS = ("nvme", "object", "ceph", "pfs")
GIVEN_DEMANDS = [100.0, 1000.0, 5000.0, 10_000.0]
RATE_CHOICES = 1 + 2 * len(RATES)  # missing, given or measured at each rate
GRID_SIZE = (
    len(DATASETS)
    * len(COUNTS)
    * len(TYPES)
    * len(PER_NODE)
    * len(RAMS)
    * len(CORES)
    * len(DRIVES)
    * len(DRIVE_SIZES)
    * len(GENERATIONS)
    * len(NICS)
    * 2
    * len(SAMPLES)
    * 2
    * RATE_CHOICES ** len(KEYS)
)


def _demand(kind: str, pick: int, given_rate: float) -> Figure:
    """One of the table's figures for ``kind`` (any model and demand), else a rate given by the user."""
    models = load_accelerator_table()[kind]["models"]
    figures = [(m, d) for m in sorted(models) for d in DEMANDS if d in models[m]]
    if not figures or pick >= len(figures):
        return Figure(given_rate, "given with --per-accelerator", origin="given")
    d = lookup_demand(kind, *figures[pick])
    return Figure(d.samples_per_s, d.source, origin=d.origin)  # type: ignore[arg-type]


def _measured(key: str, rate: float) -> TierFigures:
    kind = {"nvme": "local", "object": "s3", "ceph": "rados", "pfs": "local"}[key]
    device = {"nvme": "nvme-raid", "pfs": "pfs"}.get(key, "remote")
    on = MeasuredOn("target", "cpu", 64, 1 << 40, False, device, f"{key} as measured")
    return TierFigures(
        f"{key}-tier", kind, Figure(rate, f"measured {key}", origin="measured"), None, None, 0.05, on
    )


@st.composite
def cases(draw: st.DrawFn) -> tuple[Scenario, Calibration | None]:
    kind = draw(st.sampled_from(TYPES))
    facts = accelerator_facts(kind)
    assert facts is not None
    drives, each = draw(st.sampled_from(DRIVES)), draw(st.sampled_from(DRIVE_SIZES))
    rates, measured = {}, {}
    for key in KEYS:
        how, rate = draw(st.sampled_from(["missing", "given", "measured"])), draw(st.sampled_from(RATES))
        if how == "given":
            rates[key] = Figure(rate, f"given: --tier-rate {key}", origin="given")
        elif how == "measured":
            measured[key] = _measured(key, rate)
    from iobench.recommend.rates import MeasuredRates

    s = Scenario(
        dataset_bytes=draw(st.sampled_from(DATASETS)),
        sample_bytes=draw(st.sampled_from(SAMPLES)),
        accelerators=draw(st.sampled_from(COUNTS)),
        accelerator=kind,
        per_accelerator=_demand(kind, draw(st.integers(0, 12)), draw(st.sampled_from(GIVEN_DEMANDS))),
        accelerator_memory_bytes=facts.memory_bytes,
        nvme_devices=drives,
        nvme_bytes=drives * each,
        ram_bytes=draw(st.sampled_from(RAMS)),
        cores=draw(st.sampled_from(CORES)),
        per_node=draw(st.sampled_from(PER_NODE)),
        nvme_device_rate=nvme_read_per_device(draw(st.sampled_from(GENERATIONS))),
        rates=MeasuredRates(rates),
        decoding=draw(st.sampled_from(["jpeg", "none"])),
        nic_bytes_per_s=draw(st.sampled_from(NICS)),
        trainer_cores=draw(st.sampled_from([None, Figure(1, "a trainer's core", origin="reference")])),
        vendor=facts.vendor,
    )
    if s.sample_bytes > s.dataset_bytes:
        s = Scenario(**{**s.__dict__, "sample_bytes": s.dataset_bytes / 100})
    cal = (
        # a sweep's calibration as calibrate() makes one: its collate CPU beside the tiers it measured
        Calibration(
            cells=[],
            collate_ms=Figure(0.02, "collate", origin="measured"),
            overhead_ms=None,
            trainer_ms=None,
            tiers=measured,
        )
        if measured
        else None
    )
    return s, cal


def _fits(s: Scenario, o: PlacementOption) -> None:
    """The option holds on its node: the dataset (or its share) on the NVMe, the RAM, the cores,
    the storage network."""
    if o.setup == "local":
        assert s.dataset_bytes <= s.nvme_bytes
    if o.setup == "sharded":
        assert s.nodes > 1 and s.dataset_bytes / s.nodes <= s.nvme_bytes
    assert o.ram.loader_buffers_bytes + (
        o.cache_bytes if o.setup in ("local", "sharded", "pfs", "ceph+ram") else 0
    ) <= s.ram_bytes * (1 + 1e-9)
    assert s.reserved_cores + 1 <= s.cores
    if s.nic_bytes_per_s:
        assert o.remote_bytes_per_s <= s.nic_bytes_per_s * (1 + 1e-6)


def _answered(s: Scenario, cal: Calibration | None) -> tuple[list[PlacementOption], Answer]:
    """The options for ``s``, ranked, and the answer recommend gives (crossovers aside)."""
    opts = options(s, cal)
    return opts, answer(s, tuple(opts), tuple(changes(s, opts, cal)), ())


@FUZZ
@given(cases())
def test_the_answer_fits_its_node_and_is_the_best_that_does(case):
    s, cal = case
    opts, a = _answered(s, cal)
    candidates = [o for o in opts if o.feasible and not o.conditional]
    if a.option is None:  # invariant 1: none fits with its rates known, and the answer says so
        assert not candidates and a.headline.startswith(f"No option reaches AU {AU_TARGET:.2f}")
        return
    o = a.option
    assert o.feasible and not o.conditional
    _fits(s, o)
    # invariant 2: the highest AU of the feasible options; at equal AU fewer cores, then less hardware
    for other in candidates:
        au, mine = round(other.prediction.au or 0, 2), round(o.prediction.au or 0, 2)
        assert mine >= au, (o.label, other.label)
        if mine == au:
            cores, theirs = math.ceil(o.cores_needed - 1e-9), math.ceil(other.cores_needed - 1e-9)
            assert cores <= theirs, (o.label, other.label)
            if cores == theirs:
                assert HARDWARE[o.setup] <= HARDWARE[other.setup], (o.label, other.label)
    assert a.reaches == o.reaches == any(c.reaches for c in candidates)


@FUZZ
@given(cases())
def test_below_the_target_the_answer_says_so_first_and_names_a_change_that_works(case):
    s, cal = case
    _, a = _answered(s, cal)
    if a.reaches:
        assert a.headline.startswith("Buy: ") and not a.changes
        return
    assert a.headline.startswith(f"No option reaches AU {AU_TARGET:.2f}")  # invariant 3: said first
    assert [c.cost for c in a.changes] == sorted(c.cost for c in a.changes)  # cheapest first
    if not a.changes:
        assert "No change of a rate, drives, RAM, cores or GPU decode alone reaches it" in a.headline
        return
    first = a.changes[0]
    assert first.kind in COST and f"The cheapest change that would: {first.words}" in a.headline
    # the change, made, reaches the target on the option it names
    after = evaluate(apply(s, first.what), first.setup, first.decode, cal)
    assert after is not None and after.reaches and after.label == first.option


@FUZZ
@given(cases())
def test_a_published_rule_never_agrees_with_an_option_below_the_target(case):
    s, cal = case
    for claim in WRITE_UP_TABLE:
        check = tier_check(s, cal, claim)
        if check.agrees:
            from dataclasses import replace

            best = options(replace(s, dataset_bytes=claim.check_at_bytes), cal)[0]
            assert best.setup in CLAIMED_SETUPS[claim.setup] and best.reaches and best.judged


def _fio(tmp_path, devices: list[str], direct: bool, size: str | None, n: int) -> str:
    opts = {"rw": "read", "bs": "1M", "direct": "1" if direct else "0", "numjobs": "1"}
    if size:
        opts["size"] = size
    doc = {
        "fio version": "fio-3.33",
        "jobs": [{"jobname": "r", "job options": opts, "read": {"bw_bytes": 2.5e9}}],
        "disk_util": [{"name": d} for d in devices],
    }
    path = tmp_path / f"fio-{n}.json"
    path.write_text(json.dumps(doc))
    return str(path)


@FUZZ
@given(
    devices=st.lists(
        st.sampled_from(["nvme0n1", "nvme3n1", "md0", "vda", "sda", "xvdb", "dm-0"]), max_size=3
    ),
    direct=st.booleans(),
    size=st.sampled_from([None, "64M", "8G", "600G", "4T"]),
    ram=st.sampled_from(RAMS),
    key=st.sampled_from(["nvme", "nvme-device", "pfs"]),
)
def test_a_rate_that_cannot_be_the_tiers_is_refused_or_flagged_before_use(
    tmp_path_factory, devices, direct, size, ram, key
):
    path = _fio(tmp_path_factory.mktemp("fio"), devices, direct, size, 0)
    footprint = {None: None, "64M": 64 * 2**20, "8G": 8 * 2**30, "600G": 600 * 2**30, "4T": 4 * 2**40}[size]
    other_device = key != "pfs" and devices and not any(re.match(r"^(nvme\d|md\d)", d) for d in devices)
    fits_in_ram = not direct and footprint is not None and footprint <= ram
    try:
        f = read_benchmark(path, key, f"--tier-rate {key}=...", ram)
    except ValueError as exc:  # invariant 5: refused, saying why
        assert other_device or fits_in_ram, exc
        assert ("not an NVMe drive" in str(exc)) if other_device else ("the page cache served it" in str(exc))
        return
    assert not other_device and not fits_in_ram
    assert bool(f.caveat) == (not direct and footprint is None)  # flagged where the file cannot tell
    assert f.known == (not f.caveat)  # an answer is never judged on a flagged figure


def test_the_grid_is_the_size_the_docs_say():
    # 16 x 15 x 8 x 16 x 8 x 12 x 17 x 6 x 3 x 6 x 2 x 5 x 2 x 9**4
    assert 16 * 15 * len(TYPES) * 16 * 8 * 12 * 17 * 6 * 3 * 6 * 2 * 5 * 2 * 9**4 == GRID_SIZE
    assert len(TYPES) == 8 and f"{GRID_SIZE:.2e}" == "7.11e+14"


@pytest.mark.parametrize("kind", TYPES)
def test_every_catalog_type_gets_an_answer_or_a_request_for_its_rate(kind):
    from iobench.recommend.cli import recommend
    from tests.unit.recommend.test_model import _args

    argv = [
        "--dataset-size",
        "5TB",
        "--accelerators",
        f"8x{kind}",
        "--nvme",
        "8x3.84TB",
        "--ram",
        "2TB",
        "--cores",
        "112",
    ]
    if not load_accelerator_table()[kind]["models"]:
        with pytest.raises(
            ValueError, match=r"no public source found gives what one .* consumes.*--per-accelerator"
        ):
            recommend(_args(*argv))
        argv += ["--per-accelerator", "2000"]
    models = load_accelerator_table()[kind]["models"]
    if models and "resnet50" not in models:
        argv += ["--model", sorted(models)[0]]
    report = recommend(_args(*argv))
    assert report.answer.headline
    dali = any(o.decode == "dali" for o in report.options)
    assert dali == (accelerator_facts(kind).vendor == "nvidia" and report.scenario.decoding == "jpeg")
