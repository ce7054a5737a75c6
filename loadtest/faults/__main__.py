"""`python -m loadtest.faults --out DIR [--quick]`: see `loadtest.faults.command`."""

from loadtest.faults.command import main

raise SystemExit(main())
