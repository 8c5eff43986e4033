"""Files: path checks, atomic writes and strict JSON (``files``, no pandas), tables (``tables``),
the content-addressed cache (``cache``) and the Markdown of reports (``markdown``)."""
