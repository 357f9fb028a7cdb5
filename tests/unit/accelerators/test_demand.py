"""What configs/accelerators.yaml says a figure is (its origin): one of the values its header
defines, for every figure; a value it does not define is an error that names the entry."""

from __future__ import annotations

import copy
from typing import get_args

import pytest

from iobench.accelerators import demand
from iobench.accelerators.demand import DEMANDS, TableOrigin, load_accelerator_table, lookup_demand, read_cpu


def test_every_figure_of_the_table_has_an_origin_its_header_defines():
    table = load_accelerator_table()
    for accelerator, entry in table.items():
        for model, figures in (entry.get("models") or {}).items():
            for kind in DEMANDS:
                if kind in figures:
                    assert lookup_demand(accelerator, model, kind).origin in get_args(TableOrigin)
    for model in demand.load_model_table():
        found = read_cpu(model)
        assert found is None or found.origin in get_args(TableOrigin)


def test_an_origin_the_header_does_not_define_names_the_entry(monkeypatch):
    table = copy.deepcopy(demand._table())
    accelerator, entry = next(
        (a, e)
        for a, e in table["accelerators"].items()
        if "training" in (e.get("models") or {}).get("resnet50", {})
    )
    entry["models"]["resnet50"]["training"]["origin"] = "measured-somewhere"
    monkeypatch.setattr(demand, "_table", lambda: table)
    with pytest.raises(ValueError, match=rf"{accelerator}/resnet50/training: origin='measured-somewhere'"):
        lookup_demand(accelerator, "resnet50", "training")
