"""rmeval: scorers, prompt conditions, statistics on scores tables, audit and report."""

__version__ = "0.1.0"
