"""rmcore: the foundations both matchrm libraries stand on, by capability (each folder imports only
the ones before it; docs/architecture.md, tests/test_layering.py): ``errors`` and ``lazy``, then
``io/`` (path checks, atomic writes, strict JSON, tables, the cache, Markdown), ``console/``
(progress, the libraries' output tamed), ``settings/`` (fields that carry their flags, the registry
helper behind every extension point, recipes, commands), ``data/`` (the rating-set data layer),
``models/`` (text layout, model loading and the reward forward passes: packed encoder, shared
prompt, prefix scoring, batching) and ``runtime/`` (run-directory files, jobs, W&B logging). It
imports neither ``rmeval`` nor ``rmtrain``: the package graph is ``rmcore <- rmeval <- rmtrain``."""

__version__ = "0.1.0"
