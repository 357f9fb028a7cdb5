"""This host's calibrations in one store, keyed by host and by what was calibrated."""

from __future__ import annotations

import json

import pytest

from iobench.host import calibrations
from iobench.host.machine import this_host


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IOBENCH_CACHE", str(tmp_path))


def test_each_kind_and_key_is_kept_apart_and_the_latest_replaces_the_one_before():
    calibrations.keep("decode_rate", "crop", {"decode_ms": 1.0})
    calibrations.keep("decode_rate", "crop", {"decode_ms": 0.8})
    calibrations.keep("decode_rate", "whole", {"decode_ms": 1.2})
    path = calibrations.keep("trainer_host", calibrations.trainer_key("resnet50", "cuda", 256), {"x": 1})
    assert calibrations.kept("decode_rate") == {"crop": {"decode_ms": 0.8}, "whole": {"decode_ms": 1.2}}
    assert calibrations.kept("trainer_host") == {"resnet50/cuda/256": {"x": 1}}
    assert path == calibrations.store_path() and list(json.loads(path.read_text())["hosts"]) == [this_host()]


def test_another_hosts_calibrations_are_kept_but_not_read_as_this_ones():
    other = {
        "format": calibrations.FORMAT,
        "hosts": {"elsewhere (Other CPU)": {"decode_rate": {"crop": {"a": 1}}}},
    }
    calibrations.store_path().write_text(json.dumps(other))
    assert calibrations.kept("decode_rate") == {}
    calibrations.keep("decode_rate", "crop", {"a": 2})
    hosts = json.loads(calibrations.store_path().read_text())["hosts"]
    assert hosts["elsewhere (Other CPU)"] == other["hosts"]["elsewhere (Other CPU)"]
    assert hosts[this_host()] == {"decode_rate": {"crop": {"a": 2}}}


def test_an_earlier_versions_file_is_read_beneath_the_store_and_carried_into_it(tmp_path):
    earlier = tmp_path / calibrations.EARLIER_FILES["decode_rate"]
    earlier.write_text(json.dumps({"host": this_host(), "rates": {"crop": {"a": 1}, "whole": {"a": 1}}}))
    assert calibrations.kept("decode_rate") == {"crop": {"a": 1}, "whole": {"a": 1}}
    calibrations.keep("decode_rate", "crop", {"a": 2})
    earlier.unlink()
    assert calibrations.kept("decode_rate") == {"crop": {"a": 2}, "whole": {"a": 1}}
    # an earlier file of another host's is not this one's
    earlier.write_text(json.dumps({"host": "elsewhere (Other CPU)", "rates": {"other": {"a": 3}}}))
    assert "other" not in calibrations.kept("decode_rate")


@pytest.mark.parametrize(
    "text", ["{not json", "[]", '{"format": 99, "hosts": {}}', '{"format": 1, "hosts": []}']
)
def test_a_store_that_cannot_be_read_holds_none_and_is_rewritten(text):
    calibrations.store_path().write_text(text)
    assert calibrations.kept("trainer_host") == {}
    calibrations.keep("trainer_host", "m/cpu/1", {"x": 1})
    assert calibrations.kept("trainer_host") == {"m/cpu/1": {"x": 1}}
