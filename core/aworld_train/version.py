"""The version of aworld-train, which the manifest records."""

__version__ = "0.1.0"
