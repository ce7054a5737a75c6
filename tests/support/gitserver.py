"""The git smart-HTTP server tests use is the product's own (`deploy.gitserver`)."""

from deploy.gitserver import GitHttpServer

__all__ = ["GitHttpServer"]
