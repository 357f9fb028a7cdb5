"""The checkpointer's three modes on a local store, and the stager's reused buffers (CPU tensors:
the GPU path, a pinned copy on a side stream, is the same code with CUDA present)."""

from __future__ import annotations

import os
import time
import warnings

import pytest
import torch

from iobench.checkpoint.aligned import ALIGN
from iobench.checkpoint.checkpointer import Checkpointer
from iobench.checkpoint.staging import HostStager
from iobench.checkpoint.state import state_bytes, synthetic_state
from iobench.checkpoint.targets import make_target
from iobench.checkpoint.timing import timed_load
from iobench.results.checkpoint import CheckpointDestination

warnings.filterwarnings("ignore", message=".*single process.*")


def _target(root, io="buffered"):
    return make_target(CheckpointDestination("t", {"kind": "local", "path": str(root)}, str(root), io=io))


@pytest.mark.parametrize("mode", ["sync", "async", "async_pinned"])
def test_every_mode_saves_every_k_steps_keeps_two_and_restores_the_last(tmp_path, mode):
    state = synthetic_state(4 << 20)
    target = _target(tmp_path, "direct")
    saver = Checkpointer(target, mode, 3, lambda: state, origin=time.perf_counter(), keep=2)
    blocked = [saver.after_step(step) for step in range(10)]
    saves = saver.close()
    assert [s.step for s in saves] == [2, 5, 8]
    assert [b > 0 for b in blocked] == [step % 3 == 2 for step in range(10)]
    assert sorted(os.listdir(tmp_path)) == ["step-00000005", "step-00000008"]
    for s in saves:
        assert s.bytes == state_bytes(state) and s.write_s > 0 and s.end_s >= s.start_s
    if mode == "sync":
        assert saver.background() == [] and all(s.blocked_s >= s.write_s for s in saves)
    else:  # the write ran beside the loop: it ends after the loop was released
        assert all(end >= start for start, end in saver.background())
    _, out = timed_load(target, state, "step-00000008", cold=False)
    assert all(
        torch.equal(out[k].view(torch.uint8), state[k].view(torch.uint8)) for k in state if k != "step"
    )


def test_the_stager_reuses_page_aligned_buffers_and_copies_exactly():
    stager = HostStager(pin=True)
    state = {
        "w": torch.randn(1000),
        "b": torch.arange(7, dtype=torch.bfloat16),
        "nested": {"m": torch.ones(3, 3)},
        "step": 4,
    }
    first = stager.stage(state)
    state["w"].add_(1.0)
    second = stager.stage(state)
    assert second["w"].data_ptr() == first["w"].data_ptr() and second["w"].data_ptr() % ALIGN == 0
    assert torch.equal(second["w"], state["w"]) and torch.equal(second["nested"]["m"], state["nested"]["m"])
    assert second["w"].data_ptr() != state["w"].data_ptr() and second["step"] == 4
    stager.close()
