"""rmcore: the foundations both matchrm libraries stand on.

Rating-set data layer (``rmcore.data``), text layout, model loading and the reward forward passes
(packed encoder, shared prompt, prefix scoring, batching), run-directory files, io, errors,
configuration loading, tracking, Markdown formatting and the registry helper behind every
extension point (``rmcore.settings.registry``). It imports neither ``rmeval`` nor
``rmtrain``: the package graph is ``rmcore <- rmeval <- rmtrain``."""

__version__ = "0.1.0"
