"""The mean JPEG sizes the synthetic dataset can be asked for, without importing its image
libraries: a sweep file's ``dataset.synth.sample_size`` is checked against them when it is read."""

from __future__ import annotations

KIB = 1024
DEFAULT_SAMPLE_KIB = 110.0  # ImageNet train's mean JPEG
# Sensor-like noise is the generator's only size knob: from none to the strongest it calibrates
# (noise scale 0.25-120) the mean JPEG spans ~51-190 KiB (measured 2026-12-06 with Pillow 13,
# libjpeg-turbo, 128 calibration samples); these limits keep a margin inside that span, where
# calibration lands within its 2 % (56 KiB: +0.3 %, 180 KiB: -0.6 %), so other library
# versions still reach them.
MIN_SAMPLE_KIB = 56.0
MAX_SAMPLE_KIB = 180.0


def check_sample_kib(target_kb: float) -> None:
    """Raise ValueError saying what is allowed unless a mean JPEG of ``target_kb`` KiB can be made."""
    if MIN_SAMPLE_KIB <= target_kb <= MAX_SAMPLE_KIB:
        return
    raise ValueError(
        f"the synthetic dataset's mean sample can be {MIN_SAMPLE_KIB:.0f}-{MAX_SAMPLE_KIB:.0f} KiB "
        f"(about {MIN_SAMPLE_KIB * KIB / 1000:.0f}-{MAX_SAMPLE_KIB * KIB / 1000:.0f} KB; "
        f"{target_kb:.1f} KiB asked): its JPEGs keep ImageNet's resolutions and only their noise "
        "changes their size; for other sizes pack your own images (iobench dataset pack)"
    )
