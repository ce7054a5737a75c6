"""The render stage's pure parts: post-build substitution."""
