"""Settings declared once: dataclass fields that carry their flags (``fields``), the registry
helper of every extension point (``registry``), recipes (``recipes``) and the commands
built from them (``commands``). No model library, no pandas: ``--help`` reads these."""
