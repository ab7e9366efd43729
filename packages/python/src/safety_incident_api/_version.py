"""The client's version: the package's, and the one its User-Agent names."""

__version__ = "0.1.0"
