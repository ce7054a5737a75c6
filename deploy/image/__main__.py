"""`python -m deploy.image build --out dist/` builds (or reuses) the image and prints its digest;
`python -m deploy.image verify --out dist/` also builds it a second time from nothing but the
inputs and fails unless both digests are equal (`make image-verify`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from deploy.image.build import Image, build_image, verify
from deploy.image.errors import ImageBuildError


def describe(image: Image) -> str:
    how = "reused" if image.reused else "built"
    return (
        f"{image.reference} {image.digest}\n"
        f"  {how} in {image.seconds:.1f}s, {image.size / 1e6:.1f} MB of blobs\n"
        f"  OCI layout: {image.layout} (tag {image.tag})\n"
        f"  docker load -i {image.archive}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.image", description=__doc__)
    parser.add_argument("command", choices=("build", "verify"))
    parser.add_argument("--out", type=Path, default=Path("dist"))
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            print(describe(build_image(args.out)), flush=True)
        else:
            image, again = verify(args.out)
            print(describe(image), flush=True)
            print(describe(again), flush=True)
            if again.digest != image.digest:
                print(f"NOT reproducible: {image.digest} != {again.digest}", file=sys.stderr)
                return 1
            print(f"reproducible: both builds give {image.digest}")
    except ImageBuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
