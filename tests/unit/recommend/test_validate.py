"""recommend --results: which measured figures carry over to the target node (a rate measured on a
VM's virtio disk is not the target's NVMe RAID), and each cell's prediction on the summary's one AU
basis (device busy / wall), with the trainer's own step capping its consumer, errors as
predicted / measured - 1 with their intervals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from iobench.recommend.calibrate import MeasuredOn, calibrate
from iobench.recommend.hostcheck import carry_over
from iobench.recommend.placements import options
from iobench.recommend.validate import check_cell, relative_error
from tests.unit.recommend.test_model import _cell, _scenario

VM = MeasuredOn(
    "vm",
    "Intel(R) Xeon(R) Processor",
    2,
    25 * 2**30,
    False,
    "virtio",
    "vda: virtio disk of a virtual machine",
)
RAID = MeasuredOn(
    "gpu1", "AMD EPYC 7313", 64, 2**40, True, "nvme-raid", "md0: raid0 of 4 NVMe (SAMSUNG MZQL23T8HCLS)"
)
LAB = MeasuredOn(
    "vm", "Intel(R) Xeon(R) Processor", 2, 25 * 2**30, False, "remote", "s3 at http://127.0.0.1:7480", True
)


def _disk(on: MeasuredOn, **kw):
    # a cold cell the disk held back (its readers waited on it): 250/s x 100 KB = 25 MB/s
    waits = {"fetch": 1.2, "decode": 1.8, "augment": 0.2, "collate": 0.0}
    return _cell("disk-w1", samples_per_s=250.0, wall_ms=waits, measured_on=on, **kw)


def test_a_virtio_disk_is_not_the_targets_nvme():
    cal, decisions = carry_over(calibrate([_disk(VM)]), _scenario())
    said = {d.figure.split(" bandwidth")[0]: d for d in decisions}
    disk = said["tier 'disk' (local)"]
    assert (
        not disk.carried
        and "vda: virtio disk of a virtual machine" in disk.why
        and "--same-storage" in disk.why
    )
    assert cal.tiers["disk"].bandwidth is None and cal.tiers["disk"].fetch_cpu_ms == 0.1  # CPU still carries
    local = next(o for o in options(_scenario(), cal) if o.setup == "local")
    assert local.inputs["backend bandwidth (bytes/s)"].value == 13.6e9  # the drives' datasheet stands
    cpu = said["CPU per sample (decode, augment, collate, loader overhead, training process)"]
    assert (
        cpu.carried
        and "vm (Intel(R) Xeon(R) Processor, 2 usable CPUs" in cpu.why
        and "its 96 cores" in cpu.why
    )
    # the user says it is the same storage: it carries
    cal, decisions = carry_over(calibrate([_disk(VM)]), _scenario(), same_storage=True)
    assert cal.tiers["disk"].bandwidth.value == pytest.approx(25e6)
    local = next(o for o in options(_scenario(), cal) if o.setup == "local")
    assert local.inputs["backend bandwidth (bytes/s)"].value == pytest.approx(25e6)


def test_nvme_carries_to_nvme_and_a_loopback_lab_does_not():
    cal, decisions = carry_over(calibrate([_disk(RAID)]), _scenario())
    assert cal.tiers["disk"].bandwidth is not None and "md0: raid0 of 4 NVMe" in decisions[2].why
    lab = _disk(LAB, tier="lab", tier_kind="s3")
    cal, decisions = carry_over(calibrate([lab]), _scenario())
    assert cal.tiers["lab"].bandwidth is None and "loopback" in decisions[2].why


def test_au_is_predicted_on_the_summarys_basis_and_the_trainer_caps_its_consumer():
    # an emulated H100 (7,000/s) whose trainer alone steps at 3,000/s: its host work exceeds its
    # device time. Without workers, a sample costs 2.1 ms of loading + the step alone's 1/3000 s:
    # 1 / (2.1 ms + 0.5 ms overhead + 0.3333 ms) = 340.9/s. AU = that x 1/7000 s of device per sample
    measured = 1 / (2.1e-3 + 0.5e-3 + 1 / 3000)
    w0 = _cell("w0", workers=0, samples_per_s=measured, au=measured / 7000,
               alone_s_per_sample=1 / 3000, device_s_per_sample=1 / 7000)  # fmt: skip
    assert w0.consumer_rate == pytest.approx(3000.0)  # not the 7,000/s it "demands"
    w1 = _cell("w1", workers=1, samples_per_s=1 / 2.6e-3)  # its overhead: 0.5 ms
    c = check_cell(w0, [w0, w1])
    assert c.predicted_samples_per_s == pytest.approx(measured)
    assert c.predicted_au == pytest.approx(measured / 7000) and c.au_error == pytest.approx(0.0, abs=1e-9)
    assert "3,000/s, timed alone" in c.inputs["consumer"] and "0.1429 ms of device busy" in c.inputs["AU"]
    # the error's sign: predicted / measured - 1, and against the measured interval's ends
    slow = replace(w0, samples_per_s=measured * 1.25, au=measured * 1.25 / 7000, rate_interval=(400.0, 450.0))
    c = check_cell(slow, [slow, w1])
    assert c.error == pytest.approx(1 / 1.25 - 1)  # predicted below measured: negative
    assert c.error_interval == pytest.approx((measured / 450 - 1, measured / 400 - 1))


def test_relative_error_without_an_interval():
    assert relative_error(90.0, 100.0, None) == (pytest.approx(-0.1), None)
    assert relative_error(90.0, 0.0, None) == (None, None)
