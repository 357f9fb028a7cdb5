"""A training state of real tensors to checkpoint: a model's weights in bf16 and its Adam moments in
fp32 (mixed-precision training's ratio, 2 : 4 : 4 bytes per parameter), cut into layers, each rank
holding its shard. With several ranks every tensor is a DTensor sharded over a CPU device mesh, so
DCP plans it the way it plans an FSDP model's state: each rank writes its own shard once.

A real model's own state (its parameters and optimizer) goes in beside the synthetic layers, which
fill the rest of the size: a small CPU model's state is a few MB.
"""

from __future__ import annotations

from typing import Any

import torch

SHARES = (
    ("model", torch.bfloat16, 2),
    ("optim.exp_avg", torch.float32, 4),
    ("optim.exp_avg_sq", torch.float32, 4),
)
LAYER_BYTES = 64 << 20  # a rank's share of one layer, about: DCP plans one item per tensor


def synthetic_state(nbytes: int, rank: int = 0, world_size: int = 1, mesh: Any = None) -> dict[str, Any]:
    """About ``nbytes`` of state over every rank together (this rank's shard built here), filled
    with random bits (a store that compresses or dedups gets no free ride)."""
    per_rank = max(1, nbytes // world_size)
    layers = max(1, round(per_rank / LAYER_BYTES))
    weight = sum(b for _, _, b in SHARES)
    gen = torch.Generator().manual_seed(1234 + rank)
    state: dict[str, Any] = {"step": 0}
    for layer in range(layers):
        params = max(1, per_rank // layers // weight)
        for name, dtype, _ in SHARES:
            draws = params * dtype.itemsize // 2  # int16 draws viewed as the dtype's bits
            local = torch.randint(-(2**15), 2**15, (draws,), dtype=torch.int16, generator=gen).view(dtype)
            state[f"{name}.layers.{layer}"] = _sharded(local, mesh)
    return state


def _sharded(local: torch.Tensor, mesh: Any) -> Any:
    if mesh is None:
        return local
    from torch.distributed.tensor import DTensor, Shard

    return DTensor.from_local(local, mesh, [Shard(0)], run_check=False)


def state_bytes(state: Any) -> int:
    """The bytes of this rank's tensors in ``state`` (a DTensor's local shard)."""
    if isinstance(state, dict):
        return sum(state_bytes(v) for v in state.values())
    if isinstance(state, list | tuple):
        return sum(state_bytes(v) for v in state)
    local = getattr(state, "_local_tensor", state)
    return local.numel() * local.element_size() if isinstance(local, torch.Tensor) else 0


def empty_like_state(state: Any) -> Any:
    """A state of the same shape to load into (fresh memory: a restore that lands in the saved
    tensors themselves would prove nothing)."""
    if isinstance(state, dict):
        return {k: empty_like_state(v) for k, v in state.items()}
    if isinstance(state, torch.Tensor):
        return torch.zeros_like(state)
    return state
