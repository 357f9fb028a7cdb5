"""The attribution against known answers (issue 6): each case is built so that the right verdict is
known before the run, then `iobench diagnose`'s machinery must find it.

- a tier throttled far below what decode can consume is fetch-bound, and the measured fetch
  ceiling matches the configured cap;
- an accelerator slower than the pipeline is accelerator-bound at AU >= 0.9;
- the unthrottled local tier on this 2-core machine is prep-bound (decode).
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from iobench.cell.entry import process
from iobench.results.codec import from_json, to_json
from iobench.results.spec import CellSpec
from tests.helpers.runs import exact_epochs

pytestmark = pytest.mark.slow


def run_cell(cell: dict, run_dir) -> dict:
    """A cell given as its JSON (as cells.json holds it), measured; its summary as JSON."""
    return to_json(process.run_cell(from_json(CellSpec, cell), run_dir))


CAP_MB = 8.0


def _cell(name: str, tier: dict, accelerator: dict, **run) -> dict:
    return {
        "cell_id": name,
        "tier": {"name": name, **tier},
        "loader": {"kind": "torch", "workers": 2, "batch_size": 16, "prefetch": 2, "shuffle_buffer": 16,
                   "layout": "shards"},
        # DLIO's sleep-only accelerators (host_work: none): these cells attribute storage and prep
        "accelerator": {"kind": "emulated", "model": "resnet50", "demand": "training", "count": 1,
                        "samples_per_s": None, "host_work": "none", **accelerator},
        "cache": "cold",
        "run": {"cache": ["cold"], "warmup_steps": "auto", "max_steps": None, "epochs": 1, "on_error": "skip",
                "seed": 0, "timeout_s": 600, "repeats": 1, "diagnose": True, "min_measure": exact_epochs(), **run},
        "dataset": "",
    }  # fmt: skip


def test_a_throttled_tier_is_fetch_bound_at_its_cap(tmp_path, tiny_dataset):
    tier = {
        "kind": "throttled",
        "inner": {"kind": "local", "path": str(tiny_dataset)},
        "bandwidth": f"{CAP_MB}MB/s",
    }
    s = run_cell(_cell("throttled", tier, {"type": "h100"}), tmp_path)
    fetch = s["ceilings"]["fetch"]
    assert fetch["bytes_per_s"] == pytest.approx(CAP_MB * 1e6, rel=0.10), fetch
    a = s["attribution"]
    assert a["binding"] == "fetch" and s["verdict"]["bound"] == "fetch" and a["agree"], a["statement"]
    # the cap is far below decode: the prep ceiling from RAM is several times the fetch ceiling
    assert s["ceilings"]["prep"]["samples_per_s"] > 3 * fetch["samples_per_s"]
    # over the whole run (a measured window's batches also carry bytes their readers fetched
    # before it: docs/method.md), the pipeline never read faster than the link
    steps = pq.read_table(tmp_path / "throttled" / "steps.parquet").to_pylist()
    assert s["loader_stats_all_steps"]["bytes_read"] / steps[-1]["t_end"] < 1.05 * CAP_MB * 1e6
    split = s["split"]
    assert split["fetch"] > max(split["decode"], split["augment"])
    # one H100 wants 7,000/s; this link feeds a few dozen: not even one, and running it agrees
    cap = a["capacity"]
    assert cap["max_accelerators"] == 0 and [c["count"] for c in cap["checks"]] == [1]
    assert cap["checks"][0]["au"] < 0.9 and cap["confirmed"]
    assert s["cache_state"]["achieved"] == "cold"


def test_an_accelerator_slower_than_the_pipeline_is_the_bottleneck(tmp_path, tiny_dataset):
    tier = {"kind": "local", "path": str(tiny_dataset)}
    s = run_cell(_cell("slow-accel", tier, {"type": "custom", "samples_per_s": 60.0}, max_steps=12), tmp_path)
    assert s["verdict"]["bound"] == "accelerator", s["verdict"]["headline"]
    assert s["metrics"]["au"] >= 0.9
    a = s["attribution"]
    assert a["binding"] == "accelerator" and a["agree"], a["statement"]
    assert s["ceilings"]["accelerator"]["samples_per_s"] == pytest.approx(60.0, rel=0.05)
    # the capacity answer is the count of these accelerators the inputs could feed; it was run
    cap = a["capacity"]
    n = cap["max_accelerators"]
    assert n >= 2 and [c["count"] for c in cap["checks"]] == [n, n + 1]


def test_the_unthrottled_local_tier_is_prep_bound_here(tmp_path, tiny_dataset):
    tier = {"kind": "local", "path": str(tiny_dataset)}
    s = run_cell(_cell("local", tier, {"type": "h100"}, repeats=2), tmp_path)
    a, v = s["attribution"], s["verdict"]
    # the CPU binds: decode in the readers, or, where the readers and the trainer filled the cores
    # (two workers on two cores), the cores are spent: the judge's rule, checked on its budget
    b = v["budget"]
    spent = b is not None and b["trainer"] + b["readers"] + b["own"] + b["others"] >= 0.9 * b["usable"]
    assert (v["bound"], v["binding_stage"]) == (("cores", None) if spent else ("prep", "decode")), v[
        "headline"
    ]
    # the differential names the lower ceiling. How far storage stands above decode is the host's: a
    # cold read here ran at 2,531 samples/s beside a prep ceiling of 1,428/s, on another VM of this kind
    # at 1,180/s beside 1,168/s; where the two are that close, neither method can tell them apart, and
    # the methods agree on either
    fetch, prep = (s["ceilings"][part]["samples_per_s"] for part in ("fetch", "prep"))
    named = ("prep", "cores") if fetch > 1.15 * prep else ("prep", "cores", "fetch")
    assert a["binding"] in named and a["agree"], a["statement"]
    assert s["split"]["decode"] > s["split"]["fetch"]
    # two runs, each from a freshly evicted cache, with an interval over both
    assert len(s["repeats"]) == 2 and all(r["cache"] == "cold" for r in s["repeats"])
    stats = s["stability"]["samples_per_s"]
    assert stats["n"] == 2 and stats["ci_low"] <= stats["mean"] <= stats["ci_high"]
    assert (
        s["warmup"]["method"].startswith("MSER") and s["warmup"]["steps"] >= 1
    )  # the start-up step at least
