"""Which JPEG decoder this installation's readers use, answered without importing the pipeline:
a sweep, a dry run or a calibration asks it in a process that must stay small (torch and OpenCV
add over 100 MB, which a container's memory limit may not leave beside the cells).
"""

from __future__ import annotations

from types import ModuleType

import simplejpeg

region_decoder: ModuleType | None
try:
    import loaders.pipeline._cropdecode as _cropdecode

    region_decoder = _cropdecode
except ImportError:  # not built: the system had no libjpeg-turbo headers when the package was installed
    region_decoder = None

REGION_DECODER_MISSING = (
    "decoding whole images: the loaders' region decoder was not built (it needs libjpeg-turbo's "
    "headers when the package is installed: apt-get install libjpeg62-turbo-dev, or your system's "
    "libjpeg-turbo development package, then reinstall iobench)"
)


def region_decode_available() -> bool:
    """Whether this installation has the region decoder (built against the system's libjpeg-turbo)."""
    return region_decoder is not None


def decoder_name(roi: bool = True) -> str:
    """The JPEG decoder a reader with ``decode_roi=roi`` uses on this installation, by name: what
    the report names and the decode-rate calibration is kept under."""
    if roi and region_decoder is not None:
        number = region_decoder.LIBJPEG_TURBO_VERSION_NUMBER
        version = f"{number // 1_000_000}.{number // 1000 % 1000}.{number % 1000}"
        return f"libjpeg-turbo {version} crop-region decode"
    return f"simplejpeg {simplejpeg.__version__} whole-image decode"
