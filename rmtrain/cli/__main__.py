"""``python -m rmtrain.cli`` (and ``accelerate launch -m rmtrain.cli``): the ``rmtrain`` console script."""

import sys

from rmtrain.cli import main

sys.exit(main())
