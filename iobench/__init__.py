"""iobench: where does the input pipeline starve the accelerators?"""

__version__ = "0.1.0"
