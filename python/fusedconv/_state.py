"""The one loaded library of the process (ImportError at import when it cannot be loaded)."""

from . import _library

lib = _library.load()
