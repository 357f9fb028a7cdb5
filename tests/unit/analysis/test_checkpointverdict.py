"""The checkpoint verdict's sentence: the synchronous save leads where it was measured, the other
modes follow it, and the write rate that keeps the save under 1 % is said where a clean step is known."""

from __future__ import annotations

from iobench.analysis.checkpointverdict import sentence
from iobench.results.checkpoint import (
    CheckpointCost,
    CheckpointDestination,
    CheckpointFigures,
    CheckpointSettings,
    TransferFigures,
)


def _figures(mode: str, cost: float | None, clean_step_s: float | None = 0.1) -> CheckpointFigures:
    where = CheckpointDestination(name="disk", tier={"kind": "local"}, location="/ckpt")
    settings = CheckpointSettings(where, mode, every_steps=8, state_bytes=2 * 10**9, state_said="2 GB")
    measured = CheckpointCost(
        saves=3, every_steps=8, blocked_s_per_save=0.5, blocked_fraction=0.05, slowed_steps=0,
        slowed_step_ratio=None, slowed_extra_fraction=0.0, au_with=0.9, au_without=0.9 + (cost or 0),
        cost=cost, clean_step_s=clean_step_s,
    )  # fmt: skip
    save = TransferFigures(
        count=3,
        bytes=6 * 10**9,
        seconds_mean=1.0,
        seconds_max=1.1,
        gb_per_s_per_rank=2.0,
        gb_per_s_per_node=2.0,
    )
    return CheckpointFigures(
        settings=settings, writer="iobench (O_DIRECT)", where="local disk", saves=(), save=save,
        restore_cold=None, restore_warm=None, cold_method="", cost=measured, verdict="",
    )  # fmt: skip


def test_the_synchronous_save_leads_and_the_others_follow():
    text = sentence([_figures("async", 0.02), _figures("sync", 0.05), _figures("async_pinned", 0.01)])
    assert text.startswith("checkpointing every 8 steps costs 5")
    assert "(sync); async 2" in text and "; async_pinned 1" in text
    assert "the tier writes 2.00 GB/s per node" in text and "needs" in text


def test_without_a_synchronous_save_the_first_measured_leads_and_no_rate_without_a_clean_step():
    text = sentence([_figures("async_pinned", 0.01, clean_step_s=None), _figures("async", 0.02)])
    assert "(async_pinned); async 2" in text and "needs" not in text
    assert sentence([]) == "no checkpoint cell measured a save"
