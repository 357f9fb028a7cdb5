"""The modelled all-reduce: the ring formula, what overlap hides, the fabric table and its errors."""

from __future__ import annotations

import pytest

from iobench.cell.ranks.allreduce import (
    AllReduceModel,
    UnknownInterconnect,
    gradient_bytes,
    interconnect,
    load_interconnect_table,
)
from iobench.results.spec import InterconnectSpec


def test_the_ring_formula_on_known_figures():
    fabric = InterconnectSpec("test", bandwidth_bytes_per_s=50e9, latency_s=3e-6)
    model = AllReduceModel(gradient_bytes=102_228_128, fabric=fabric, overlap=0.0)
    assert model.seconds(1) == 0.0  # nobody to reduce with
    # 2 (W-1)/W x G / B + 2 (W-1) x latency
    assert model.seconds(8) == pytest.approx(2 * 7 / 8 * 102_228_128 / 50e9 + 14 * 3e-6)
    assert model.seconds(4096) == pytest.approx(2 * 4095 / 4096 * 102_228_128 / 50e9 + 2 * 4095 * 3e-6)
    # the bandwidth term tends to 2 G / B: more ranks cost latency, not bandwidth
    assert model.seconds(4096) - model.seconds(512) == pytest.approx(2 * 3584 * 3e-6, rel=0.01)


def test_overlap_hides_what_fits_in_the_backward_pass():
    fabric = InterconnectSpec("test", bandwidth_bytes_per_s=1e9, latency_s=0.0)
    model = AllReduceModel(gradient_bytes=100_000_000, fabric=fabric, overlap=0.5)
    full = model.seconds(2)  # 0.1 s
    assert model.exposed(2, compute_s=0.05) == pytest.approx(full - 0.025)
    assert model.exposed(2, compute_s=0.5) == 0.0  # hidden entirely
    assert AllReduceModel(100_000_000, fabric, overlap=0.0).exposed(2, 0.5) == pytest.approx(full)


def test_fabrics_by_name_or_described_and_every_entry_has_a_source():
    table = load_interconnect_table()
    assert {"nvlink-h100", "ib-ndr-400", "ethernet-100g"} <= set(table)
    for name in table:
        spec = interconnect(name)
        assert spec.bandwidth_bytes_per_s > 0 and spec.latency_s >= 0 and len(spec.source) > 40
    assert interconnect("ib-ndr-400").bandwidth_bytes_per_s == 50e9
    mine = interconnect({"name": "lab", "bandwidth": "10GB/s", "latency_us": 7})
    assert (mine.name, mine.bandwidth_bytes_per_s, mine.latency_s) == ("lab", 10e9, pytest.approx(7e-6))
    with pytest.raises(UnknownInterconnect, match="known ones are"):
        interconnect("infiniband-9000")
    with pytest.raises(UnknownInterconnect, match="bits per second"):
        interconnect({"bandwidth": "400Gb/s"})
    with pytest.raises(UnknownInterconnect, match="a mapping with"):
        interconnect({"speed": 3})


def test_gradient_bytes_are_the_models_parameters_in_fp32():
    assert gradient_bytes("resnet50") == 25_557_032 * 4
    with pytest.raises(UnknownInterconnect, match="no parameter count"):
        gradient_bytes("gpt-5")
