"""`fleet.engine`'s pure stages: plan, diff, health, prune planning, render."""
