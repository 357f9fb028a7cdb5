"""What runs inside DALI's graph, and what DALI needs around it: its import, the CUDA probe, the
in-graph label parser and augmentation and the S3 environment.

The augmentation: ``decoders.image_random_crop`` (fused ROI decode with RandomResizedCrop's
parameters; ``device="mixed"`` = nvJPEG when a CUDA device is visible, else ``"cpu"`` with
``device_id=None``) -> ``resize`` to ``augment.size`` -> random horizontal flip -> uint8 NHWC
(``decode_roi=False``: ``decoders.image``, then ``random_resized_crop``). With
normalisation the flip and normalisation are fused into ``crop_mirror_normalize`` (float32).
"""

from __future__ import annotations

import os
from typing import TypedDict

from loaders.config import AugmentSpec
from loaders.pipeline.decode import IMAGENET_MEAN, IMAGENET_STD

INSTALL_HINT = "pip install 'iobench[dali]'  (or: pip install nvidia-dali-cuda130)"
LABEL_DIGITS = 9  # widest ASCII label the in-graph parser reads (fits int64 trivially)


class _Crop(TypedDict):
    """RandomResizedCrop's parameters, as both of DALI's cropping operators take them."""

    random_area: list[float]
    random_aspect_ratio: list[float]
    num_attempts: int
    seed: int


def dali_available() -> bool:
    try:
        import nvidia.dali  # noqa: F401
    except ImportError:
        return False
    return True


def import_dali():
    """The DALI module, with its PyTorch plugin; ImportError with the install hint when missing."""
    try:
        import nvidia.dali as dali
        import nvidia.dali.plugin.pytorch  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"the DALI loader needs NVIDIA DALI: {INSTALL_HINT} ({exc})") from exc
    return dali


def cuda_devices() -> int:
    """Number of CUDA devices DALI sees; 0 on a CPU-only box (a safe probe, no driver needed)."""
    from nvidia.dali import backend

    return int(backend.GetCUDADeviceCount())  # type: ignore[attr-defined]  # DALI's backend stub omits what it star-imports from backend_impl


def protocol(url: str) -> str:
    return url.split("://", 1)[0] if "://" in url else "file"


def parse_ascii_label(cls):
    """ASCII digits (``b"417"``, ``b"7\\n"``) -> int64, inside the graph: DALI's iterator needs a
    dense batch, and raw ``.cls`` bytes have different lengths. Non-digit bytes are ignored."""
    from nvidia.dali import fn, types

    padded = fn.pad(cls, axes=(0,), shape=(LABEL_DIGITS,), fill_value=0)
    value = types.Constant(0, dtype=types.INT64)
    for i in range(LABEL_DIGITS):
        c = fn.cast(padded[i], dtype=types.INT64)
        is_digit = fn.cast((c >= 48) & (c <= 57), dtype=types.INT64)
        value = value * (1 + 9 * is_digit) + (c - 48) * is_digit
    return value


def augment_graph(jpegs, spec: AugmentSpec, decode_device: str, normalize: bool, seed: int, roi: bool = True):
    """Decode + RandomResizedCrop, resize, flip (and normalise) of a batch of encoded JPEGs.
    ``roi=False``: the whole images decoded, then cropped and resized (the comparison that
    ``decode_roi: false`` asks for)."""
    from nvidia.dali import fn, types

    crop: _Crop = {
        "random_area": list(spec.scale),
        "random_aspect_ratio": list(spec.ratio),
        "num_attempts": 10,
        "seed": seed,
    }
    if roi:
        images = fn.decoders.image_random_crop(
            jpegs, device=decode_device, output_type=types.DALIImageType.RGB, **crop
        )
        images = fn.resize(
            images, resize_x=spec.size, resize_y=spec.size, interp_type=types.DALIInterpType.INTERP_LINEAR
        )
    else:
        images = fn.decoders.image(jpegs, device=decode_device, output_type=types.DALIImageType.RGB)
        images = fn.random_resized_crop(
            images, size=[spec.size, spec.size], interp_type=types.DALIInterpType.INTERP_LINEAR, **crop
        )
    flip = fn.random.coin_flip(seed=seed + 1) if spec.flip else 0
    if normalize:
        return fn.crop_mirror_normalize(
            images,
            dtype=types.DALIDataType.FLOAT,
            output_layout="HWC",
            mean=[255.0 * m for m in IMAGENET_MEAN],
            std=[255.0 * s for s in IMAGENET_STD],
            mirror=flip,
        )
    return fn.flip(images, horizontal=flip) if spec.flip else images


def export_s3_env(storage_options: dict) -> None:
    """DALI's S3 reader takes its endpoint and credentials from the AWS_* environment only."""
    client = storage_options.get("client_kwargs") or {}
    pairs = {
        "AWS_ENDPOINT_URL": storage_options.get("endpoint_url") or client.get("endpoint_url"),
        "AWS_ACCESS_KEY_ID": storage_options.get("key") or storage_options.get("aws_access_key_id"),
        "AWS_SECRET_ACCESS_KEY": storage_options.get("secret")
        or storage_options.get("aws_secret_access_key"),
        "AWS_REGION": client.get("region_name") or storage_options.get("region_name"),
    }
    for name, value in pairs.items():
        if value and not os.environ.get(name):
            os.environ[name] = str(value)
