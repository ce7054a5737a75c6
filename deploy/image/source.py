"""The part of the source tree that goes into the image, and its fingerprint.

The files are what git would commit (tracked, plus untracked files that .gitignore does not
exclude) among pyproject.toml, README.md and the packages setuptools installs; nothing built
(byte-code, egg-info) and nothing private to a checkout (.venv, .cache) can slip in.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tomllib
from pathlib import Path

from deploy.image.errors import ImageBuildError

TOP_FILES = ("pyproject.toml", "README.md")


def packages(repo: Path) -> list[str]:
    """The top-level packages setuptools installs ([tool.setuptools.packages.find].include)."""
    config = tomllib.loads((repo / "pyproject.toml").read_text())
    patterns: list[str] = config["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted({p.rstrip("*").rstrip(".") for p in patterns})


def files(repo: Path) -> list[str]:
    """The paths (relative to `repo`, sorted) that make up the image's gitfleet."""
    cmd = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--"]
    done = subprocess.run([*cmd, *TOP_FILES, *packages(repo)], cwd=repo, capture_output=True)
    if done.returncode != 0:
        raise ImageBuildError(
            f"cannot list the source tree with git in {repo}: {done.stderr.decode().strip()}"
        )
    listed = {p for p in done.stdout.decode().split("\0") if p}
    return sorted(p for p in listed if (repo / p).is_file())


def fingerprint(repo: Path, paths: list[str]) -> str:
    digest = hashlib.sha256()
    for rel in paths:
        digest.update(rel.encode() + b"\0" + hashlib.sha256((repo / rel).read_bytes()).digest())
    return digest.hexdigest()


def copy(repo: Path, paths: list[str], dest: Path) -> None:
    for rel in paths:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(repo / rel, dest / rel)


def source_date_epoch(repo: Path) -> int:
    """SOURCE_DATE_EPOCH: the time of the last commit that touched the image's sources (0 when
    git has no history for them)."""
    cmd = ["git", "log", "-1", "--format=%ct", "--", *TOP_FILES, *packages(repo)]
    done = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
    return int(done.stdout.strip() or 0)
