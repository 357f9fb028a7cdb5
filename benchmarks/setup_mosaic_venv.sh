#!/usr/bin/env bash
# The separate environment benchmarks/mosaic_peer.py runs in: mosaicml-streaming pins numpy < 2.2 and
# requires torchvision, so it cannot live beside iobench (numpy 2.4).
#
#   bash benchmarks/setup_mosaic_venv.sh [VENV_DIR]        (default .venv-mosaic in the repository,
#                                                          where bench_loaders.py looks for it)
#
# torch==2.13.0 is named in the same install so that pip keeps the CPU wheel and picks the
# torchvision that matches it (0.28.0); without it pip takes torchvision 0.29.1, which pins
# torch==2.14.1, and replaces the CPU torch with the CUDA build (GBs of nvidia-* wheels).
# simplejpeg, opencv-python-headless and Pillow are what the repo's loaders.pipeline.decode needs; the repo
# itself is not installed there: mosaic_peer.py puts the repo root on sys.path.
set -euo pipefail
venv=${1:-"$(dirname "$0")/../.venv-mosaic"}
python3 -m venv "$venv"
"$venv/bin/pip" install torch==2.13.0 mosaicml-streaming==0.13.0 simplejpeg opencv-python-headless Pillow
"$venv/bin/pip" check
