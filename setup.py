"""The loaders' region decoder, a C extension built against the system's libjpeg-turbo (Debian:
libjpeg62-turbo-dev). Optional: where it does not build, the package installs without it and the
loaders decode whole images (loaders/pipeline/cropdecode.py). Everything else is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "loaders.pipeline._cropdecode",
            sources=["loaders/pipeline/_cropdecode.c"],
            libraries=["jpeg"],
            optional=True,
        )
    ]
)
