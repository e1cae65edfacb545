"""aworld-train-swift: the ms-swift engine of aworld-train."""

__version__ = "0.1.0"
