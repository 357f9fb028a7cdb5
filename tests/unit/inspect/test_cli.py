"""`iobench inspect` on recorded sysfs/procfs trees (tests/data/inspect) with a fake NVML, and live."""

from __future__ import annotations

import argparse
import io
import json
import shutil
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from rich.console import Console

from iobench.analysis.decoderate import from_runs, given, measure_costs
from iobench.host import calibrations
from iobench.host.machine import this_host
from iobench.host.sysfs import parse_cpulist
from iobench.inspect.accelerators import demand_of_gpus, parse_accelerators
from iobench.inspect.cli import add_inspect_arguments, inspect_command
from iobench.inspect.inventory import collect_inventory
from iobench.inspect.pitfalls import find_pitfalls
from iobench.results.store import publish_cell, read_manifest, read_summary, write_results_table
from loaders.storage import installed_clients, resolve_client
from tests.helpers.fakenvml import LIBRARY_NOT_FOUND, FakeGpu, FakeNvmlLib
from tests.helpers.paths import DATA as TEST_DATA
from tests.helpers.shardkit import tiny_jpeg
from tests.helpers.summaries import cell_manifest, failed_summary, ok_summary

DATA = TEST_DATA / "inspect"
RAID0 = DATA / "raid0-4nvme"
DEGRADED = DATA / "degraded-link"
TWO_SOCKET = DATA / "two-socket"
PM9A3_BYTES = 7501476528 * 512


def _h100s(*bus_ids: str) -> FakeNvmlLib:
    return FakeNvmlLib([FakeGpu(bus_id=f"0000{b.upper()}") for b in bus_ids])


RAID0_GPUS = ("0000:19:00.0", "0000:3b:00.0", "0000:9b:00.0", "0000:bb:00.0")
TWO_SOCKET_GPUS = ("0000:98:00.0", "0000:b1:00.0", "0000:ca:00.0", "0000:e3:00.0")


def _pitfalls(root: Path, lib: FakeNvmlLib | None, rate: float | None = 900, accelerators: str | None = None):
    inv = collect_inventory(str(root), lib)
    demand = (
        parse_accelerators(accelerators, "resnet50")
        if accelerators
        else demand_of_gpus(inv.gpus, "resnet50")[0]
    )
    # a given rate is at the mean sample of the model's dataset, where the cores are priced (as the CLI takes it)
    pitfalls, notes = find_pitfalls(
        inv, demand, given(rate, demand.sample_bytes) if rate and demand else None
    )
    return inv, demand, pitfalls, notes


def _run(argv: list[str], lib: FakeNvmlLib | None, capsys) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    add_inspect_arguments(parser)
    code = inspect_command(parser.parse_args(argv), Console(file=io.StringIO()), nvml_lib=lib)
    return code, capsys.readouterr().out


def test_cpu_lists():
    assert parse_cpulist("0-15,32-47") == [*range(16), *range(32, 48)]
    assert parse_cpulist("3") == [3] and parse_cpulist("") == []


def test_raid0_of_four_nvme_is_inventoried_and_healthy():
    inv, demand, pitfalls, notes = _pitfalls(RAID0, _h100s(*RAID0_GPUS))
    assert inv.cpu == {
        "model": "AMD EPYC 7313 16-Core Processor",
        "logical_cpus": 64,
        "physical_cores": 32,
        "sockets": 2,
        "usable_cpus": None,
    }
    assert [(n["node"], n["cpus"], n["cpu_count"]) for n in inv.numa_nodes] == [
        (0, "0-15,32-47", 32),
        (1, "16-31,48-63", 32),
    ]
    assert inv.memory == {"total_bytes": 1584000000 * 1024, "available_bytes": 1500000000 * 1024}
    assert [(d["name"], d["numa_node"], d["pci_address"], d["in_arrays"]) for d in inv.nvme] == [
        ("nvme0n1", 0, "0000:01:00.0", ["md0"]),
        ("nvme1n1", 0, "0000:02:00.0", ["md0"]),
        ("nvme2n1", 1, "0000:81:00.0", ["md0"]),
        ("nvme3n1", 1, "0000:82:00.0", ["md0"]),
    ]
    for d in inv.nvme:
        assert (d["model"], d["size_bytes"], d["transport"], d["controller"]) == (
            "SAMSUNG MZQL23T8HCLS-00A07",
            PM9A3_BYTES,
            "pcie",
            d["name"][:-2],
        )
        link = d["pcie_link"]
        assert (link["current_speed"], link["current_width"], link["max_speed"], link["max_width"]) == (
            "16.0 GT/s PCIe",
            4,
            "16.0 GT/s PCIe",
            4,
        )
        assert link["degraded"] is False
    assert inv.raid == [
        {
            "name": "md0",
            "level": "raid0",
            "raid_disks": 4,
            "members": ["nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1"],
            "state": "clean",
            "chunk_size_bytes": 512 * 1024,
            "size_bytes": 4 * PM9A3_BYTES,
        }
    ]
    assert [d["name"] for d in inv.disks] == ["sda"]  # loop devices and partitions are not disks
    assert [(f["mount_point"], f["fs_type"], f["source"]) for f in inv.filesystems] == [
        ("/", "ext4", "/dev/sda2"),
        ("/dev/shm", "tmpfs", "tmpfs"),
        ("/data", "xfs", "/dev/md0"),
    ]
    assert all(f["size_bytes"] is None for f in inv.filesystems)  # a recorded tree's mounts are not here
    assert [(n["name"], n["speed_mbps"], n["virtual"], n["numa_node"]) for n in inv.nics] == [
        ("docker0", None, True, None),
        ("eno1", 25000, False, 0),
        ("ib0", 200000, False, 1),
    ]
    assert inv.rdma == [
        {
            "name": "mlx5_0",
            "numa_node": 1,
            "ports": [
                {"port": 1, "state": "ACTIVE", "rate": "200 Gb/sec (4X HDR)", "link_layer": "InfiniBand"}
            ],
        }
    ]
    assert [(g["bus_id"], g["numa_node"]) for g in inv.gpus] == list(
        zip(RAID0_GPUS, [0, 0, 1, 1], strict=True)
    )
    assert (demand.count, demand.type, demand.samples_per_s, demand.found_by) == (4, "h100", 28000, "NVML")
    assert pitfalls == []
    assert notes == [] and inv.notes == []


def test_degraded_link_is_the_one_pitfall():
    inv, demand, pitfalls, notes = _pitfalls(DEGRADED, None)
    assert [(d["name"], d["pcie_link"]["degraded"], d["numa_node"]) for d in inv.nvme] == [
        ("nvme0n1", True, None),  # numa_node -1: unknown
        ("nvme1n1", False, None),
    ]
    assert [p.check for p in pitfalls] == ["nvme_link_degraded"]
    (p,) = pitfalls
    assert p.severity == "high" and "nvme0n1" in p.what
    assert "8.0 GT/s PCIe x2" in p.evidence and "16.0 GT/s PCIe x4" in p.evidence
    assert "member of" not in p.evidence
    assert demand is None and inv.gpus == []
    assert any("NVML describes the live machine" in n for n in inv.notes)
    assert "RAID: no md arrays in /sys/block" in inv.notes
    assert any(n.startswith("cores for decode: no accelerator demand") for n in notes)


def test_a_narrow_raid_member_names_its_array(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(RAID0, tree)
    (tree / "sys/block/nvme2n1/device/device/current_link_width").write_text("2\n")
    _, _, pitfalls, _ = _pitfalls(tree, _h100s(*RAID0_GPUS))
    assert [(p.check, p.what.split("'")[0]) for p in pitfalls] == [("nvme_link_degraded", "nvme2n1")]
    assert "16.0 GT/s PCIe x2" in pitfalls[0].evidence and "member of md0" in pitfalls[0].evidence


def test_two_socket_box_with_gpus_away_from_nvme():
    inv, demand, pitfalls, notes = _pitfalls(TWO_SOCKET, _h100s(*TWO_SOCKET_GPUS), rate=900)
    assert (inv.cpu["logical_cpus"], inv.cpu["physical_cores"], inv.cpu["sockets"]) == (32, 16, 2)
    assert demand.found_by == "NVML" and notes == []  # every check ran
    assert [f["fs_type"] for f in inv.filesystems] == ["ext4", "tmpfs", "xfs", "xfs", "nfs4"]
    # 28,000 samples/s at 900 per core needs 31.1 cores of the 32, and the 4 trainers one core each
    assert [p.check for p in pitfalls] == ["too_few_cores", "ram_vs_gpu_memory", "numa_split", "no_rdma"]
    assert (
        "with 4 core(s) kept for the trainers, at least 36 cores are needed (8.8 per accelerator)"
        in pitfalls[0].evidence
    )
    assert "at 113 KiB per sample (given with --decode-rate) (the mean of ImageNet-1k" in pitfalls[0].evidence
    _, ram, numa, rdma = pitfalls
    assert "RAM 251 GiB" in ram.evidence and "320 GiB" in ram.evidence and "1.25 TiB" in ram.evidence
    assert "rule of thumb" in ram.evidence and ram.severity == "warning"
    assert "GPUs by node: node 1: 0, 1, 2, 3" in numa.evidence
    assert "NVMe by node: node 0: nvme0n1, nvme1n1" in numa.evidence
    assert "no RDMA device" in rdma.evidence and "10 Gb/s" in rdma.evidence and rdma.severity == "info"

    *_, slower, _ = _pitfalls(TWO_SOCKET, _h100s(*TWO_SOCKET_GPUS), rate=600)
    assert [p.check for p in slower] == ["too_few_cores", "ram_vs_gpu_memory", "numa_split", "no_rdma"]
    cores = slower[0]
    assert "28,000 samples/s" in cores.evidence and "600 samples/s per core" in cores.evidence
    assert "at least 51 cores" in cores.evidence and "32 logical CPUs (16 physical cores)" in cores.evidence


def test_workers_and_trainers_that_want_more_cores_than_usable_are_a_pitfall():
    inv = collect_inventory(str(TWO_SOCKET), _h100s(*TWO_SOCKET_GPUS))
    demand = demand_of_gpus(inv.gpus, "resnet50")[0]
    fits, _ = find_pitfalls(inv, demand, None, workers=7)  # 7 x 4 ranks + 4 trainer cores = 32
    assert "workers_oversubscribe_cores" not in [p.check for p in fits]
    over, _ = find_pitfalls(inv, demand, None, workers=8)
    (p,) = [p for p in over if p.check == "workers_oversubscribe_cores"]
    assert "8 worker(s) x 4 rank(s) + 4 core(s) for the 4 trainer process(es)" in p.evidence
    assert "= 36, and 32 are usable" in p.evidence and "fewer workers" in p.advice


def test_numa_is_not_judged_when_a_node_is_unknown():
    lib = FakeNvmlLib([FakeGpu(bus_id="00000000:99:00.0")])  # no numa_node file for this function
    _, _, pitfalls, notes = _pitfalls(TWO_SOCKET, lib)
    assert "numa_split" not in [p.check for p in pitfalls]
    assert any(n.startswith("NUMA: the GPUs' or NVMe devices' NUMA node is unknown") for n in notes)


def test_demand_from_the_command_line_and_from_gpu_names():
    d = parse_accelerators("8xH100", "resnet50")
    assert (d.count, d.type, d.samples_per_s, d.found_by, d.memory_bytes_each) == (
        8,
        "h100",
        56000,
        "--accelerators",
        80e9,  # "80 GB", as NVIDIA's specification states it
    )
    with pytest.raises(ValueError, match="expected COUNTxTYPE"):
        parse_accelerators("H100", "resnet50")
    with pytest.raises(
        ValueError, match="allowed values are a100, b200, h100, h200, l40s, mi300x, mi325x, mi355"
    ):
        parse_accelerators("2xB300", "resnet50")
    with pytest.raises(ValueError, match="for b200: allowed values are dlrm, flux, retinanet, unet3d"):
        parse_accelerators("2xB200", "resnet50")
    a100s = [{"index": 0, "name": "NVIDIA A100-SXM4-80GB"}, {"index": 1, "name": "NVIDIA A100-SXM4-80GB"}]
    assert demand_of_gpus(a100s, "resnet50")[0].samples_per_s == 2 * 2078
    none, why = demand_of_gpus([{"index": 0, "name": "NVIDIA L40S"}], "resnet50")
    assert none is None and "no figure for l40s (no public source gives what one consumes)" in why
    none, why = demand_of_gpus([{"index": 0, "name": "NVIDIA B300"}], "resnet50")
    assert none is None and "GPU 0 (NVIDIA B300) matches no single entry" in why
    mixed = [{"index": 0, "name": "NVIDIA H100 PCIe"}, {"index": 1, "name": "NVIDIA H200"}]
    assert "mixed GPU types (h100, h200)" in demand_of_gpus(mixed, "resnet50")[1]


def test_ram_rule_uses_the_table_when_no_gpu_is_present():
    _, demand, pitfalls, _ = _pitfalls(DEGRADED, None, accelerators="8xH100", rate=4000)
    assert demand.found_by == "--accelerators"
    ram = next(p for p in pitfalls if p.check == "ram_vs_gpu_memory")
    assert "8x h100 (--accelerators) with 596 GiB" in ram.evidence  # 8 x 80 GB
    # 56,000 samples/s at 4,000 per core needs 14 of its 24 logical CPUs, the 8 trainers 8 more
    assert {p.check for p in pitfalls} == {"ram_vs_gpu_memory", "nvme_link_degraded", "no_rdma"}


def _ok_cell(
    run_dir: Path,
    cell_id: str,
    decode_cpu: float | None,
    augment_cpu: float,
    wall: tuple[float, float],
    sample_bytes: float = 110 * 1024,
):
    summary = replace(
        ok_summary(cell_id, 100.0),
        stage_ms_per_sample={"decode": wall[0], "augment": wall[1]},
        stage_cpu_ms_per_sample={"decode": decode_cpu, "augment": augment_cpu}
        if decode_cpu is not None
        else {},
    )
    manifest = cell_manifest(summary, mean_sample_bytes=sample_bytes)
    publish_cell(run_dir, cell_id, {"summary.json": summary, "manifest.json": manifest})


def test_decode_rate_from_a_runs_stage_cpu_times(tmp_path):
    run = tmp_path / "run"
    _ok_cell(run, "a", 1.0, 0.25, (2.0, 0.5))
    _ok_cell(run, "b", 1.5, 0.5, (3.0, 1.0))
    _ok_cell(run, "c", 0.75, 0.25, (1.0, 0.5))
    publish_cell(run, "failed", {"summary.json": failed_summary("failed")})
    rate = from_runs([run])
    # medians: decode 1.0 ms at 110 KiB, augment 0.25 ms
    assert rate.per_core() == pytest.approx(800.0) and rate.kind == "run"
    assert "thread CPU time of 3 cell(s)" in rate.source
    # at twice the bytes decode doubles and augment does not: 1000 / (2.0 + 0.25)
    assert rate.per_core(220 * 1024) == pytest.approx(1000 / 2.25)
    assert "decode in proportion to the bytes (x2.00), augment unchanged" in rate.scaling(220 * 1024)

    old = tmp_path / "old"  # summaries without CPU times: their wall times
    _ok_cell(old, "a", None, 0, (2.0, 0.5))
    write_results_table(old)
    assert from_runs([old]).per_core() == pytest.approx(400.0)

    small = tmp_path / "small"  # cells measured on 55 KiB samples: each cost at its own size
    _ok_cell(small, "a", 0.5, 0.25, (1.0, 0.5), sample_bytes=55 * 1024)
    assert from_runs([small]).per_core(110 * 1024) == pytest.approx(800.0)

    extra = tmp_path / "extra"  # a cell asked for 2 ms of extra augment CPU: its own augment is the rest
    _ok_cell(extra, "a", 1.0, 2.25, (1.0, 2.25))
    summary = read_summary(extra, "a")
    loader = replace(summary.cell.loader, augment_cpu_ms=2.0)
    asked = replace(summary, cell=replace(summary.cell, loader=loader))
    publish_cell(extra, "a", {"summary.json": asked, "manifest.json": read_manifest(extra, "a")})
    assert from_runs([extra]).per_core() == pytest.approx(800.0)

    empty = tmp_path / "empty"
    publish_cell(empty, "failed", {"summary.json": failed_summary("failed")})
    with pytest.raises(ValueError, match="no successful cell with decode and augment times"):
        from_runs([empty])


def test_a_runs_decode_rate_is_its_decoders_and_each_decoder_keeps_its_own_calibration(tmp_path, monkeypatch):
    """Cells that decoded the crop box alone and cells that decoded whole images cost different CPU:
    a run gives a rate per decoder (the decoder most cells used first), and this host's calibration
    keeps each decoder's apart; resolve() takes the one the loaders use here by default."""
    from iobench.analysis import decoderate

    monkeypatch.setenv("IOBENCH_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "run"
    for cell_id, decode_ms, decoder in [("a", 0.8, "crop"), ("b", 0.8, "crop"), ("c", 1.0, "whole")]:
        _ok_cell(run, cell_id, decode_ms, 0.25, (decode_ms, 0.25))
        summary = replace(read_summary(run, cell_id), decoder=decoder)
        publish_cell(run, cell_id, {"summary.json": summary, "manifest.json": read_manifest(run, cell_id)})
    rates = decoderate.rates_of_runs([run])
    assert list(rates) == ["crop", "whole"]
    assert rates["crop"].per_core() == pytest.approx(1000 / 1.05) and rates[
        "whole"
    ].per_core() == pytest.approx(800)
    assert from_runs([run]).decoder == "crop" and ", crop (" in from_runs([run]).describe()

    kept = decoderate.keep_from_run(run)
    assert kept is not None and kept.decoder == "crop"
    assert decoderate.load_calibration("whole").per_core() == pytest.approx(800)
    assert decoderate.load_calibration("crop").per_core() == pytest.approx(1000 / 1.05)
    assert decoderate.resolve() == decoderate.ASSUMED  # neither is the loaders' own decoder here
    monkeypatch.setattr(decoderate, "default_decoder", lambda: "whole")
    assert decoderate.resolve().decoder == "whole" and decoderate.resolve().kind == "calibration"
    # a file of the layout before decoders were named holds no rate
    calibrations.store_path().unlink()
    (tmp_path / "cache" / calibrations.EARLIER_FILES["decode_rate"]).write_text(
        json.dumps(
            {"host": this_host(), **{k: v for k, v in asdict(rates["whole"]).items() if k != "decoder"}}
        )
    )
    assert decoderate.resolve() == decoderate.ASSUMED


def test_a_measured_rate_names_the_decoder_it_measured():
    from iobench.analysis import decoderate
    from loaders.pipeline import decoder_name

    for roi in (True, False):
        assert decoderate.measure_here(seconds=0.0, images=2, roi=roi).decoder == decoder_name(roi)


def test_measured_costs_decode_every_image_at_least_once():
    jpegs = [tiny_jpeg(i, 240, 320) for i in range(3)]
    decode_ms, augment_ms = measure_costs(jpegs, seconds=0.0)
    assert decode_ms > 0 and augment_ms > 0


def test_cli_json_on_a_recorded_tree(capsys):
    argv = ["--root", str(TWO_SOCKET), "--json", "--accelerators", "4xH100", "--decode-rate", "600"]
    code, out = _run(argv, _h100s(*TWO_SOCKET_GPUS), capsys)
    doc = json.loads(out)
    assert code == 0
    assert [p["check"] for p in doc["pitfalls"]] == [
        "too_few_cores",
        "ram_vs_gpu_memory",
        "numa_split",
        "no_rdma",
    ]
    assert doc["demand"]["samples_per_s"] == 28000 and doc["demand"]["found_by"] == "--accelerators"
    rate = doc["decode_rate"]
    assert (
        rate["samples_per_s_per_core"] == pytest.approx(600.0)
        and rate["source"] == "given with --decode-rate"
    )
    assert len(doc["inventory"]["gpus"]) == 4 and doc["inventory"]["root"] == str(TWO_SOCKET)


@pytest.mark.parametrize("tree", [RAID0, DEGRADED, TWO_SOCKET], ids=lambda p: p.name)
def test_terminal_output_shows_inventory_and_pitfalls(tree):
    parser = argparse.ArgumentParser()
    add_inspect_arguments(parser)
    out = io.StringIO()
    lib = _h100s(*(RAID0_GPUS if tree == RAID0 else TWO_SOCKET_GPUS)) if tree != DEGRADED else None
    args = parser.parse_args(["--root", str(tree), "--decode-rate", "900"])
    assert inspect_command(args, Console(file=out, width=200), nvml_lib=lib) == 0
    text = out.getvalue()
    assert "NVMe" in text and "Filesystems" in text and "pitfalls" in text
    if tree == RAID0:
        assert "md RAID" in text and "raid0" in text and "none found" in text and "GPUs (NVML)" in text
    if tree == DEGRADED:
        assert "HIGH nvme0n1's PCIe link runs below its capability" in text
    if tree == TWO_SOCKET:
        assert "GPUs and NVMe sit on different NUMA nodes" in text


def test_bad_root_is_a_clear_error(tmp_path):
    parser = argparse.ArgumentParser()
    add_inspect_arguments(parser)
    with pytest.raises(ValueError, match=r"--root .*: not a directory"):
        inspect_command(parser.parse_args(["--root", str(tmp_path / "nope")]), Console(file=io.StringIO()))


def test_this_machine_gives_valid_json(capsys):
    code, out = _run(["--json"], None, capsys)
    doc = json.loads(out)
    inv = doc["inventory"]
    assert code == 0 and inv["root"] == "/"
    assert inv["cpu"]["logical_cpus"] >= 1 and inv["memory"]["total_bytes"] > 0
    assert any(f["mount_point"] == "/" for f in inv["filesystems"])
    if not inv["gpus"]:  # this VM: NVML's absence is a note, not a crash
        assert any(n.startswith("GPUs: none found through NVML") for n in doc["notes"])


def test_nvml_absent_is_a_note(capsys):
    lib = FakeNvmlLib([], init_error=LIBRARY_NOT_FOUND)
    code, out = _run(["--json", "--root", str(RAID0)], lib, capsys)
    doc = json.loads(out)
    assert code == 0 and doc["inventory"]["gpus"] == [] and doc["pitfalls"] == []
    assert (
        "GPUs: none found through NVML: no NVIDIA driver: libnvidia-ml.so.1 was not found" in doc["notes"][0]
    )


def test_live_decode_rate_is_measured_when_demand_is_known_and_kept_for_this_host(
    capsys, tmp_path, monkeypatch
):
    from iobench.analysis import decoderate

    monkeypatch.setenv("IOBENCH_CACHE", str(tmp_path))
    assert decoderate.resolve() == decoderate.ASSUMED  # nothing measured here yet: the assumption
    code, out = _run(["--json", "--accelerators", "1xH100"], None, capsys)
    doc = json.loads(out)
    rate = doc["decode_rate"]
    assert code == 0 and rate["kind"] == "calibration" and rate["samples_per_s_per_core"] > 0
    assert rate["source"].startswith("measured on ")
    assert any(n.startswith("decode rate: kept as this host's calibration") for n in doc["notes"])
    # recommend and the estimate now take the same figure
    kept = decoderate.resolve()
    # quoted at the mean sample of resnet50's dataset (ImageNet, 115 KB), where recommend prices it too
    assert rate["sample_bytes"] == 115_657
    assert kept.kind == "calibration" and kept.per_core(115_657) == pytest.approx(
        rate["samples_per_s_per_core"]
    )
    cores = doc["cores_needed"]
    assert cores["per_accelerator"] == pytest.approx(7000 / rate["samples_per_s_per_core"] + 1)
    # a calibration from another host is not this one's
    path = calibrations.store_path()
    path.write_text(path.read_text().replace(this_host(), "elsewhere (Other CPU)"))
    assert decoderate.resolve() == decoderate.ASSUMED


def test_the_object_clients_installed_and_the_one_auto_picks(capsys):
    code, out = _run(["--json", "--root", str(RAID0), "--decode-rate", "900"], None, capsys)
    assert code == 0
    assert json.loads(out)["object_clients"] == {
        "installed": installed_clients(),
        "auto": resolve_client("auto"),
    }


def test_the_terminal_names_the_object_clients_with_the_install_hint_whole(monkeypatch):
    # s3fs alone (a core dependency): auto falls back to it, and the others' install hint shows
    monkeypatch.setattr("loaders.storage.clients.installed_clients", lambda: ["s3fs"])
    monkeypatch.setattr("iobench.inspect.inventory.installed_clients", lambda: ["s3fs"])
    parser = argparse.ArgumentParser()
    add_inspect_arguments(parser)
    out = io.StringIO()
    args = parser.parse_args(["--root", str(RAID0), "--decode-rate", "900"])
    assert inspect_command(args, Console(file=out, width=400), nvml_lib=None) == 0
    text = out.getvalue()
    assert (
        "object clients installed: s3fs; not installed: minio, s3torchconnector, obstore, s3dlio "
        "(pip install 'iobench[s3clients]'); `client: auto` reads with s3fs" in text
    )
