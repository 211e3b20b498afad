"""``python -m collsynth.solvers.cli``: the same entry point as the ``collsynth`` script."""

import sys

from . import main

sys.exit(main())
