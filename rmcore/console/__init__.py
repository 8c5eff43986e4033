"""What a person sees: progress lines (``progress``), the libraries' output tamed (``quiet``,
light) and the Trainer's progress bar and quiet model loading (``training``)."""
