"""The states a checkpoint cell saves: MLPerf Storage's checkpointing models (their checkpoint's
bytes and the process count its rules run them at), or a size given in the sweep file, scaled to
what this host can hold (and said so)."""

from __future__ import annotations

from dataclasses import dataclass

from iobench.host.units import format_bytes

MLPERF_SOURCE = "MLPerf Storage v2.0/v3.0 checkpointing workload (DLIO configs and published results)"


@dataclass(frozen=True)
class NamedState:
    name: str
    parameters: float
    checkpoint_bytes: int  # model and optimizer state, every rank's together
    ranks: int  # the processes MLPerf Storage's rules write it with
    source: str = MLPERF_SOURCE


MODELS = {
    m.name: m
    for m in (
        NamedState("llama3-8b", 8.03e9, 105_000_000_000, 8),
        NamedState("llama3-70b", 70.6e9, 912_000_000_000, 64),
        NamedState("llama3-405b", 406e9, 5_290_000_000_000, 512),
        NamedState("llama3-1t", 1.0e12, 15_400_000_000_000, 1024),
    )
}

# what a save may take of this host's usable memory: the state itself and, for an asynchronous save,
# its staged copy must fit beside the loader and the trainer
HOST_SHARE = 0.25


@dataclass(frozen=True)
class StateSize:
    """The bytes a cell saves per checkpoint (every rank's), and how they were chosen."""

    bytes: int
    full_bytes: int  # the named model's whole checkpoint, or the size given
    said: str  # "llama3-8b at 1/200 of its 105 GB (this host's memory)", for reports

    @property
    def scale(self) -> float:
        return self.bytes / self.full_bytes if self.full_bytes else 1.0


def state_size(model: str | None, size: int | None, memory_bytes: int, copies: int = 2) -> StateSize:
    """The state a cell saves: ``size`` bytes, or the named ``model``'s checkpoint, either cut to
    ``HOST_SHARE`` of ``memory_bytes`` over the ``copies`` of it a save holds at once."""
    if model is not None:
        full = MODELS[model].checkpoint_bytes
        label = f"{model} ({format_bytes(full)} per checkpoint, {MODELS[model].source})"
    elif size is not None:
        full, label = size, format_bytes(size)
    else:
        raise ValueError("a checkpoint state needs a model or a size")
    cap = int(memory_bytes * HOST_SHARE / copies)
    if full <= cap:
        return StateSize(full, full, label)
    return StateSize(
        cap,
        full,
        f"{label} scaled to {format_bytes(cap)} ({cap / full:.2%}), what this host can hold "
        f"({HOST_SHARE:.0%} of {format_bytes(memory_bytes)} for {copies} copies)",
    )
