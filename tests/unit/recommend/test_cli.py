"""Today's accelerators (issue 34): MLPerf Storage v3.0's B200 and MI355 with the emulated compute
of its DLIO workload files, each figure sourced; recommend, inspect and the sweep file use them,
and a demand the table does not have is refused with what it does have."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from rich.console import Console

from iobench.accelerators.demand import UnknownAccelerator, lookup_demand, mlperf_au_threshold
from iobench.inspect.accelerators import parse_accelerators
from iobench.recommend.cli import recommend_command, scenario
from iobench.sweep.checks import ConfigError
from iobench.sweep.config import _accelerators
from tests.unit.recommend.test_model import _args

GIB = 2**30
UNET3D_STEP_BYTES = 7 * 146_600_628  # batch 7 of DLIO's unet3d record


@pytest.mark.parametrize(
    ("acc", "model", "step_s", "batch"),
    [
        ("b200", "unet3d", 0.162, 7),
        ("b200", "retinanet", 0.04755, 24),
        ("b200", "flux", 1.35, 48),
        ("b200", "dlrm", 0.000375, 16384),
        ("mi355", "retinanet", 0.0634, 32),
        ("mi355", "flux", 2.025, 72),
        ("mi355", "dlrm", 0.0005625, 16384),
        ("h100", "unet3d", 0.323, 7),
        ("a100", "cosmoflow", 0.00551, 1),
    ],
)
def test_mlperf_storage_workloads_as_dlio_defines_them(acc, model, step_s, batch):
    d = lookup_demand(acc, model, "mlperf_storage")
    assert (d.step_s, d.step_batch) == (step_s, batch)
    assert d.samples_per_s == pytest.approx(batch / step_s)
    assert re.search(
        rf"github\.com/mlcommons/storage/blob/[0-9a-f]{{40}}/configs/dlio/workload/{model}_{acc}\.yaml",
        d.source,
    )


def test_unet3d_demand_matches_mlcommons_storage_692():
    # mlcommons/storage#692: A100 1.50, H100 2.96, B200 5.90 GiB/s per accelerator
    for acc, gib_s in (("a100", 1.50), ("h100", 2.96), ("b200", 5.90)):
        d = lookup_demand(acc, "unet3d", "mlperf_storage")
        assert UNET3D_STEP_BYTES / d.step_s / GIB == pytest.approx(gib_s, abs=0.005)
        assert "mlcommons/storage/issues/692" in d.source
    assert (mlperf_au_threshold("unet3d"), mlperf_au_threshold("retinanet"), mlperf_au_threshold("dlrm")) == (
        0.90,
        0.85,
        0.70,
    )


def test_a_demand_the_table_lacks_names_the_one_it_has():
    with pytest.raises(UnknownAccelerator, match=re.escape("has: mlperf_storage (demand: mlperf_storage)")):
        lookup_demand("b200", "unet3d", "training")
    with pytest.raises(UnknownAccelerator, match="allowed values are dlrm, flux, retinanet, unet3d"):
        lookup_demand("b200", "resnet50", "mlperf_storage")


def test_recommend_8xb200_answers_with_mlperf_storages_sourced_demand():
    argv = ("--dataset-size", "5TB", "--accelerators", "8xB200", "--model", "retinanet", "--demand", "mlperf_storage",
            "--nvme", "8x3.84TB", "--ram", "2TB", "--cores", "112", "--decode-rate", "900", "--json")  # fmt: skip
    s = scenario(_args(*argv))
    assert s.per_accelerator.value == pytest.approx(24 / 0.04755)
    assert (
        "b200/retinanet/mlperf_storage" in s.per_accelerator.source
        and "retinanet_b200.yaml" in s.per_accelerator.source
    )
    assert s.sample_bytes == 322_957 and s.trainer_cores is None  # DLIO's emulation sleeps
    assert s.accelerator_memory_bytes == 180e9  # "180 GB", as specified
    out = StringIO()
    assert recommend_command(_args(*argv), Console(file=out)) == 0
    assert json.loads(out.getvalue())["requirement"]["samples_per_s"] == pytest.approx(8 * 24 / 0.04755)
    # a demand the table lacks names the flag and the figure it has
    with pytest.raises(
        ValueError,
        match=re.escape("--demand training for b200/unet3d: configs/accelerators.yaml has no such figure"),
    ):
        scenario(_args("--dataset-size", "5TB", "--accelerators", "8xB200", "--model", "unet3d", "--demand", "training",
                       "--ram", "2TB", "--nvme", "none", "--cores", "112"))  # fmt: skip
    # without --demand, the one figure the table has, and the answer says so; MLPerf Storage's
    # emulation reads without decoding: no decode is priced
    s = scenario(_args("--dataset-size", "5TB", "--accelerators", "8xB200", "--model", "unet3d"))
    assert "(--demand not given: mlperf_storage, the only figure the table has)" in s.per_accelerator.source
    assert s.decoding == "none" and s.batch == 7 and s.target.startswith("dgx-b200")


def test_inspect_and_the_sweep_file_take_b200_and_mi355():
    d = parse_accelerators("8xB200", "unet3d", "mlperf_storage")
    assert (d.count, d.type, d.kind, d.memory_bytes_each) == (8, "b200", "mlperf_storage", 180e9)
    assert d.samples_per_s == pytest.approx(8 * 7 / 0.162)
    assert parse_accelerators("4xMI355", "retinanet", "mlperf_storage").memory_bytes_each == 288e9
    [acc] = _accelerators(
        [{"kind": "emulated", "type": "b200", "model": "unet3d", "demand": "mlperf_storage"}]
    )
    assert acc.type == "b200"
    with pytest.raises(
        ConfigError, match=re.escape("accelerators[0]: accelerator.demand='training' for b200/unet3d")
    ):
        _accelerators([{"kind": "emulated", "type": "b200", "model": "unet3d"}])
    with pytest.raises(ConfigError, match="allowed values are none, resnet50, small_cnn"):
        _accelerators([{"kind": "emulated", "type": "b200", "model": "unet3d", "demand": "mlperf_storage",
                        "host_work": "unet3d"}])  # fmt: skip


def test_a_workload_with_no_parameter_count_has_no_modelled_all_reduce():
    from iobench.cell.ranks.allreduce import gradient_size_known
    from iobench.sweep.config import parse_config
    from tests.unit.sweep.test_config import _raw

    raw = _raw(ranks_per_node=[2], sync="allreduce")
    raw["accelerators"] = [
        {"kind": "emulated", "type": "b200", "model": "unet3d", "demand": "mlperf_storage"}
    ]
    with pytest.raises(
        ConfigError, match=re.escape("accelerators[0].model='unet3d': configs/accelerators.yaml has no")
    ):
        parse_config(raw)
    raw["run"]["sync"] = "barrier"
    assert parse_config(raw).accelerators[0].model == "unet3d"
    [b200] = parse_config(raw).accelerators
    [h100] = _accelerators([{"kind": "emulated", "type": "h100"}])
    assert not gradient_size_known(b200, None) and gradient_size_known(h100, None)
