"""``python -m spatialhub.utils.profiling``: the command line (no arguments: the demo)."""
import sys

from .cli import main

sys.exit(main())
