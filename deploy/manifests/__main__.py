"""`python -m deploy.manifests render [--helm PATH]`: write deploy/manifests/ from the chart."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from deploy.manifests import write_all
from deploy.testbed.build import tools_dir


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.manifests")
    parser.add_argument("command", choices=["render"])
    parser.add_argument("--helm", default=str(tools_dir() / "helm"), help="the helm binary")
    args = parser.parse_args()
    for path in write_all(Path(args.helm)):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
