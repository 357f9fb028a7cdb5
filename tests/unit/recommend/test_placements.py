"""Where a dataset can live (recommend/placements.py): GPUs on nodes (a job larger than one node
runs on several, each with the node's cores, RAM, NVMe and storage network; figures per node and for
the cluster), no decode priced for a workload read without decoding, the node from `iobench inspect
--json` of the node itself, host cores kept for each accelerator's trainer, DALI's host CPU."""

from __future__ import annotations

import json
from argparse import Namespace
from pathlib import Path

import pytest

from iobench.inspect.cli import inspect_command
from iobench.recommend.calibrate import Calibration, Figure
from iobench.recommend.cli import scenario
from iobench.recommend.placements import options
from tests.unit.recommend.test_model import _args, _scenario

INSPECT_TREES = Path(__file__).parents[2] / "data" / "inspect"
UNET3D = 146_600_628  # bytes per sample of MLPerf Storage's unet3d dataset


def test_64_b200_run_on_eight_dgx_b200_nodes_and_read_without_decoding():
    s = scenario(_args("--dataset-size", "40TB", "--accelerators", "64xB200", "--model", "unet3d"))
    assert (s.nodes, s.node_accelerators, s.cores) == (8, 8, 112) and s.target.startswith("dgx-b200")
    # 7 samples per 0.162 s per B200 (MLPerf Storage's unet3d_b200.yaml): 43.2/s each, 345.7/s a node
    assert s.requirement.samples_per_s == pytest.approx(8 * 7 / 0.162)
    assert s.cluster_requirement.samples_per_s == pytest.approx(64 * 7 / 0.162)
    assert s.decoding == "none" and s.trainer_cores is None  # MLPerf Storage's emulation: no decode, a sleep
    opts = options(s, None)
    assert {o.decode for o in opts} == {"none"}  # no JPEG decode, no DALI
    o = next(o for o in opts if o.setup == "object+nvme")
    # reading only: each sample's bytes at 2.3 GB/s per core: 345.7/s x 146.6 MB / 2.3 GB/s = 22.0 cores a node
    assert o.cores_needed == pytest.approx(8 * 7 / 0.162 * UNET3D / 2.3e9)
    assert o.cores_per_accelerator == pytest.approx(o.cores_needed / 8)
    # nobody gave the object store's rate: the option says what one node and the cluster would need
    assert o.conditional and o.backend_needed_bytes_per_s > 0
    assert s.batch == 7 and s.decoded_sample_bytes == UNET3D  # buffers hold samples as read


def test_nodes_follow_the_accelerators_per_node():
    s = scenario(_args("--dataset-size", "40TB", "--accelerators", "64xB200", "--model", "unet3d",
                       "--accelerators-per-node", "4"))  # fmt: skip
    assert (s.nodes, s.node_accelerators) == (16, 4)
    # a job smaller than a node takes part of one
    s = scenario(_args("--dataset-size", "300GB", "--accelerators", "4xA100"))
    assert (s.nodes, s.node_accelerators, s.per_node) == (1, 4, 8)
    # a given rate for one node's object store is what each node reads; the cluster reads it N times
    s = scenario(_args("--dataset-size", "40TB", "--accelerators", "64xB200", "--model", "unet3d",
                       "--tier-rate", "object=20GB/s"))  # fmt: skip
    o = next(o for o in options(s, None) if o.setup == "object+nvme")
    assert not o.conditional
    per_node_backend = (1 - o.hit_ratio) * o.prediction.samples_per_s * s.sample_bytes
    assert o.cluster_backend_bytes_per_s == pytest.approx(8 * per_node_backend)


def test_decoding_can_be_priced_or_not_whatever_the_demand():
    s = scenario(_args("--dataset-size", "5TB", "--accelerators", "8xB200", "--model", "retinanet",
                       "--demand", "mlperf_storage"))  # fmt: skip
    assert s.decoding == "none"
    s = scenario(_args("--dataset-size", "5TB", "--accelerators", "8xH100", "--decode", "none"))
    assert s.decoding == "none" and "--decode none" in s.decoding_said


def test_the_node_from_iobench_inspect(tmp_path, capsys):
    args = Namespace(json=True, accelerators=None, model="resnet50", demand="training", decode_rate=900.0,
                     results=None, workers=None, root=str(INSPECT_TREES / "raid0-4nvme"))  # fmt: skip
    assert inspect_command(args, None) == 0
    doc = tmp_path / "node.json"
    doc.write_text(capsys.readouterr().out)
    s = scenario(_args("--dataset-size", "5TB", "--accelerators", "8xH100", "--inspect", str(doc)))
    # the recorded node: 32 physical cores (64 threads), 1.62 TB of RAM, 4 x 3.84 TB PCIe Gen4 NVMe
    # in md0 (RAID0); the OS on /dev/sda2
    assert s.cores == 32 and s.ram_bytes == 1_622_016_000_000
    assert s.nvme_devices == 4 and s.nvme_bytes == 4 * 3_840_755_982_336
    assert s.nvme_device_rate.value == 6.8e9 and "PCIe 4.0" in s.nvme_device_rate.source
    assert "the storage network is not known from it" in s.target and s.nic_bytes_per_s is None
    assert json.loads(doc.read_text())["inventory"]["raid"][0]["level"] == "raid0"


def test_the_trainers_cores_are_kept_from_the_loaders():
    bare = {(o.name, o.decode): o for o in options(_scenario(), None)}["local NVMe", "cpu"]
    kept = {(o.name, o.decode): o for o in options(_scenario(trainer_cores=Figure(1, "test")), None)}[
        "local NVMe", "cpu"
    ]
    # 96 cores, 8 kept for the trainers: 88 x 900/s decode instead of 96 x 900/s
    assert bare.prep_samples_per_s == pytest.approx(96 * 900)
    assert kept.prep_samples_per_s == pytest.approx(88 * 900)
    assert kept.cores_needed == pytest.approx(56_000 / 900 + 8)
    assert kept.inputs["host cores kept per accelerator for its trainer"] == Figure(1, "test")


def test_dali_counts_the_host_cpu_its_cells_measured():
    cal = Calibration(
        cells=[],
        collate_ms=Figure(0.05, "t"),
        overhead_ms=None,
        trainer_ms=None,
        dali_host_ms=Figure(2.0, "t"),
    )
    dali = {(o.name, o.decode): o for o in options(_scenario(), cal)}["local NVMe", "dali"]
    # 96 cores at 2.0 ms per sample feed 48,000/s: below the 8 GPUs' 56,000/s
    assert dali.prep_samples_per_s == pytest.approx(48_000)
    unmeasured = {(o.name, o.decode): o for o in options(_scenario(), None)}["local NVMe", "dali"]
    said = unmeasured.inputs["host CPU of DALI's GPU decode (ms per sample)"]
    assert said.value == 0.0 and "NVIDIA/DALI#5274" in said.source
