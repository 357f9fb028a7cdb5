"""One ledger per step (analysis/ledger.py): every second of a rank's time in exactly one part."""

from __future__ import annotations

import pytest

from iobench.analysis.ledger import account, clipped, device_busy, ledger, totals
from iobench.results.figures import ACCOUNT_PARTS, StepAlone, StepRow


def _row(step: int, t: float, **kw) -> StepRow:
    fields = dict(wait_s=0.1, h2d_s=0.01, compute_s=0.05)
    fields.update(kw)
    end = t + fields["wait_s"] + fields["h2d_s"] + fields["compute_s"] + kw.pop("extra", 0.0)
    fields.pop("extra", None)
    return StepRow(step=step, epoch=0, warmup=False, t_start=t, t_end=end, samples=8, bytes_read=80, **fields)


def _parts(entry) -> float:
    return sum(getattr(entry, p) for p in ACCOUNT_PARTS)


def test_the_parts_of_every_step_sum_to_its_span_and_the_spans_tile_the_rank():
    rows = [_row(0, 0.0), _row(1, 0.2), _row(2, 0.5, extra=0.02)]
    entries = ledger(rows)
    assert [e.start_s for e in entries] == [0.0, rows[0].t_end, rows[1].t_end]
    for e in entries:
        assert _parts(e) == pytest.approx(e.span_s)
    # the gap before step 1 (0.2 - 0.16) and step 2's own remainder are the loop's
    assert entries[1].loop == pytest.approx(0.04)
    assert entries[2].loop == pytest.approx(0.5 - rows[1].t_end + 0.02)
    t = totals(entries)
    assert t.span_s == pytest.approx(rows[-1].t_end)
    assert sum(t.split().parts().values()) == pytest.approx(1.0)


def test_a_wait_is_split_at_the_batchs_ready_stamp_by_its_stages_and_its_hand_over():
    # waited 0.1 s from t=1.0; the batch was made at t=1.06; its readers spent 3:1 in decode:fetch
    row = _row(0, 1.0, ready_s=1.06, fetch_wait_s=0.01, decode_s=0.03, augment_s=0.0, collate_s=0.0)
    e = account(row, 1.0)
    assert e.decode == pytest.approx(0.045) and e.fetch == pytest.approx(0.015)
    assert e.handover == pytest.approx(0.04)
    # a batch made before it was asked for: the whole wait is its hand-over
    early = account(
        _row(0, 1.0, ready_s=0.9, fetch_wait_s=0.01, decode_s=0.03, augment_s=0, collate_s=0), 1.0
    )
    assert early.handover == pytest.approx(0.1) and early.decode == 0.0
    # no stage times: the loader's share of the cell, else the wait is unsplit
    assert account(_row(0, 1.0), 1.0, shares=(1.0, 1.0, 0.0, 0.0)).fetch == pytest.approx(0.05)
    assert account(_row(0, 1.0), 1.0).unsplit == pytest.approx(0.1)


def test_an_epochs_opening_is_its_own_part_of_the_wait():
    e = account(_row(0, 0.0, wait_s=0.3, open_s=0.2), 0.0)
    assert e.loader_start == pytest.approx(0.2) and e.unsplit == pytest.approx(0.1)
    assert e.wait == pytest.approx(0.3)


def test_the_device_busy_and_the_trainers_host_beyond_it():
    # an emulated trainer whose host work (50 ms) outlasts its device time (20 ms)
    e = account(_row(0, 0.0, device_s=0.02), 0.0)
    assert e.device == pytest.approx(0.02) and e.host == pytest.approx(0.03)
    # a CUDA span longer than the step alone's is capped there; never more than the step
    capped = _row(0, 0.0, device_s=0.05)
    assert device_busy(capped, cap=0.03) == pytest.approx(0.03)
    assert device_busy(_row(0, 0.0, device_s=0.09), cap=1.0) == pytest.approx(0.05)
    entries = ledger([capped], StepAlone(0.04, 0.04, 0.03, 0.01, 5))
    assert entries[0].host == pytest.approx(0.02)


def test_clipping_keeps_each_part_where_it_ran():
    e = account(_row(0, 0.0, peer_wait_s=0.05, allreduce_s=0.01, extra=0.06), 0.0)
    # wait 0-0.1, peer 0.1-0.15, h2d 0.15-0.16, compute 0.16-0.21, all-reduce 0.21-0.22
    late = clipped(e, 0.12, 1.0)
    assert (late.unsplit, late.peer_wait, late.h2d) == pytest.approx((0.0, 0.03, 0.01))
    assert late.device + late.host == pytest.approx(0.05)
    assert _parts(late) == pytest.approx(late.span_s)
    early = clipped(e, 0.0, 0.18)  # ends before the step does: its batch does not count here
    assert early.samples == 0 and not early.delivered
    assert _parts(early) == pytest.approx(0.18)
    assert clipped(e, 5.0, 6.0) is None


def test_totals_over_a_longer_span_name_the_uncovered_time_as_the_loop():
    entries = ledger([_row(0, 0.0)])
    t = totals(entries, span_s=1.0)
    assert t.span_s == 1.0 and t["loop"] == pytest.approx(1.0 - 0.16)
    assert sum(t.split().parts().values()) == pytest.approx(1.0)
