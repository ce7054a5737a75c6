"""Stage 1, source: git remotes cached as bare repositories, read without a checkout.

- `cache`: fetch a remote, resolve a revision, read files and trees at a path.
- `remotes`: which repository URLs the fleet fetches, parsed, with one name per repository.
- `gitobjects`: the bounded cache of parsed trees and commits every read shares.
- `entries`: tree entries checked as git checks them (names, symlinks, submodules).
- `transfer`: receiving a pack within the fetch's size and time limits.
"""
