"""The recommender's arithmetic on known inputs: every expected value is worked out by hand in the
comments (docs/recommend.md gives the model)."""

from __future__ import annotations

import argparse
import json
import math
import random
import re
from collections import OrderedDict
from dataclasses import replace
from io import StringIO

import pytest
from rich.console import Console

from iobench.analysis.cores import cores_needed, cores_to_feed
from iobench.analysis.decoderate import given
from iobench.datasets.manifest import ShardEntry, build_manifest
from iobench.recommend.calibrate import (
    Calibration,
    CellFacts,
    Figure,
    TierFigures,
    calibrate,
    fetch_limited,
    overhead_of,
    tier_bandwidth,
    trainer_ms_of,
)
from iobench.recommend.cli import (
    add_recommend_arguments,
    parse_count_of,
    recommend,
    recommend_command,
    scenario,
)
from iobench.recommend.crossovers import crossovers, grid
from iobench.recommend.hypotheses import checks
from iobench.recommend.model import (
    hit_ratio,
    loader_buffers,
    loader_rate,
    max_accelerators,
    mixed_rate,
    predict,
    ram_plan,
    required,
)
from iobench.recommend.placements import Scenario, options
from iobench.recommend.rates import MeasuredRates
from iobench.recommend.validate import check_cell

GB, TB = 1e9, 1e12


# -- model ---------------------------------------------------------------------------------------


def test_required_rate_and_bandwidth():
    r = required(8, 7000, 110_000)  # 8 x 7,000 = 56,000 samples/s; x 110 KB = 6.16 GB/s
    assert r.samples_per_s == 56_000 and r.bytes_per_s == pytest.approx(6.16e9)
    with pytest.raises(ValueError, match="accelerators=0"):
        required(0, 7000, 110_000)


@pytest.mark.parametrize(
    ("cache", "policy", "access", "epoch", "expected"),
    [
        (2 * TB, "lru", "shuffled", 0, 0.0),  # the first epoch starts with an empty cache
        (2 * TB, "lru", "shuffled", 1, 1.0),  # holds the whole 1 TB dataset
        (0.25 * TB, "static", "shuffled", 3, 0.25),  # pins a quarter: a quarter of the reads
        (0.5 * TB, "lru", "shuffled", 1, 0.153426),  # r = 0.5: 0.5 + 0.5 ln 0.5
        (0.9 * TB, "lru", "shuffled", 1, 0.669741),  # r = 0.9: 0.9 + 0.1 ln 0.1
        (0.9 * TB, "lru", "sequential", 1, 0.0),  # same order each epoch: evicted just before reuse
        (0.0, "static", "shuffled", 1, 0.0),
    ],
)
def test_hit_ratio_by_policy(cache, policy, access, epoch, expected):
    assert hit_ratio(cache, 1 * TB, policy, access, epoch=epoch) == pytest.approx(expected, abs=1e-6)


def test_hit_ratio_rejects_unknown_policy():
    with pytest.raises(ValueError, match="cache policy 'fifo': allowed values are lru, static"):
        hit_ratio(1, 2, "fifo", "shuffled", epoch=1)


def _simulated_lru(shards: int, capacity: int, epochs: int, shuffled: bool) -> float:
    """Hit ratio of a real LRU (an OrderedDict) over full passes, after the first."""
    rng = random.Random(7)
    cache: OrderedDict[int, None] = OrderedDict()
    order = list(range(shards))
    hits = reads = 0
    for epoch in range(epochs):
        if shuffled:
            rng.shuffle(order)
        for shard in order:
            if epoch > 0:
                reads += 1
                hits += shard in cache
            cache[shard] = None
            cache.move_to_end(shard)
            if len(cache) > capacity:
                cache.popitem(last=False)
    return hits / reads


@pytest.mark.parametrize(("capacity", "shuffled"), [(50, True), (90, True), (99, True), (90, False)])
def test_the_lru_formula_matches_an_lru(capacity, shuffled):
    simulated = _simulated_lru(200, 2 * capacity, 300, shuffled)
    formula = hit_ratio(2 * capacity, 200, "lru", "shuffled" if shuffled else "sequential", epoch=1)
    assert simulated == pytest.approx(formula, abs=0.02)


def test_mixed_rate_weights_time_not_rate():
    # half the samples at 4 GB/s, half at 1 GB/s: 0.5/4 + 0.5/1 = 0.625 s per GB -> 1.6 GB/s, not 2.5
    assert mixed_rate(0.5, 4.0, 1.0) == pytest.approx(1.6)
    assert mixed_rate(1.0, 4.0, 1.0) == 4.0 and mixed_rate(0.0, 4.0, 1.0) == 1.0


def test_loader_rate_with_workers_is_the_smallest_part():
    # 2 workers on 2 cores at 2.5 ms of CPU per sample: 800/s of prep; the link gives 500/s
    p = loader_rate(workers=2, cores=2, cpu_s_per_sample=2.5e-3, fetch_rate=500.0, demand=7000.0)
    assert p.samples_per_s == 500.0 and p.binding == "fetch" and p.au == pytest.approx(500 / 7000)
    # 4 workers on the same 2 cores: still 2 cores of prep, 800/s
    p = loader_rate(workers=4, cores=2, cpu_s_per_sample=2.5e-3, fetch_rate=math.inf, demand=7000.0)
    assert p.samples_per_s == pytest.approx(800.0) and p.binding == "prep"
    # a slow consumer binds
    p = loader_rate(workers=2, cores=2, cpu_s_per_sample=2.5e-3, fetch_rate=math.inf, demand=60.0)
    assert p.samples_per_s == 60.0 and p.binding == "accelerator" and p.au == 1.0


def test_the_training_process_competes_for_cores_only_when_the_workers_fill_them():
    # 2.5 ms per sample in a worker, 0.5 ms in the training process: 1 worker on 2 cores gives 400/s
    # (the training process has the other core); 2 workers share the 2 cores with it: 2 / 3 ms
    one, two = (
        loader_rate(
            workers=n,
            cores=2,
            cpu_s_per_sample=2.5e-3,
            fetch_rate=math.inf,
            demand=7000.0,
            main_s_per_sample=0.5e-3,
        )
        for n in (1, 2)
    )
    assert one.samples_per_s == pytest.approx(400.0) and two.samples_per_s == pytest.approx(2 / 3e-3)


def test_loader_rate_without_workers_adds_load_and_compute_times():
    # 2 ms of CPU, then 1 ms of compute (1,000/s) per sample, one after the other: 333/s, AU 1/3
    p = loader_rate(workers=0, cores=2, cpu_s_per_sample=2e-3, fetch_rate=math.inf, demand=1000.0)
    assert p.samples_per_s == pytest.approx(1000 / 3) and p.au == pytest.approx(1 / 3) and p.binding == "prep"
    p = loader_rate(workers=0, cores=2, cpu_s_per_sample=2e-3, fetch_rate=200.0, demand=1000.0)
    assert p.samples_per_s == 200.0 and p.binding == "fetch"


def test_predict_refuses_unknown_parts():
    with pytest.raises(ValueError, match="unknown parts"):
        predict({"decode": 1.0}, 10.0)


def test_cores_buffers_ram_and_capacity():
    assert cores_to_feed(56_000, 2.5) == pytest.approx(140.0)
    assert cores_to_feed(56_000, 2.5, trainer_cores=8) == pytest.approx(148.0)
    assert loader_buffers(8, 2, 256, 1e6) == pytest.approx(8.192e9)  # 8 x (2 + 2) x 256 x 1 MB
    plan = ram_plan(
        ram_bytes=1e12, buffers_bytes=4.096e9, cache_bytes=500e9, accelerator_memory_bytes=8 * 80 * 2**30
    )
    assert plan.needed_bytes == pytest.approx(504.096e9) and plan.fits
    assert plan.rule_of_thumb_bytes == pytest.approx(4 * 8 * 80 * 2**30) and plan.meets_rule_of_thumb is False
    assert max_accelerators(45_000, 7000) == 7  # 45,000 / (0.9 x 7,000) = 7.1


# -- options, ranking, crossovers (no sweep, no measured rates: datasheets and reference figures) --


def _scenario(**kw) -> Scenario:
    base = dict(
        dataset_bytes=1 * TB,
        sample_bytes=100e3,
        accelerators=8,
        accelerator="H100",
        per_accelerator=Figure(7000.0, "test"),
        accelerator_memory_bytes=80 * 2**30,
        nvme_devices=2,
        nvme_bytes=7.68 * TB,
        ram_bytes=1 * TB,
        cores=96,
        decode=given(900.0, 100e3),  # 900 samples/s per core at this scenario's 100 KB samples
        cache_policy="lru",  # the hand-computed figures below are LRU's; auto has its own test
    )
    return Scenario(**{**base, **kw})


def test_options_on_datasheet_figures():
    opts = options(_scenario(), None)
    by = {(o.name, o.decode): o for o in opts}
    # need 56,000 samples/s. CPU: 96 cores x 900/s = 86,400/s. DALI: 8 x 7,000 = 56,000/s.
    local = by["local NVMe", "cpu"]
    # NVMe: 2 drives x 6.8 GB/s (PCIe Gen4, the datasheet of configs/servers.yaml, the generation
    # not known here); the page cache (half the RAM, 500 GB) holds r = 0.5 of the dataset, LRU under
    # shuffled epochs: hit 0.153426 at 96 x 2.3 GB/s = 220.8 GB/s:
    # 1 / (0.153426/220.8 + 0.846574/13.6) = 15.8874 GB/s = 158,874 samples/s
    backend = local.inputs["backend bandwidth (bytes/s)"]
    assert backend.value == pytest.approx(13.6e9) and backend.origin == "published"
    assert "Micron 7450 PRO" in backend.source and "Gen4 taken" in backend.source
    assert local.hit_ratio == pytest.approx(0.153426, rel=1e-5)
    assert local.fetch_bytes_per_s == pytest.approx(15.8874e9, rel=1e-5)
    assert local.prediction.au == 1.0 and local.prediction.binding == "accelerator"
    assert not local.judged  # a datasheet is not a measurement of this server
    obj = by["object store + NVMe cache", "cpu"]
    # the 7.68 TB NVMe cache holds the 1 TB dataset: every read after epoch 1 from the NVMe, 13.6 GB/s;
    # the object store is read in epoch 1 only, and nobody gave its rate: epoch 1 is not known
    assert obj.hit_ratio == 1.0 and obj.fetch_bytes_per_s == pytest.approx(13.6e9)
    assert not obj.conditional and math.isnan(obj.first_epoch_au)
    ceph = by["Ceph + RAM cache", "cpu"]
    # Ceph's rate is nobody's: the option is conditional, with the rate it needs for AU 0.9:
    # 0.9 x 56,000 x 100 KB = 5.04 GB/s through a cache serving 0.153426 at 220.8 GB/s:
    # (1 - 0.153426) / (1/5.04 - 0.153426/220.8) = 4.28173 GB/s per node
    assert "Ceph's rate is not known: give --tier-rate ceph=RATE" in ceph.conditional
    assert ceph.backend_needed_bytes_per_s == pytest.approx(4.28173e9, rel=1e-5)
    assert by["local NVMe", "dali"].prep_samples_per_s == pytest.approx(56_000)
    assert by["local NVMe", "cpu"].cores_needed == pytest.approx(56_000 / 900)
    # best first: the known options before the conditional ones; all feed the demand (AU 1), so the
    # one that keeps fewer cores busy first (DALI: no trainer cores kept here, no host CPU measured),
    # then the one with less hardware (the node alone before a storage system beside it)
    assert [(o.name, o.decode) for o in opts] == [
        ("local NVMe", "dali"),
        ("object store + NVMe cache", "dali"),
        ("local NVMe", "cpu"),
        ("object store + NVMe cache", "cpu"),
        ("parallel file system", "dali"),
        ("Ceph + RAM cache", "dali"),
        ("parallel file system", "cpu"),
        ("Ceph + RAM cache", "cpu"),
    ]
    # RAM: one worker per needed core (63), (2 + 2) x 256 x 1 MB each, plus the 500 GB page cache
    assert local.ram.loader_buffers_bytes == pytest.approx(63 * 4 * 256 * 1e6)
    assert local.ram.needed_bytes == pytest.approx(63 * 4 * 256 * 1e6 + 500e9)


def test_no_published_claim_stands_in_for_a_tier():
    # the write-up's "Ceph + memory cache ~ 5 GB/s" and "2 x NVMe cache + object storage ~ 8 GB/s"
    # are setups with their caches: neither is taken as Ceph's or the object store's rate
    for o in options(_scenario(dataset_bytes=10 * TB), None):
        for name, f in o.inputs.items():
            assert "claimed" not in f.source and "write-up" not in f.source, (o.name, name, f.source)
    # a rate given for Ceph is Ceph's, named as given, and the option is no longer conditional
    rates = MeasuredRates({"ceph": Figure(5e9, "given: --tier-rate ceph=5GB/s", origin="given")})
    ceph = next(o for o in options(_scenario(rates=rates), None) if o.name == "Ceph + RAM cache")
    assert not ceph.conditional and ceph.judged
    assert ceph.inputs["backend bandwidth (bytes/s)"].source == "given: --tier-rate ceph=5GB/s"


def test_a_dataset_larger_than_the_nvme_moves_to_the_object_store():
    by = {(o.name, o.decode): o for o in options(_scenario(dataset_bytes=10 * TB), None)}
    assert (
        not by["local NVMe", "cpu"].feasible
        and "larger than a node's NVMe" in by["local NVMe", "cpu"].why_not
    )
    obj = by["object store + NVMe cache", "cpu"]
    # r = 0.768, LRU shuffled: 0.768 + 0.232 ln 0.232 = 0.429044 of the reads hit the NVMe (13.6 GB/s);
    # the object store's rate is not known: it needs (1 - 0.429044) / (1/5.04 - 0.429044/13.6) = 3.42166 GB/s
    assert obj.hit_ratio == pytest.approx(0.429044, rel=1e-5) and obj.conditional
    assert obj.backend_needed_bytes_per_s == pytest.approx(3.42166e9, rel=1e-5)
    # given 8 GB/s for the object store: 1 / (0.429044/13.6 + 0.570956/8) = 9.71658 GB/s
    rates = MeasuredRates({"object": Figure(8e9, "given", origin="given")})
    obj = next(
        o for o in options(_scenario(dataset_bytes=10 * TB, rates=rates), None) if o.setup == "object+nvme"
    )
    assert obj.fetch_bytes_per_s == pytest.approx(9.71658e9, rel=1e-5) and obj.judged


def test_a_measured_lower_bound_does_not_cap_a_tier():
    def measured(bandwidth: Figure) -> Calibration:
        tier = TierFigures("disk", "local", bandwidth, None, None, 0.1)
        return Calibration(cells=[], collate_ms=None, overhead_ms=None, trainer_ms=None, tiers={"disk": tier})

    def nvme(cal: Calibration) -> Figure:
        local = next(o for o in options(_scenario(), cal) if o.name == "local NVMe")
        return local.inputs["backend bandwidth (bytes/s)"]

    # the disk delivered 113 MB/s while decode held it back: the datasheet's 2 x 6.8 GB/s stands
    f = nvme(measured(Figure(113e6, "delivered", lower_bound=True, origin="measured")))
    assert f.value == 13.6e9 and f.origin == "published" and "at least tier 'disk'" in f.source
    # a fetch ceiling is a measurement: it replaces the datasheet, smaller or not
    f = nvme(measured(Figure(1e9, "fetch ceiling", origin="measured")))
    assert f.value == 1e9 and f.source.startswith("measured") and f.known
    # a lower bound above the datasheet is used, still marked as a lower bound
    f = nvme(measured(Figure(19e9, "delivered", lower_bound=True, origin="measured")))
    assert f.value == 19e9 and f.lower_bound
    # the user's own rate comes first: the array, or one drive times the drives
    given_rates = MeasuredRates({"nvme-device": Figure(5e9, "given: fio", origin="given")})
    local = next(
        o
        for o in options(_scenario(rates=given_rates), measured(Figure(1e9, "x", origin="measured")))
        if o.setup == "local"
    )
    assert local.inputs["backend bandwidth (bytes/s)"].value == 10e9


def test_dali_decode_is_measured_where_a_gpu_cell_ran_it():
    gpu = _cell("dali-gpu", loader="dali", cuda=True, samples_per_s=6200.0)
    cal = calibrate([_cell("a"), gpu, _cell("dali-cpu", loader="dali", samples_per_s=9000.0)])
    assert cal.dali_gpu.value == 6200.0 and "dali-gpu" in cal.dali_gpu.source
    dali = next(o for o in options(_scenario(), cal) if o.decode == "dali")
    assert dali.inputs["DALI decode per GPU (samples/s)"].value == 6200.0
    assert dali.prep_samples_per_s <= 8 * 6200.0
    # without such a cell: the published A100 figure, said to be an A100's taken for every GPU
    dali = next(o for o in options(_scenario(), calibrate([_cell("a")])) if o.decode == "dali")
    figure = dali.inputs["DALI decode per GPU (samples/s)"]
    assert figure.origin == "published" and "an A100 figure taken for every NVIDIA GPU" in figure.source


def test_crossover_at_the_nvme_capacity_with_its_reason():
    table, changes = crossovers(_scenario(), None)
    # past the NVMe, no known option fits: the first conditional one leads (the parallel file
    # system, its rate not known, ahead of the object store by setup order at equal AU and cores)
    assert [(c.before, c.to) for c in changes] == [
        ("local NVMe, DALI decode", "parallel file system, DALI decode")
    ]
    assert changes[0].dataset_bytes == pytest.approx(7.68 * TB, rel=1e-9)
    assert (
        "local NVMe does not fit the node: the dataset (7.68 TB) is larger than a node's NVMe"
        in changes[0].why
    )
    assert "the parallel file system's rate is not known" in changes[0].conditional
    assert table[0].option == "local NVMe, DALI decode" and table[-1].dataset_bytes == pytest.approx(100 * TB)
    assert len(grid()) == 37  # 12 sizes per decade over three decades, both ends included


def test_every_crossover_has_its_reason_and_none_flip_flops_unexplained():
    rates = MeasuredRates(
        {
            "nvme": Figure(12e9, "given", origin="given"),
            "object": Figure(8e9, "given", origin="given"),
            "ceph": Figure(5e9, "given", origin="given"),
        }
    )
    _, changes = crossovers(_scenario(rates=rates), None)
    assert changes and all(c.why for c in changes)
    leaders = [changes[0].before] + [c.to for c in changes]
    assert len(leaders) == len(set(leaders)), leaders  # no leader comes back


def test_published_rules_are_judged_only_on_measured_or_given_figures():
    found = {c.rule.split(",")[0]: c for c in checks(_scenario(), None)}
    # no rate measured or given: the storage rules are not judged on datasheets or the rules' own figures
    assert all(
        found[k].agrees is None
        for k in ("< 1 TB: 4 x NVMe RAID0", "1 TB-10 TB: 2 x NVMe cache + object storage")
    )
    assert "not measured or given here" in found["< 1 TB: 4 x NVMe RAID0"].model_says
    cores = next(c for c in found.values() if c.rule.startswith("at least 1 CPU core per 2 GPUs"))
    assert cores.agrees is False and "62 cores (7.8 per GPU" in cores.model_says  # 56,000 / 900 = 62.2
    ratio = next(c for c in found.values() if c.rule.startswith("DataLoader preprocessing"))
    # never on rates the demand caps: not judged without cells on two core counts; the model's own
    # capacity ratio is said (96 / 24 cores, no trainer cores kept here)
    assert ratio.agrees is None and "96 / 24 = 4.0 x" in ratio.model_says
    # measured cells on 2 and 8 cores, workers filling them: 3.2 x of a linear 4 x
    cal = calibrate([
        _cell("two", workers=2, cores_usable=2, samples_per_s=700.0),
        _cell("eight", workers=8, cores_usable=8, samples_per_s=2240.0),
    ])  # fmt: skip
    ratio = next(c for c in checks(_scenario(), cal) if c.rule.startswith("DataLoader preprocessing"))
    assert ratio.agrees is True and "3.20 x (80% of linear)" in ratio.model_says


# -- calibration and validation from hand-made cells --------------------------------------------


def _cell(cell_id: str, **kw) -> CellFacts:
    base = dict(
        run="run",
        cell_id=cell_id,
        tier="disk",
        tier_kind="local",
        loader="torch",
        workers=1,
        batch_size=16,
        cores_usable=2,
        demand=7000.0,
        samples_per_s=400.0,
        au=400 / 7000,
        verdict="prep",
        cache_achieved="cold",
        cpu_ms={"fetch": 0.1, "decode": 1.8, "augment": 0.2, "collate": 0.0},
        wall_ms={"fetch": 0.15, "decode": 1.8, "augment": 0.2, "collate": 0.0},
        sample_bytes=100e3,
        dataset_bytes=100e6,
        fetch_ceiling_bytes_per_s=None,
        epochs=1,
        cache_limit_bytes=None,
        cache_policy="lru",
        last_epoch_hit_ratio=None,
        request_p50_ms=None,
        request_p99_ms=None,
    )
    return CellFacts(**{**base, **kw})


def test_overhead_is_the_cpu_the_stage_timers_miss():
    # 1 worker on 2 cores: 1 / 400 = 2.5 ms per sample against 2.1 ms timed: 0.4 ms outside the timers
    assert overhead_of(_cell("a")) == pytest.approx(0.4e-3)
    # no workers, 1,000/s consumer: 1/300 s - 2.1 ms - 1 ms = 0.2333 ms
    assert overhead_of(_cell("c", workers=0, demand=1000.0, samples_per_s=300.0)) == pytest.approx(0.7e-3 / 3)
    # the consumer's measured step time beats the configured demand (a sleep overshoots)
    late = _cell("c", workers=0, demand=1000.0, samples_per_s=300.0, compute_s_per_sample=1.2e-3)
    assert overhead_of(late) == pytest.approx(1 / 300 - 2.1e-3 - 1.2e-3)
    # 2 workers fill the 2 cores: what the rates leave over is no one's in particular (other processes
    # on the host take the cores too), so nothing is charged to the trainer from them
    full = _cell("b", workers=2, samples_per_s=720.0)
    assert overhead_of(full) is None and trainer_ms_of(full) is None
    # measured: the trainer's own CPU timer where the readers ran apart, and the verdict's cores figure
    assert trainer_ms_of(_cell("e", workers=2, trainer_cpu_ms_per_sample=0.08)) == pytest.approx(0.08)
    need = cores_needed(7000.0, "the demand", loader_cpu_ms=2.6, trainer_cpu_ms=0.09)
    measured = _cell("f", cores=need)
    assert overhead_of(measured) == pytest.approx(0.5e-3) and trainer_ms_of(measured) == pytest.approx(0.09)
    # readers waiting on storage for a third of their time are not CPU-bound, whatever the verdict
    slow = _cell("d", wall_ms={"fetch": 1.2, "decode": 1.8, "augment": 0.2, "collate": 0.0})
    assert overhead_of(slow) is None


def test_tier_bandwidth_prefers_ceilings_then_fetch_limited_cells():
    ceiling = _cell("a", fetch_ceiling_bytes_per_s=900e6)
    assert tier_bandwidth([ceiling, _cell("b")]).value == 900e6
    # readers that waited on storage (fetch wall - CPU: 1.1 of 3.1 ms per sample) were held back by
    # the tier: it delivered 250/s x 100 KB = 25 MB/s
    limited = _cell(
        "c", samples_per_s=250.0, wall_ms={"fetch": 1.2, "decode": 1.8, "augment": 0.2, "collate": 0.0}
    )
    assert fetch_limited(limited) and not fetch_limited(_cell("d"))
    assert not fetch_limited(replace(limited, verdict="accelerator"))
    f = tier_bandwidth([limited, _cell("d", samples_per_s=390.0)])
    assert f.value == pytest.approx(25e6) and not f.lower_bound
    # nothing held back by the tier (a slow cell on a busy CPU is not a slow tier): a lower bound
    f = tier_bandwidth([_cell("d", samples_per_s=390.0), _cell("e", samples_per_s=200.0)])
    assert f.value == pytest.approx(39e6) and f.lower_bound
    # a warm cell measures a cache, not the tier
    assert tier_bandwidth([_cell("w", cache_achieved="warm", fetch_ceiling_bytes_per_s=5e9)]) is None


def test_leave_one_out_prediction():
    w0 = _cell("w0", workers=0, samples_per_s=1 / (2.1e-3 + 0.5e-3 + 1 / 7000))  # loader overhead 0.5 ms
    w1 = _cell("w1")  # 400/s: loader overhead 0.4 ms
    w2 = _cell("w2", workers=2, samples_per_s=720.0)
    w3 = _cell("w3", workers=3, samples_per_s=700.0, trainer_cpu_ms_per_sample=2 / 0.7 - 2.55)  # its timer
    waits = {"fetch": 1.2, "decode": 1.8, "augment": 0.2, "collate": 0.0}
    link1 = _cell(
        "l1", tier="link", tier_kind="throttled", samples_per_s=250.0, verdict="fetch", wall_ms=waits
    )
    link2 = _cell("l2", tier="link", tier_kind="throttled", workers=2, samples_per_s=255.0, wall_ms=waits)
    cells = [w0, w1, w2, w3, link1, link2]
    # w1 from w0's loader overhead (0.5 ms): its worker gives 1 / 2.6 ms = 384.6/s; the cores would
    # allow more (the trainer's own CPU as w3 measured it)
    c = check_cell(w1, cells)
    assert c.predicted_samples_per_s == pytest.approx(1 / 2.6e-3) and c.predicted_binding == "prep"
    assert c.error == pytest.approx(1 / 2.6e-3 / 400 - 1)
    # w2: loader overhead the median of w0 and w1, 0.45 ms; the trainer's own CPU as w3's timer measured
    # it, 0.3071 ms; the 2 cores give 2 / (2.55 + 0.3071) ms = 700/s
    c = check_cell(w2, cells)
    assert c.predicted_samples_per_s == pytest.approx(700.0) and c.error == pytest.approx(700 / 720 - 1)
    # link1 from link2's delivered 25.5 MB/s: 255/s, fetch-bound (prep allows 1/2.566 ms = 390/s)
    c = check_cell(link1, cells)
    assert c.predicted_samples_per_s == pytest.approx(255.0) and c.predicted_binding == "fetch"
    assert (
        c.predicted_au == pytest.approx(255 / 7000) and "delivered by fetch-limited l2" in c.inputs["fetch"]
    )
    # with no other cell on its tier, a throttled cell falls back to its configured cap
    alone = replace(link1, throttle_bytes_per_s=20e6)
    c = check_cell(alone, [w1, w2, w3, alone])
    assert c.predicted_samples_per_s == pytest.approx(200.0) and "configured" in c.inputs["fetch"]
    assert calibrate([]).collate_ms is None


# -- the command line ----------------------------------------------------------------------------


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_recommend_arguments(p)
    return p.parse_args(list(argv))


@pytest.mark.parametrize(
    ("text", "expected"), [("8xH100", (8, "H100")), ("16 × a100", (16, "a100")), ("H200", (1, "H200"))]
)
def test_count_of(text, expected):
    assert parse_count_of(text, "--accelerators") == expected


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--accelerators", "8xH100"], "give the dataset: --dataset-size SIZE (and --sample-size SIZE)"),
        (["--accelerators", "8xH100", "--dataset-size", "1TB", "--model", "small_cnn"],
         "--model small_cnn: configs/accelerators.yaml has no small_cnn figure for h100; give --model one of"),
        (["--accelerators", "8xH100", "--dataset-size", "1TB", "--model", "small_cnn", "--per-accelerator", "900"],
         "give the sample size: --sample-size SIZE (configs/accelerators.yaml names no dataset for --model small_cnn)"),
        (["--accelerators", "8xB200", "--dataset-size", "1TB"],
         "--model resnet50: configs/accelerators.yaml has no resnet50 figure for b200; give --model one of dlrm, flux, "
         "retinanet, unet3d"),
        (["--accelerators", "8xH100", "--dataset-size", "1TB", "--tier-rate", "ceph:5GB/s"],
         "--tier-rate 'ceph:5GB/s': write KEY=RATE or KEY=FILE"),
        (["--accelerators", "8xH100", "--dataset-size", "1TB", "--tier-rate", "ceph=5Gb/s"],
         "--tier-rate ceph=5Gb/s: '5Gb/s' looks like bits per second"),
        (["--accelerators", "8xH100", "--dataset-size", "1TB", "--nvme-gen", "7"], "--nvme-gen 7: datasheet figures"),
        (["--accelerators", "8xMI300X", "--per-accelerator", "3000", "--dataset-size", "1TB", "--sample-size", "100KB",
          "--ram", "1TB"], "the target node: --nvme, --cores not given, and configs/servers.yaml has no reference"),
        (["--accelerators", "8xH100", "--dataset-size", "1TB", "--sample-size", "100KB", "--server", "dgx-z9"],
         "--server dgx-z9: unknown; known: dgx-a100, dgx-b200, dgx-h100, dgx-h200"),
        (["--accelerators", "8xTPU9", "--dataset-size", "1TB", "--sample-size", "100KB"], "unknown type 'TPU9'"),
        (["--accelerators", "0xH100", "--dataset-size", "1TB", "--sample-size", "100KB"], "the count must be at least 1"),
        (["--accelerators", "8xH100", "--dataset-size", "1XB", "--sample-size", "100KB"], "--dataset-size 1XB: unknown size unit"),
        (["--accelerators", "8xH100", "--dataset-size", "1TB", "--sample-size", "2TB"], "larger than --dataset-size 1TB"),
        (["--accelerators", "8xH100", "--dataset-size", "1TB", "--sample-size", "1KB", "--ram", "1GB",
          "--memory-cache", "2GB"], "--memory-cache 2GB is more than the RAM"),
        (["--accelerators", "8xH100", "--manifest", "/x", "--dataset-size", "1TB"], "not both"),
    ],
)  # fmt: skip
def test_bad_input_says_what_is_wrong(argv, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        scenario(_args(*argv))


def test_json_from_a_manifest_without_results(tmp_path):
    shards = [ShardEntry(f"train-{i:06d}.tar", 10_000_000, 100, "0" * 64) for i in range(3)]
    manifest = build_manifest(shards, classes=10, class_names=None, source={}, jpeg_bytes=29_000_000)
    manifest.save(tmp_path)
    out = StringIO()
    args = _args("--manifest", str(tmp_path / "manifest.json"), "--accelerators", "2xA100", "--nvme", "1TB",
                 "--ram", "256GB", "--cores", "16", "--decode-rate", "900", "--json")  # fmt: skip
    assert recommend_command(args, Console(file=out)) == 0
    doc = json.loads(out.getvalue())
    # 300 samples in 30 MB: 100 KB each; 2 x 2,078/s = 4,156/s = 415.6 MB/s
    assert doc["requirement"] == {"samples_per_s": 4156.0, "bytes_per_s": pytest.approx(415.6e6)}
    assert doc["dataset_source"].endswith("manifest.json") and doc["calibration"] is None
    assert doc["options"][0]["name"] == "local NVMe" and doc["validation"] == []
    assert all(i["source"] for o in doc["options"] for i in o["inputs"].values())
    # 16 cores x 900/s = 14,400/s of CPU decode: the two A100s are fed
    assert doc["options"][0]["prediction"]["au"] == 1.0


def test_the_target_server_comes_from_the_flags_or_a_named_profile_never_silently_this_host():
    common = ("--accelerators", "8xH100", "--dataset-size", "5TB", "--sample-size", "110KB")
    s = scenario(_args(*common))  # nothing about the server: the reference server for H100
    assert (s.cores, s.ram_bytes, s.nvme_devices, s.nvme_bytes) == (112, 2e12, 8, 8 * 3.84e12)
    assert s.nic_bytes_per_s == 100e9 and s.target.startswith("dgx-h100: NVIDIA DGX H100")
    assert "the reference node for h100, as --server was not given" in s.target
    assert "docs.nvidia.com/dgx/dgxh100-user-guide" in s.target
    s = scenario(_args(*common, "--cores", "64", "--nvme", "none"))  # a flag overrides that figure
    assert (s.cores, s.nvme_bytes, s.ram_bytes) == (64, 0.0, 2e12)
    assert s.target.endswith("given instead: --nvme none, --cores 64")
    s = scenario(_args(*common, "--nvme", "2x3.84TB", "--ram", "1TB", "--cores", "96"))
    assert s.target == "as given: --nvme 2x3.84TB, --ram 1TB, --cores 96" and s.nic_bytes_per_s is None
    s = scenario(_args(*common, "--server", "this-host"))
    assert s.target.startswith("this-host: this machine") and s.nvme_bytes == 0.0 and s.cores >= 1
    s = scenario(_args(*common, "--server", "dgx-a100", "--nic", "25GB/s"))
    assert (s.cores, s.nic_bytes_per_s) == (128, 25e9)


def test_a_remote_tier_is_capped_by_the_storage_network():
    rates = MeasuredRates({"object": Figure(8e9, "given", origin="given")})
    by = {(o.name, o.decode): o for o in options(_scenario(nic_bytes_per_s=2e9, rates=rates), None)}
    backend = dict(by["object store + NVMe cache", "cpu"].inputs)["backend bandwidth (bytes/s)"]
    assert backend.value == 2e9 and "capped by the node's storage network" in backend.source
    local = dict(by["local NVMe", "cpu"].inputs)["backend bandwidth (bytes/s)"]
    assert local.value == 13.6e9  # local NVMe does not cross the network


def test_rules_about_hardware_the_target_lacks_are_not_judged():
    no_nvme = {c.rule.split(",")[0]: c for c in checks(_scenario(nvme_devices=0, nvme_bytes=0.0), None)}
    raid = no_nvme["< 1 TB: 4 x NVMe RAID0"]
    assert raid.agrees is None and "cannot be judged on this server: it has no local NVMe" in raid.model_says
    ram = next(c for c in checks(_scenario(), None) if c.rule.startswith("host RAM"))
    assert "(4 x 8 x 85.9 GB = 2.75 TB per node)" in ram.rule and "the node has 1 TB" in ram.model_says


def test_the_cpu_rate_is_the_hosts_one_scaled_to_the_sample_size():
    # measured at 110 KB: 1.0 ms decode + 0.1 ms augment; at 55 KB decode halves: 1000 / 0.6 per core
    rate = replace(given(900.0, 110e3), decode_us_per_kib=1.0e3 / (110e3 / 1024), augment_ms=0.1)
    o = next(
        o for o in options(_scenario(sample_bytes=55e3, decode=rate, cores=10), None) if o.decode == "cpu"
    )
    assert o.prep_samples_per_s == pytest.approx(10 * 1000 / 0.6)
    said = o.inputs["CPU decode+augment per core (samples/s)"].source
    assert (
        "scaled from 909/s at 107 KiB: decode in proportion to the bytes (x0.50), augment unchanged" in said
    )


def test_auto_caches_are_static_when_smaller_than_the_dataset_as_the_tiers_choose():
    rates = MeasuredRates({"ceph": Figure(5e9, "given", origin="given")})
    by = {
        (o.name, o.decode): o
        for o in options(_scenario(dataset_bytes=10 * TB, cache_policy="auto", rates=rates), None)
    }
    ceph = by["Ceph + RAM cache", "cpu"]
    # 500 GB of 10 TB kept: r = 0.05 of the reads from RAM (220.8 GB/s), the rest from Ceph (5 GB/s):
    # 1 / (0.05/220.8 + 0.95/5) = 5.25690 GB/s, where LRU under shuffled epochs keeps 0.00127 (5.00622)
    assert ceph.hit_ratio == pytest.approx(0.05) and ceph.fetch_bytes_per_s == pytest.approx(
        5.25690e9, rel=1e-5
    )
    # the page cache is the kernel's LRU whatever iobench's caches do: 0.5 of 1 TB, shuffled
    local = {(o.name, o.decode): o for o in options(_scenario(cache_policy="auto"), None)}[
        "local NVMe", "cpu"
    ]
    assert local.hit_ratio == pytest.approx(0.153426, rel=1e-5)


def test_a_model_implies_its_datasets_sample_size():
    s = scenario(_args("--accelerators", "8xH100", "--dataset-size", "5TB", "--model", "resnet50"))
    assert s.sample_bytes == 115_657  # 138 x 2**30 bytes over 1,281,167 JPEGs
    report = recommend(_args("--accelerators", "8xH100", "--dataset-size", "5TB", "--decode-rate", "900"))
    assert (
        "the mean of ImageNet-1k (ILSVRC2012 training set), which --model resnet50 trains on"
        in report.scenario.dataset_said
    )
    assert (
        scenario(
            _args("--accelerators", "8xH100", "--dataset-size", "5TB", "--sample-size", "55KB")
        ).sample_bytes
        == 55_000
    )
