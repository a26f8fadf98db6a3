"""``python -m torchfits.cli``."""
import sys

from .main import main

sys.exit(main())
