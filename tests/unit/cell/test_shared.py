"""What the cell's entry points share (cell/entry/shared.py): the facts a cell's figures are told of
its setup, from its inputs, and the command line they take."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from iobench.accelerators.consumers import make_consumer
from iobench.cell.entry.shared import cell_arguments, setup_facts
from iobench.cell.inputs import cell_inputs
from iobench.cell.ranks.allreduce import interconnect
from iobench.results.codec import to_json
from iobench.results.spec import AcceleratorSpec, CellSpec, LoaderSettings, RunSettings


def _cell(dataset, model: str = "resnet50", **run) -> CellSpec:
    return CellSpec(
        cell_id="local-w1",
        tier={"name": "local", "kind": "local", "path": str(dataset)},
        loader=LoaderSettings(kind="torch", workers=1, batch_size=32),
        accelerator=AcceleratorSpec(kind="emulated", type="h100", model=model, demand="mlperf_storage"),
        cache="as-is",
        run=RunSettings(**run),
        dataset=str(dataset),
    )


def _facts(cell: CellSpec):
    return setup_facts(cell_inputs(cell, make_consumer(cell.accelerator, cell.loader.batch_size), 2))


def test_a_fabric_and_a_gradient_size_give_the_job_at_scale_its_all_reduce(tiny_dataset):
    cell = _cell(tiny_dataset, interconnect=interconnect("ib-ndr-400"))
    facts = _facts(cell)
    assert facts.exposed_allreduce is not None
    assert facts.exposed_allreduce(1, 0.0) == 0.0 < facts.exposed_allreduce(8, 0.0)
    assert facts.dataset_bytes == sum(p.stat().st_size for p in tiny_dataset.glob("*.tar"))
    assert facts.server_caches is None  # a local disk's caches are the host's, dropped or said
    assert facts.mlperf_threshold == pytest.approx(0.9)
    assert not any("all-reduce" in note for note in facts.notes)
    assert _facts(replace(cell, run=replace(cell.run, interconnect=None))).exposed_allreduce is None


def test_a_fabric_without_a_gradient_size_is_said_not_modelled(tiny_dataset):
    facts = _facts(_cell(tiny_dataset, model="unet3d", interconnect=interconnect("ib-ndr-400")))
    assert facts.exposed_allreduce is None
    assert any(note.startswith("all-reduce not modelled") and "unet3d" in note for note in facts.notes)


def test_an_entry_point_takes_a_cell_and_a_run_directory(tmp_path, tiny_dataset, capsys):
    spec = tmp_path / "cell.json"
    spec.write_text(json.dumps(to_json(_cell(tiny_dataset))))
    assert cell_arguments([str(spec), str(tmp_path)], "cmd") == (_cell(tiny_dataset), tmp_path)
    with pytest.raises(SystemExit) as ended:
        cell_arguments([str(spec)], "python -m x")
    assert ended.value.code == 2
    assert "usage: python -m x CELL.json RUN_DIR" in capsys.readouterr().err
