"""The image's layer archives depend on their content only, and its Debian sources on Debian's.

Pure parts of `deploy.image`; the build itself is proven in tests/integration/deploy/test_image.py.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

from deploy.image import debian
from deploy.image.errors import ImageBuildError
from deploy.image.layers import snapshot, with_ancestors, write_layer

EPOCH = 1_700_000_000


def make_tree(root: Path, *, order: list[str], mtime: int) -> None:
    for name in order:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"content of {name}\n")
        os.utime(path, (mtime, mtime))
    (root / "usr/bin/python3").symlink_to("python3.11")


def test_the_same_content_gives_the_same_bytes(tmp_path: Path) -> None:
    names = ["usr/bin/python3.11", "etc/passwd", "usr/lib/a.py", "usr/lib/b.py"]
    make_tree(tmp_path / "one", order=names, mtime=1)
    make_tree(tmp_path / "two", order=list(reversed(names)), mtime=2_000_000_000)
    for tree in ("one", "two"):
        root = tmp_path / tree
        write_layer(root, snapshot(root), tmp_path / f"{tree}.tar", mtime=EPOCH)
    assert (tmp_path / "one.tar").read_bytes() == (tmp_path / "two.tar").read_bytes()
    with tarfile.open(tmp_path / "one.tar") as tar:
        members = tar.getmembers()
    assert {m.mtime for m in members} == {EPOCH}
    assert {(m.uname, m.gname) for m in members} == {("", "")}


def test_a_layer_holds_every_ancestor_before_what_it_holds(tmp_path: Path) -> None:
    (tmp_path / "usr/local/bin").mkdir(parents=True)
    (tmp_path / "usr/local/bin/gitfleet").write_text("#!/usr/bin/python3\n")
    write_layer(tmp_path, ["usr/local/bin/gitfleet"], tmp_path / "layer.tar", mtime=EPOCH)
    with tarfile.open(tmp_path / "layer.tar") as tar:
        names = tar.getnames()
    assert names == ["usr", "usr/local", "usr/local/bin", "usr/local/bin/gitfleet"]


def test_folders_sort_before_their_siblings_with_longer_names() -> None:
    assert with_ancestors(["a-b/x", "a/y"]) == ["a", "a/y", "a-b", "a-b/x"]


def test_hard_links_stay_links(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin/python3.11").write_text("elf")
    os.link(tmp_path / "bin/python3.11", tmp_path / "bin/python3")
    write_layer(tmp_path, snapshot(tmp_path), tmp_path / "layer.tar", mtime=EPOCH)
    with tarfile.open(tmp_path / "layer.tar") as tar:
        link = tar.getmember("bin/python3.11")
    assert link.islnk() and link.linkname == "bin/python3"


def test_only_debian_archives_reach_the_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d/debian.sources").write_text(
        "Types: deb\n# a comment\nURIs: http://deb.debian.org/debian\nSuites: bookworm\n"
        "Components: main\n\nTypes: deb\nURIs: https://deb.nodesource.com/node_20.x\n"
        "Suites: nodistro\nComponents: main\n"
    )
    (tmp_path / "sources.list.d/vendor.list").write_text("deb https://vendor.example/apt x main\n")
    monkeypatch.setattr(debian, "SOURCES", (tmp_path / "none.list", tmp_path / "sources.list.d"))
    sources = debian.debian_sources()
    assert "deb.debian.org" in sources and "# a comment" not in sources
    assert "nodesource" not in sources and "vendor.example" not in sources


def test_no_debian_archive_is_an_error_naming_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "d").mkdir()
    monkeypatch.setattr(debian, "SOURCES", (tmp_path / "none.list", tmp_path / "d"))
    with pytest.raises(ImageBuildError, match=r"sources\.list"):
        debian.debian_sources()
