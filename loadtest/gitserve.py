"""`python -m loadtest.gitserve --port P --repo NAME=PATH`: `deploy.gitserver` with a request log.

The product's git server logs each request through dulwich's logger, which stays silent unless
logging is configured; the benchmark turns it on so it can count, from the log, how many ref
advertisements and fetches the workers asked for in each phase.
"""

from __future__ import annotations

import logging
import sys

from deploy import gitserver


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    return gitserver.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
