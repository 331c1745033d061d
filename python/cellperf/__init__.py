"""cellperf: measure, emulate and explain cellular data links.

The command line (`cellperf --help`) and this Python API share one implementation:
per-packet work is done by the compiled core (`cellperf._native`); Python gets Arrow
tables that polars, pandas and DuckDB read without copies.
"""

from cellperf._native import __version__

__all__ = ["__version__"]
