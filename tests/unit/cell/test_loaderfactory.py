"""The decoder a cell's readers use, and what its report says of it."""

from __future__ import annotations

from dataclasses import replace

from iobench.cell.steps.loaderfactory import decoder_notes, decoder_of
from iobench.results.spec import LoaderSettings
from loaders.pipeline import REGION_DECODER_MISSING, decoder_name, decoders

TORCH = LoaderSettings(kind="torch", workers=2, batch_size=64)


def test_a_cell_names_the_decoder_of_its_setting():
    assert decoder_of(TORCH) == decoder_name(True)
    assert decoder_of(replace(TORCH, decode_roi=False)) == decoder_name(False)
    assert decoder_of(replace(TORCH, decode=False)) is None  # nothing decoded
    assert decoder_of(replace(TORCH, kind="dali")) is None  # DALI decodes in its own graph
    assert decoder_notes(replace(TORCH, decode=False)) == ()
    (note,) = decoder_notes(replace(TORCH, decode_roi=False))
    assert note == f"JPEG decode: {decoder_name(False)} (decode_roi: false)"


def test_a_missing_region_decoder_is_said_with_what_to_install(monkeypatch):
    monkeypatch.setattr(decoders, "region_decoder", None)
    (note,) = decoder_notes(TORCH)
    assert "whole-image" in note and REGION_DECODER_MISSING in note
    assert "libjpeg62-turbo-dev" in note
