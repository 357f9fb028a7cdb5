"""A cell in MLPerf mode, end to end on a tiny synthetic dataset (local tier, one worker): every
sample's bytes are read and counted, nothing is decoded, and its AU is DLIO's rule over its own
step log."""

from __future__ import annotations

import tarfile

import pyarrow.parquet as pq
import pytest

from iobench.cell.entry import process
from iobench.recommend.calibrate import load_cells
from iobench.results.spec import AcceleratorSpec, CellSpec, LoaderSettings, MinMeasure, RunSettings
from iobench.results.store import cell_summaries
from tests.helpers.runs import exact_epochs


def _cell(dataset, decode: bool) -> CellSpec:
    return CellSpec(
        cell_id=f"local-w1-{'decode' if decode else 'nodecode'}",
        tier={"name": "local", "kind": "local", "path": str(dataset)},
        loader=LoaderSettings(kind="torch", workers=1, batch_size=32, shuffle_buffer=16, decode=decode),
        accelerator=AcceleratorSpec(
            kind="emulated", type="h100", model="resnet50", demand="mlperf_storage", count=1
        ),
        cache="as-is",
        run=RunSettings(warmup_steps=0, epochs=2, min_measure=MinMeasure(**exact_epochs())),
        dataset=str(dataset),
    )


def test_the_mlperf_mode_reads_every_byte_decodes_nothing_and_its_au_is_dlios(tmp_path, tiny_dataset):
    cell = _cell(tiny_dataset, decode=False)
    assert cell.mlperf_mode
    s = process.run_cell(cell, tmp_path)
    assert s.ok and s.mlperf is not None and s.metrics is not None
    assert s.mlperf.reading == "mlperf"
    # every sample of both epochs was read in full: at least each image's bytes, as the shards hold them
    images = 0
    for shard in tiny_dataset.glob("*.tar"):
        with tarfile.open(shard) as tar:
            images += sum(m.size for m in tar.getmembers() if m.name.endswith(".jpg"))
    shards = sum(p.stat().st_size for p in tiny_dataset.glob("*.tar"))
    assert s.metrics.samples == 2 * 256
    assert 2 * images <= s.loader_stats_all_steps.bytes_read <= 2 * shards
    assert [e.bytes_read >= images for e in s.epochs] == [True, True]
    # nothing decoded or augmented
    assert s.stage_ms_per_sample.get("decode", 0.0) == 0.0 == s.stage_ms_per_sample.get("augment", 0.0)
    # the compute slept is MLPerf Storage's: 0.224 s per batch of 400 on an H100, so 32 / (400 / 0.224)
    rows = pq.read_table(tmp_path / cell.cell_id / "steps.parquet").to_pylist()
    assert {r["samples"] for r in rows} == {32}
    assert min(r["compute_s"] for r in rows) >= 32 * 0.224 / 400
    # DLIO's AU of each epoch from the step log: the device time of steps 2..n (here the sleep, as
    # DLIO's) over end of step 1 to end of step n
    for epoch, au in enumerate(s.mlperf.epoch_au):
        steps = sorted((r for r in rows if r["epoch"] == epoch), key=lambda r: r["t_end"])
        wall = steps[-1]["t_end"] - steps[0]["t_end"]
        assert au == pytest.approx(sum(r["device_s"] for r in steps[1:]) / wall)
        assert all(r["device_s"] >= 32 * 0.224 / 400 for r in steps)
    assert s.mlperf.au_mean == pytest.approx(sum(s.mlperf.epoch_au) / 2)
    # the summary as written says so, and recommend does not price decoding from a cell that did none
    (written,) = cell_summaries(tmp_path)
    assert (
        written.mlperf is not None and written.mlperf.reading == "mlperf" and not written.cell.loader.decode
    )
    assert load_cells([tmp_path]) == []
