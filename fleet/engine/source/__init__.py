"""Stage 1, source: git remotes cached as bare repositories, read without a checkout.

- `cache`: fetch a remote, resolve a revision, read files and trees at a path.
- `gitobjects`: the bounded cache of parsed trees and commits every read shares.
"""
