"""recommend --ranks: each measured one-rank cell predicted at the ranks asked, its batches replayed
through that cell's own loader queue (analysis/scale.py)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from iobench.analysis.queue import LoaderQueue
from iobench.analysis.scale import predict_at_scale
from iobench.recommend.scale import at_scale
from iobench.results.schema import STEP_SCHEMA
from iobench.results.store import publish_cell
from tests.helpers.summaries import cell_spec, ok_summary, queued_steps


def test_each_cell_is_predicted_through_its_own_loader_queue(tmp_path):
    made = np.random.default_rng(2).lognormal(np.log(0.01), 1.0, 600)
    rows = queued_steps(made, LoaderQueue(2, 2))
    steps = pa.Table.from_pylist([{"cell_id": "disk-w2", **r.__dict__} for r in rows], schema=STEP_SCHEMA)
    summary = ok_summary("disk-w2", 1000.0, cell=cell_spec("disk-w2", workers=2))
    publish_cell(tmp_path, "disk-w2", {"summary.json": summary, "steps.parquet": steps})
    (found,) = at_scale([tmp_path], (8, 4096))
    expected = predict_at_scale(
        rows, lambda w, c: 0.0, queue=LoaderQueue(2, summary.cell.loader.prefetch), world_sizes=(8, 4096)
    )
    assert [p.au for p in found.points] == pytest.approx([p.au for p in expected])
    # without the queue, the same batches cost every step the slowest of W
    unqueued = predict_at_scale(rows, lambda w, c: 0.0, world_sizes=(8, 4096))
    assert all(p.au > q.au for p, q in zip(expected, unqueued, strict=True))
    assert found.points[-1].beyond_measured_tail and "upper bound" in found.sentence()
