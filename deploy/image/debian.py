"""The image's Debian 12 root filesystem, straight from Debian's archive.

`mmdebstrap --variant=extract` unpacks only the packages we name and what they depend on,
without running their maintainer scripts: no shell, no apt, no dpkg run at all. The result is
what "distroless" images are: Python, its libraries, CA certificates, ssh (dulwich runs `ssh`
for ssh:// repositories) and tini (PID 1 that reaps the render tools' orphans). The archive is
the one this machine's apt uses (`/etc/apt/sources.list*`, Debian entries only).

What maintainer scripts would have done, `finish` does in a way that gives the same bytes
every time: a dpkg status database (so scanners see the packages), the CA bundle, the users,
the Python standard library's byte-code (hash-checked, so no timestamps), and the removal of
what ties a tree to the machine that built it (resolv.conf, hostname, device nodes, apt lists).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from deploy.image.errors import ImageBuildError

PACKAGES = ("python3", "ca-certificates", "openssh-client", "tini", "base-files", "netbase")
SUITE = "bookworm"
SOURCES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
USER = "gitfleet"
UID = 65532
NOLOGIN = "/usr/sbin/nologin"
PASSWD = f"root:x:0:0:root:/root:{NOLOGIN}\n{USER}:x:{UID}:{UID}::/home/{USER}:{NOLOGIN}\n"
GROUP = f"root:x:0:\n{USER}:x:{UID}:\n"
WRITABLE = (f"home/{USER}", "var/cache/gitfleet")  # owned by the image's user
DROPPED = (
    "etc/hostname",
    "etc/resolv.conf",
    "usr/share/man",
    "usr/share/info",
    "usr/share/lintian",
    "usr/share/locale",
    "var/cache/apt",
    "var/lib/apt/lists",
    "var/log/apt",
)


def debian_sources() -> str:
    """The deb822 stanzas (or one-line entries) of this machine's apt sources that point at a
    debian.org archive: other vendors' repositories never reach the image."""
    files = [SOURCES[0]] if SOURCES[0].exists() else []
    files += sorted(SOURCES[1].glob("*.sources")) + sorted(SOURCES[1].glob("*.list"))
    kept: list[str] = []
    for path in files:
        text = path.read_text()
        chunks = text.split("\n\n") if path.suffix == ".sources" else text.splitlines()
        for chunk in chunks:
            lines = [ln for ln in chunk.splitlines() if ln.strip() and not ln.startswith("#")]
            if lines and any("debian.org/" in ln for ln in lines):
                kept.append("\n".join(lines))
    if not kept:
        raise ImageBuildError(
            "no Debian archive in /etc/apt/sources.list*: the image's root filesystem comes "
            "from deb.debian.org (or a mirror on debian.org); add a bookworm entry"
        )
    return "\n\n".join(kept) + "\n"


def mmdebstrap_version() -> str:
    done = subprocess.run(["mmdebstrap", "--version"], capture_output=True, text=True)
    return done.stdout.strip()


def create(root: Path, *, sources: str, epoch: int, debs: Path, log: Path) -> None:
    """Extract the packages into `root` and keep their .deb files in `debs`."""
    sources_file = log.with_name("debian.sources")
    sources_file.write_text(sources)
    cmd = ["mmdebstrap", "--mode=root", "--variant=extract", "--format=directory"]
    cmd += [f"--include={','.join(PACKAGES)}", "--skip=cleanup/apt/cache"]
    cmd += [SUITE, str(root), str(sources_file)]
    env = {"PATH": os.environ["PATH"], "SOURCE_DATE_EPOCH": str(epoch), "LC_ALL": "C.UTF-8"}
    run_logged(cmd, log=log, env=env, what="mmdebstrap")
    debs.mkdir(parents=True, exist_ok=True)
    for deb in sorted((root / "var/cache/apt/archives").glob("*.deb")):
        shutil.move(deb, debs / deb.name)


def finish(root: Path, *, debs: Path, log: Path) -> None:
    """Do what the skipped maintainer scripts would have, reproducibly (see the docstring)."""
    for rel in DROPPED:
        target = root / rel
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)
    for folder in ("dev", "run", "tmp"):
        shutil.rmtree(root / folder)
        (root / folder).mkdir(mode=0o755)
    (root / "tmp").chmod(0o1777)
    write_dpkg_status(root, debs)
    write_ca_bundle(root)
    write_users(root)
    compile_python(root, ["/usr/lib/python3.11"], log=log)


def write_dpkg_status(root: Path, debs: Path) -> None:
    """/var/lib/dpkg/status listing every unpacked package, as if dpkg had installed them."""
    stanzas = []
    for deb in sorted(debs.glob("*.deb")):
        fields = subprocess.run(["dpkg-deb", "-f", str(deb)], capture_output=True, text=True)
        lines = fields.stdout.rstrip("\n").splitlines()
        stanzas.append("\n".join([lines[0], "Status: install ok installed", *lines[1:]]))
    status = root / "var/lib/dpkg/status"
    status.parent.mkdir(parents=True, exist_ok=True)
    status.write_text("\n\n".join(sorted(stanzas)) + "\n")


def write_ca_bundle(root: Path) -> None:
    """/etc/ssl/certs/ca-certificates.crt from every certificate ca-certificates ships, in
    sorted order: what its postinst (every certificate enabled) and update-ca-certificates write."""
    shared = root / "usr/share/ca-certificates"
    names = sorted(p.relative_to(shared).as_posix() for p in shared.rglob("*.crt"))
    pems = [(shared / name).read_text().rstrip("\n") + "\n" for name in names]
    (root / "etc/ssl/certs").mkdir(parents=True, exist_ok=True)
    (root / "etc/ssl/certs/ca-certificates.crt").write_text("".join(pems))


def write_users(root: Path) -> None:
    (root / "etc/passwd").write_text(PASSWD)
    (root / "etc/group").write_text(GROUP)
    (root / "root").chmod(0o700)
    for rel in WRITABLE:
        folder = root / rel
        folder.mkdir(parents=True, exist_ok=True)
        os.chown(folder, UID, UID)


def compile_python(root: Path, folders: list[str], *, log: Path) -> None:
    """Byte-compile `folders` with the image's Python; checked-hash .pyc files carry the
    source's hash instead of its modification time, so they are the same on every build."""
    cmd = ["/usr/bin/python3", "-m", "compileall", "-q", "-q", "-j", "1"]
    cmd += ["--invalidation-mode", "checked-hash", *folders]
    run_in_root(root, cmd, log=log, what="compiling Python byte-code", check=False)


PASSED = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_DEFAULT_TIMEOUT")
PROXIES = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")


def run_in_root(
    root: Path,
    cmd: list[str],
    *,
    log: Path,
    what: str,
    check: bool = True,
    extra: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run `cmd` chrooted into `root` with a clean environment (as root: a build step); only
    the package index settings and proxies of this machine's environment pass."""
    env = {name: os.environ[name] for name in PASSED + PROXIES if name in os.environ}
    env |= {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/root",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "SOURCE_DATE_EPOCH": "0",  # setuptools' wheel of gitfleet: fixed zip timestamps
    }
    env |= extra or {}
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    return run_logged([chroot, str(root), *cmd], log=log, env=env, what=what, check=check)


def run_logged(
    cmd: list[str], *, log: Path, env: dict[str, str], what: str, check: bool = True
) -> subprocess.CompletedProcess[bytes]:
    """Run `cmd`, appending its output to `log`; a failure names the step and the log."""
    with log.open("ab") as sink:
        sink.write(f"$ {' '.join(cmd)}\n".encode())
        sink.flush()
        done = subprocess.run(cmd, stdout=sink, stderr=subprocess.STDOUT, env=env)
    if check and done.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-8:]
        raise ImageBuildError(
            f"{what} failed (exit {done.returncode}); full log: {log}\n" + "\n".join(tail)
        )
    return done
