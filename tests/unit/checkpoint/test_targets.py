"""A checkpoint destination's tier, built for the writer that needs its kind's own class: a kind
registered as another class is a clear error, not an attribute missing deep in a save."""

from __future__ import annotations

import pytest

from iobench.checkpoint import targets
from iobench.checkpoint.errors import CheckpointError
from iobench.results.checkpoint import CheckpointDestination
from iobench.tiers import make_tier
from iobench.tiers.rados import RadosTier
from iobench.tiers.s3 import S3Tier


@pytest.mark.parametrize("cls", [S3Tier, RadosTier])
def test_a_kind_registered_as_another_class_is_named(cls, monkeypatch, tmp_path):
    local = make_tier({"kind": "local", "path": str(tmp_path)})
    monkeypatch.setattr(targets, "make_tier", lambda spec: local)
    dest = CheckpointDestination("ckpt", {"kind": cls.kind}, f"{cls.scheme}://bucket/prefix")
    with pytest.raises(CheckpointError, match=rf"registered as LocalTier.*through {cls.__name__}"):
        targets._tier_of(dest, cls)


def test_the_kinds_own_class_is_the_tier_it_gives(monkeypatch):
    monkeypatch.setattr(targets, "make_tier", lambda spec: RadosTier(url=spec["url"]))
    dest = CheckpointDestination("ckpt", {"kind": "rados"}, "rados://pool/checkpoints")
    tier = targets._tier_of(dest, RadosTier)
    assert (tier.pool, tier.prefix) == ("pool", "checkpoints")
