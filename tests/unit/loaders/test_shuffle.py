"""The shuffle buffer as a node: the same order as the generator it replaced (webdataset's rule:
fill to an eighth, two reads per yield while filling, the rest shuffled once at the end), and a
node reset from a state taken anywhere goes on exactly, its generator caught up by words drawn."""

from __future__ import annotations

import random

import pytest

from loaders.pipeline.items import Items
from loaders.pipeline.shuffle import Draws, Shuffle


def _generator_order(items, size, rng):
    """The shuffle the pipeline had before its stages were nodes, as the oracle."""
    if size <= 1:
        yield from items
        return
    initial = max(1, size // 8)
    buffer, source = [], iter(items)
    for sample in source:
        buffer.append(sample)
        if len(buffer) < size:
            more = next(source, None)
            if more is not None:
                buffer.append(more)
        if len(buffer) >= initial:
            i = rng.randrange(len(buffer))
            buffer[i], buffer[-1] = buffer[-1], buffer[i]
            yield buffer.pop()
    rng.shuffle(buffer)
    yield from buffer


def _order(node) -> list:
    return [listed.item for listed in node]


@pytest.mark.parametrize("size", [0, 1, 2, 7, 16, 100])
@pytest.mark.parametrize("n", [0, 1, 5, 40, 333])
def test_the_order_is_the_generators(size, n):
    items = list(range(n))
    expected = list(_generator_order(items, size, random.Random(12345)))
    assert _order(Shuffle(Items(items), size, 12345)) == expected
    assert sorted(expected) == items


@pytest.mark.parametrize("size", [1, 16, 100])
def test_a_reset_from_any_state_goes_on_exactly(size):
    items = list(range(150))
    whole = _order(Shuffle(Items(items), size, 7))
    node = Shuffle(Items(items), size, 7)
    for taken in range(len(items) + 1):  # filling, steady, the final shuffled drain, the end
        state = node.state_dict()
        resumed = Shuffle(Items(items), size, 7)
        resumed.reset(state)
        assert _order(resumed) == whole[taken:], taken
        if taken < len(items):
            assert next(node).item == whole[taken]
    assert list(node.state_dict().get("buffer", [])) == []


def test_the_state_is_small_and_the_generator_catches_up():
    node = Shuffle(Items(range(10_000)), 64, 99)
    for _ in range(5_000):
        next(node)
    state = node.state_dict()
    assert set(state) == {"words", "drained", "width", "buffer", "source"}
    assert state["width"] == 1 and len(state["buffer"]) <= 64  # an Items ref: its place in the list
    plain, draws = random.Random(99), Draws(99)
    assert [draws.below(n) for n in range(1, 500)] + [draws.below(2**40)] == [
        plain.randrange(n) for n in range(1, 500)
    ] + [plain.randrange(2**40)]
    items, same = list(range(50)), list(range(50))
    draws.shuffle(items)
    plain.shuffle(same)
    assert items == same
    caught_up = Draws(99, draws.words)
    assert [caught_up.below(1000) for _ in range(3)] == [plain.randrange(1000) for _ in range(3)]
