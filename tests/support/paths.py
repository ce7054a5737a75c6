"""Where the tests find the repository and their YAML fixtures, wherever a test module sits."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = REPO_ROOT / "tests" / "data"
