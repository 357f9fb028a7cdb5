"""The user's own measured rates: flags, a YAML file, and the JSON fio, warp and rados bench write,
read directly (tests/unit/recommend/data/README.md says how each file was made)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from iobench.recommend.placements import options
from iobench.recommend.rates import load_rates, parse_tier_rate, read_benchmark
from tests.unit.recommend.test_model import _scenario

DATA = Path(__file__).parent / "data"


def test_a_rate_on_the_command_line_is_given_and_says_so():
    key, f = parse_tier_rate("nvme-device=6.5GB/s")
    assert key == "nvme-device" and f.value == 6.5e9 and f.origin == "given"
    assert f.source == "given: --tier-rate nvme-device=6.5GB/s"


def test_fio_json_is_read_as_written():
    f = read_benchmark(str(DATA / "fio-read.json"), "pfs", "--tier-rate pfs=...")
    # jobs[0].read.bw_bytes of the recorded run: 1,508,636,974 B/s on the VM's virtio disk
    assert f.value == 1_508_636_974 and f.origin == "given" and not f.caveat
    assert "fio fio-3.33 (rw read, bs 1M, direct 1, numjobs 1, iodepth 8, size 64M; devices vda)" in f.source
    # a virtio disk is not an NVMe array: refused as the NVMe's rate, with what to do
    with pytest.raises(ValueError, match="fio read vda, which is not an NVMe drive or an md array"):
        read_benchmark(str(DATA / "fio-read.json"), "nvme", "--tier-rate nvme=...")
    with pytest.raises(ValueError, match=re.escape("fio measured no reads; run fio with --rw=read")):
        read_benchmark(str(DATA / "fio-write.json"), "nvme", "--tier-rate nvme=...")


def test_rados_bench_json_is_read_as_written():
    f = read_benchmark(str(DATA / "rados-bench-seq.json"), "ceph", "--tier-rate ceph=...")
    # obj_bencher.cc writes "bandwidth" in MiB/s: 2681.188250 x 2**20
    assert f.value == pytest.approx(2681.188250 * 2**20)
    assert "rados bench (reads of 1048576 B" in f.source
    with pytest.raises(
        ValueError, match="a rados bench write run; read rates come from `rados bench -p POOL 60 seq"
    ):
        read_benchmark(str(DATA / "rados-bench-write.json"), "ceph", "--tier-rate ceph=...")
    with pytest.raises(ValueError, match="is a rados bench measurement, which does not measure 'nvme'"):
        read_benchmark(str(DATA / "rados-bench-seq.json"), "nvme", "--tier-rate nvme=...")


def test_warp_json_both_forms(tmp_path):
    f = read_benchmark(str(DATA / "warp-get.json"), "object", "--tier-rate object=...")
    assert f.value == pytest.approx(754_974_720_000 / 60)  # 12.58 GB/s, one client
    assert "warp GET (one client, concurrency 32)" in f.source
    old = tmp_path / "warp-0.json"  # warp 0.x: a list of operations with their average
    old.write_text(
        '{"type": "single", "operations": [{"type": "GET", "concurrency": 8, "throughput": {"average_bps": 2.5e9}}]}'
    )
    assert read_benchmark(str(old), "object", "x").value == 2.5e9
    many = tmp_path / "warp-3.json"  # three clients together: a node reads its third
    many.write_text(
        '{"v": 2, "by_op_type": {"GET": {"clients": ["a", "b", "c"], "concurrency": 96, '
        '"throughput": {"bytes": 3.0e12, "measure_duration_millis": 100000}}}}'
    )
    f = read_benchmark(str(many), "object", "x")
    assert f.value == pytest.approx(1e10) and "30 GB/s from 3 clients together, per client" in f.source


def test_a_rates_file(tmp_path):
    (tmp_path / "seq.json").write_text((DATA / "rados-bench-seq.json").read_text())
    path = tmp_path / "rates.yaml"
    path.write_text(
        "nvme_device: 6.5GB/s\n"
        "ceph: seq.json\n"  # relative to the YAML
        "delivered:\n"
        "  - {setup: object+nvme, rate: 8GB/s, sizes: 1TB-10TB, source: our proof of concept}\n"
    )
    rates = load_rates(str(path))
    assert rates.tier("nvme-device").value == 6.5e9
    assert rates.tier("ceph").value == pytest.approx(2681.188250 * 2**20)
    d = rates.delivered_for("object+nvme", 5e12)
    assert d.rate.value == 8e9 and "our proof of concept" in d.rate.source and d.sizes() == "1 TB-10 TB"
    assert rates.delivered_for("object+nvme", 20e12) is None
    # given rates replace the model's: the array is the drives' given rate x 2 drives
    local = next(o for o in options(_scenario(rates=rates), None) if o.setup == "local")
    assert dict(local.inputs)["backend bandwidth (bytes/s)"].value == 13e9


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "unknown: 1GB/s\n",
            "--rates {}: unknown key(s) unknown; allowed: nvme, nvme-device, object, ceph, pfs, delivered",
        ),
        (
            "delivered:\n  - {setup: nas, rate: 1GB/s}\n",
            "delivered[0]: needs setup (local, sharded, pfs, object+nvme, ceph+nvme, ceph+ram)",
        ),
        ("delivered:\n  - {setup: ceph+ram, rate: 1GB/s, sizes: big}\n", "sizes 'big': write <1TB, >10TB"),
        ("ceph: nothere.json\n", "nothere.json: no such file (give a rate such as 12GB/s"),
    ],
)
def test_a_bad_rates_file_says_where_and_what_to_write(tmp_path, text, message):
    path = tmp_path / "rates.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(message.format(path))):
        load_rates(str(path))
