"""``python -m rmeval.cli``: the ``rmeval`` console script (the reward server's launcher uses it)."""

import sys

from rmeval.cli import main

sys.exit(main())
