"""iobench's DCP writer and reader on a local store: what is saved comes back bit for bit whichever
way it was written, a save commits only whole, a damaged checkpoint names its file and shard."""

from __future__ import annotations

import os
import warnings

import pytest
import torch
import torch.distributed.checkpoint as dcp
from hypothesis import given, settings
from hypothesis import strategies as st

from iobench.checkpoint.aligned import byte_view
from iobench.checkpoint.errors import CheckpointCorrupt, CheckpointError, CheckpointMissing
from iobench.checkpoint.localstore import LocalStore
from iobench.checkpoint.reader import DcpStoreReader
from iobench.checkpoint.state import empty_like_state
from iobench.checkpoint.writer import DEFAULT_IO, DcpStoreWriter, IoOptions

warnings.filterwarnings("ignore", message=".*single process.*")
DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.uint8, torch.float16]


def _save(store, state, cid, options=DEFAULT_IO):
    dcp.save(state, storage_writer=DcpStoreWriter(store, options), checkpoint_id=cid, no_dist=True)


def _load(store, like, cid, options=DEFAULT_IO):
    out = empty_like_state(like)
    dcp.load(out, storage_reader=DcpStoreReader(store, options), checkpoint_id=cid, no_dist=True)
    return out


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(byte_view(a), byte_view(b))
    return a == b


@settings(max_examples=25, deadline=None)
@given(
    shapes=st.lists(st.lists(st.integers(0, 700), min_size=0, max_size=2), min_size=1, max_size=5),
    dtypes=st.lists(st.sampled_from(DTYPES), min_size=5, max_size=5),
    direct=st.booleans(),
    chunk=st.sampled_from([4096, 8192, 1 << 20]),
    parts=st.integers(1, 3),
    checksum=st.booleans(),
)
def test_what_is_saved_comes_back_bit_for_bit(
    tmp_path_factory, shapes, dtypes, direct, chunk, parts, checksum
):
    """Any mix of tensor shapes (empty and 0-d included), dtypes, request sizes and parts, written
    buffered or O_DIRECT, reads back equal, with non-tensor values beside them."""
    root = tmp_path_factory.mktemp("ckpt")
    gen = torch.Generator().manual_seed(len(shapes))
    state = {
        f"t{i}": torch.randint(0, 255, shape, dtype=torch.uint8, generator=gen).to(dtypes[i])
        for i, shape in enumerate(shapes)
    }
    state["extra"] = {"step": 12, "name": "run"}
    opts = IoOptions(depth=3, chunk_bytes=chunk, checksum=checksum, parts_per_rank=parts)
    store = LocalStore(root, direct=direct)
    _save(store, state, "a", opts)
    assert _same(_load(LocalStore(root, direct=not direct), state, "a", opts), state)


def test_a_failed_save_commits_nothing_and_the_previous_stays_loadable(tmp_path):
    state = {"w": torch.arange(100_000, dtype=torch.float32)}
    store = LocalStore(tmp_path)
    _save(store, state, "step-1")

    class Broken(LocalStore):
        def open_part(self, checkpoint_id, name):
            part = super().open_part(checkpoint_id, name)
            part.pwrite = lambda data, offset: (_ for _ in ()).throw(OSError(5, "I/O error"))
            return part

    with pytest.raises(BaseException):  # noqa: B017 (DCP raises its CheckpointException, a BaseException)
        _save(Broken(tmp_path), state, "step-2")
    assert sorted(os.listdir(tmp_path)) == ["step-1"]  # no step-2, no step-2.partial
    with pytest.raises(CheckpointMissing, match="no committed checkpoint"):
        DcpStoreReader(store).reset("step-2") or DcpStoreReader(store).read_metadata()
    assert _same(_load(store, state, "step-1"), state)


def test_a_committed_checkpoint_is_never_overwritten(tmp_path):
    store = LocalStore(tmp_path)
    _save(store, {"w": torch.ones(10)}, "a")
    with pytest.raises(BaseException, match="is never overwritten"):
        _save(store, {"w": torch.zeros(10)}, "a")


def test_a_truncated_part_names_the_file_and_the_shard(tmp_path):
    state = {"layer.0": torch.ones(50_000), "layer.1": torch.ones(50_000)}
    _save(LocalStore(tmp_path), state, "a")
    part = tmp_path / "a" / "__0_0.distcp"
    os.truncate(part, 100_000)
    with pytest.raises(BaseException) as info:
        _load(LocalStore(tmp_path), state, "a")
    text = str(info.value)
    assert "__0_0.distcp is truncated" in text and "layer." in text


@pytest.mark.parametrize("direct", [False, True])
def test_a_flipped_byte_names_the_file_the_shard_and_the_bytes(tmp_path, direct):
    state = {"layer.0": torch.zeros(300_000)}
    _save(LocalStore(tmp_path), state, "a", IoOptions(chunk_bytes=1 << 18))
    part = tmp_path / "a" / "__0_0.distcp"
    with open(part, "r+b") as f:
        f.seek(700_000)
        f.write(b"\x01")
    with pytest.raises(BaseException) as info:
        _load(LocalStore(tmp_path, direct=direct), state, "a", IoOptions(chunk_bytes=1 << 18))
    assert "is corrupt: shard layer.0 at offsets (0,) fails its checksum in bytes 524288-786432" in str(
        info.value
    )


def test_garbage_metadata_is_named(tmp_path):
    _save(LocalStore(tmp_path), {"w": torch.ones(4)}, "a")
    (tmp_path / "a" / ".metadata").write_bytes(b"not a pickle")
    reader = DcpStoreReader(LocalStore(tmp_path))
    reader.reset("a")
    with pytest.raises(CheckpointCorrupt, match=r"a/\.metadata is not a checkpoint's metadata"):
        reader.read_metadata()


def test_errors_are_checkpoint_errors():
    assert issubclass(CheckpointCorrupt, CheckpointError) and issubclass(CheckpointMissing, CheckpointError)
