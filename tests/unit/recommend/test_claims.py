"""The seed write-up's storage table, given to recommend as measured inputs: under 1 TB 4 x NVMe
RAID0 at 12 GB/s, 1-10 TB 2 x NVMe cache + object storage at 8 GB/s, over 10 TB Ceph + memory cache
at 5 GB/s. Each row enters as what it claims (claims.as_measured: the RAID0 as the NVMe array's own
rate, the two setups as their delivered rates at their sizes only); at each row's size recommend
either picks the row's setup or says why it does not."""

from __future__ import annotations

import json
from io import StringIO

import pytest
import yaml
from rich.console import Console

from iobench.analysis.decoderate import given
from iobench.recommend.calibrate import Figure
from iobench.recommend.claims import WRITE_UP_TABLE, as_measured
from iobench.recommend.cli import recommend_command
from iobench.recommend.hypotheses import tier_check
from iobench.recommend.placements import Scenario
from tests.unit.recommend.test_model import _args

TB = 1e12


def _node(drive_bytes: float, **kw) -> Scenario:
    """8 x H100 (7,000 samples/s each of 110 KB: 6.16 GB/s) on a node with 4 NVMe drives."""
    base = dict(
        dataset_bytes=1 * TB,
        sample_bytes=110e3,
        accelerators=8,
        accelerator="H100",
        per_accelerator=Figure(7000.0, "test", origin="published"),
        accelerator_memory_bytes=80 * 2**30,
        nvme_devices=4,
        nvme_bytes=4 * drive_bytes,
        ram_bytes=1 * TB,
        cores=112,
        decode=given(900.0, 110e3),
        rates=as_measured(),
    )
    return Scenario(**{**base, **kw})


def _rows(s: Scenario) -> dict[str, object]:
    return {c.setup: tier_check(s, None, c) for c in WRITE_UP_TABLE}


def test_the_table_on_a_node_whose_nvme_holds_5_tb():
    rows = _rows(_node(3.84 * TB))  # 15.4 TB of NVMe
    # under 1 TB: the RAID0 at its given 12 GB/s (and the page cache) feeds the 6.16 GB/s demand
    # (decoded on the GPUs: at equal AU the option that keeps fewer cores busy leads)
    assert (
        rows["local"].agrees is True and "local NVMe, DALI decode leads: AU 1.00" in rows["local"].model_says
    )
    # at 5 TB the dataset still fits the node's NVMe: the RAID0 (12 GB/s) and the object store with
    # its NVMe cache (8 GB/s delivered) both feed the demand, and the local array is the simpler
    # setup: recommend disagrees with the table, and says why
    five = rows["object+nvme"]
    assert five.agrees is False
    assert "both feed the demand (AU 1.00); local NVMe is the simpler setup" in five.model_says
    # over 10 TB: the NVMe cannot hold 50 TB; the table gives the object store's setup a rate only
    # for 1-10 TB, so at 50 TB it is not known, and Ceph with its memory cache at its given 5 GB/s
    # (AU 5 / 6.16 = 0.81) is the one option with a rate: it leads, but it starves the GPUs, and a
    # rule never agrees with an option below the target
    fifty = rows["ceph+ram"]
    assert fifty.agrees is False
    assert "Ceph + RAM cache, DALI decode leads but does not reach AU 0.90: AU 0.81" in fifty.model_says


def test_the_table_on_a_node_whose_nvme_holds_less_than_5_tb():
    rows = _rows(_node(0.96 * TB))  # 3.84 TB of NVMe
    assert rows["local"].agrees is True
    # the dataset no longer fits the NVMe: the object store with its NVMe cache, as the table says
    assert (
        rows["object+nvme"].agrees is True and "object store + NVMe cache" in rows["object+nvme"].model_says
    )
    assert rows["ceph+ram"].agrees is False  # its setup leads at AU 0.81: below the target


def test_a_claim_never_becomes_a_tiers_rate():
    # given as measured, the 1-10 TB claim is the setup's delivered rate at those sizes only: at 50 TB
    # the object store's own rate is still unknown
    s = _node(3.84 * TB, dataset_bytes=50 * TB)
    assert s.rates.tier("object") is None and s.rates.tier("ceph") is None
    assert s.rates.delivered_for("object+nvme", 50 * TB) is None
    assert s.rates.delivered_for("object+nvme", 5 * TB).rate.value == 8e9
    assert s.rates.tier("nvme").value == 12e9 and s.rates.tier("nvme").origin == "given"


def test_the_table_through_the_command_line(tmp_path):
    """The same table as a user would give it: a rates YAML with the array's rate and the two
    setups' delivered rates, on the reference DGX H100 with 4 of its drives."""
    rates = tmp_path / "rates.yaml"
    rates.write_text(
        yaml.safe_dump(
            {
                "nvme": "12GB/s",
                "delivered": [
                    {"setup": "object+nvme", "rate": "8GB/s", "sizes": "1TB-10TB", "source": "the write-up"},
                    {"setup": "ceph+ram", "rate": "5GB/s", "sizes": ">10TB", "source": "the write-up"},
                ],
            }
        )
    )
    out = StringIO()
    argv = ["--dataset-size", "50TB", "--accelerators", "8xH100", "--nvme", "4x3.84TB", "--ram", "1TB",
            "--decode-rate", "900", "--rates", str(rates), "--json"]  # fmt: skip
    assert recommend_command(_args(*argv), Console(file=out)) == 0
    doc = json.loads(out.getvalue())
    best = doc["options"][0]
    assert (best["name"], best["decode"]) == ("Ceph + RAM cache", "dali")
    assert doc["schema_version"] == 2 and doc["recommendation"]["option"] == "Ceph + RAM cache, DALI decode"
    assert doc["recommendation"]["reaches_target"] is False  # AU 0.81
    delivered = best["inputs"]["delivered by the setup at > 10 TB (bytes/s)"]
    assert (
        delivered["value"] == 5e9 and delivered["origin"] == "given" and "the write-up" in delivered["source"]
    )
    rows = {h["rule"].split(",")[0]: h for h in doc["hypotheses"]}
    assert rows["> 10 TB: Ceph + memory cache"]["agrees"] is False  # it leads at AU 0.81
    assert rows["1 TB-10 TB: 2 x NVMe cache + object storage"]["agrees"] is False


@pytest.mark.parametrize("size", [0.5 * TB, 5 * TB, 50 * TB])
def test_without_measured_rates_no_row_is_judged(size):
    """The write-up's table is not judged against its own figures: with no rate measured or given
    (datasheets only), no row agrees or disagrees."""
    s = _node(3.84 * TB, rates=as_measured(()))
    claim = next(c for c in WRITE_UP_TABLE if c.check_at_bytes == size)
    assert tier_check(s, None, claim).agrees is None
