"""inspect and recommend say the same cores per accelerator for the same inputs: decode + augment
at the demand, at the mean sample of the model's dataset, and the trainer's whole cores."""

from __future__ import annotations

import json
from argparse import Namespace

import pytest

from iobench.inspect.cli import inspect_command
from iobench.recommend.cli import scenario
from iobench.recommend.placements import options
from tests.unit.recommend.test_model import _args


@pytest.mark.parametrize(("accelerators", "rate"), [("8xH100", "900"), ("4xA100", "650")])
def test_inspect_and_recommend_agree_on_cores_per_accelerator(capsys, accelerators, rate):
    args = Namespace(json=True, accelerators=accelerators, model="resnet50", demand="training",
                     decode_rate=float(rate), results=None, workers=None, root="/")  # fmt: skip
    assert inspect_command(args, None) == 0
    inspected = json.loads(capsys.readouterr().out)["cores_needed"]
    s = scenario(_args("--dataset-size", "1TB", "--accelerators", accelerators, "--decode-rate", rate))
    cpu = next(o for o in options(s, None) if o.decode == "cpu")
    # e.g. 8 x H100: 7,000 / 900 per core + 1 trainer core = 8.78 per accelerator, 70.2 in all
    assert inspected["per_accelerator"] == pytest.approx(cpu.cores_per_accelerator)
    assert inspected["total"] == pytest.approx(cpu.cores_needed)
    assert inspected["per_accelerator"] == pytest.approx(s.per_accelerator.value / float(rate) + 1)
