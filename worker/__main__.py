"""`python -m worker [--name N]`: run one gitfleet worker (same as `gitfleet worker`)."""

import sys

from worker.command import main

sys.exit(main())
