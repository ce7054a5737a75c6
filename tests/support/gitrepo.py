"""A small git repository for tests, driven in-process through dulwich.

Tests describe a change as `{path: content}` (None deletes the file) and get the new commit sha
back, so a test reads like the history it needs: commit, tag, branch, move a directory.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

from dulwich import porcelain
from dulwich.object_store import tree_lookup_path
from dulwich.objects import Commit
from dulwich.repo import Repo

AUTHOR = b"gitfleet tests <tests@gitfleet.invalid>"
Content = str | bytes | None


class GitRepo:
    """A non-bare repository with a work tree, on branch `main`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, path: Path) -> GitRepo:
        path.mkdir(parents=True, exist_ok=True)
        Repo.init(str(path), default_branch=b"main").close()
        return cls(path)

    @property
    def url(self) -> str:
        return self.path.resolve().as_uri()

    def commit(self, files: Mapping[str, Content], message: str = "change") -> str:
        """Write (or delete, for None) each file, stage them all and commit; return the sha."""
        for name, content in files.items():
            self._write(name, content)
        with Repo(str(self.path)) as repo:
            worktree = repo.get_worktree()
            worktree.stage(sorted(files))
            sha = worktree.commit(message=message.encode(), author=AUTHOR, committer=AUTHOR)
        return sha.decode()

    def tag(self, name: str, *, annotated: bool = False, revision: str = "HEAD") -> None:
        with Repo(str(self.path)) as repo:
            porcelain.tag_create(
                repo,
                name,
                author=AUTHOR,
                message=f"tag {name}",
                annotated=annotated,
                objectish=revision,
            )

    def branch(self, name: str, *, revision: str = "HEAD") -> None:
        with Repo(str(self.path)) as repo:
            porcelain.branch_create(repo, name, objectish=revision)

    def rename(self, old_dir: str, new_dir: str, message: str = "") -> str:
        """Move every file under `old_dir` to `new_dir` in one commit; return the sha."""
        old_root = self.path / old_dir
        changes: dict[str, Content] = {}
        for file in sorted(p for p in old_root.rglob("*") if p.is_file()):
            relative = file.relative_to(old_root).as_posix()
            changes[f"{old_dir}/{relative}"] = None
            changes[f"{new_dir}/{relative}"] = file.read_bytes()
        return self.commit(changes, message or f"move {old_dir} to {new_dir}")

    def head(self) -> str:
        with Repo(str(self.path)) as repo:
            return repo.head().decode()

    def tree_id(self, path: str) -> str:
        """The id git gives the tree at `path` in HEAD (`git rev-parse HEAD:<path>`)."""
        with Repo(str(self.path)) as repo:
            commit = repo[repo.head()]
            assert isinstance(commit, Commit)
            _, sha = tree_lookup_path(repo.__getitem__, commit.tree, path.encode())
            return sha.decode()

    def _write(self, name: str, content: Content) -> None:
        target = self.path / name
        if content is None:
            if target.is_dir():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode() if isinstance(content, str) else content
        target.write_bytes(data)
