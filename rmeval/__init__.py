"""rmeval: scorers, prompt conditions, statistics on scores tables, audit and report, grouped by
capability (README, Architecture): ``backends``, ``stats``, ``perturbations``, ``scoring``,
``judges``, ``suitability``, ``experiments``, ``audit``, ``cli``; ``tables``, ``conditions`` and
``tracking`` are shared by them."""

__version__ = "0.1.0"
