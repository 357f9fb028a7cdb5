"""Realistic ImageNet-style WebDataset shards: synthesis, packing, manifests, DALI indexes.

Submodules import heavy libraries (cv2, PIL); import them directly, e.g.
``from iobench.datasets.synth import synthesize``.
"""

from iobench.datasets.manifest import MANIFEST_NAME, Manifest, ManifestError, ShardEntry, verify

__all__ = ["MANIFEST_NAME", "Manifest", "ManifestError", "ShardEntry", "verify"]
