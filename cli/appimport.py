"""`gitfleet app import -f FILE`: onboard many apps at once, through POST /api/v1/apps/batch.

FILE (or '-' for standard input) holds app bodies, each what POST /api/v1/apps takes (`name`,
`project`, `source`, `destination`, `syncPolicy`, `dependsOn`, ...): in YAML, one per document
of a multi-document stream or lists of them; in JSON, one object, an array, or the batch
endpoint's own `{"apps": [...]}`. They are sent in the file's order, in batches of at most
`MAX_BATCH` apps and `BATCH_BYTES` of JSON; each batch is created whole or not at all, so an
app may depend on apps earlier in the file. A batch the registry asks to retry (concurrent
writes) is retried. The first refused batch stops the import (exit code 2): the error names
the app (`apps.N`, its 0-based index in that batch) and says how many apps the batches before
it created; those stay. A batch that got no answer may or may not have been created.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from api.appschemas import MAX_BATCH
from api.client import ClientError, Unreachable
from cli.options import client_of
from cli.output import print_json

BATCH_PATH = "/api/v1/apps/batch"
BATCH_BYTES = 512 * 1024  # half the API's default body limit (GITFLEET_BODY_LIMIT, 1 MiB)


def app_bodies(path: str) -> list[dict[str, Any]]:
    """Every app body in the file at `path`, in order, each one JSON can carry (ClientError
    naming the document and the app's place in the file)."""
    try:
        raw = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
        text = raw.decode()
    except OSError as e:
        raise ClientError(f"-f {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise ClientError(f"-f {path}: not UTF-8 text") from None
    bodies: list[dict[str, Any]] = []
    for number, document in enumerate(_documents(path, text), start=1):
        if document is None:
            continue  # an empty document, as after a trailing '---'
        if isinstance(document, dict) and list(document) == ["apps"]:
            document = document["apps"]  # the batch endpoint's own body
        for item in document if isinstance(document, list) else [document]:
            where = f"-f {path}: document {number}, app {len(bodies) + 1} of the file"
            if not isinstance(item, dict):
                raise ClientError(f"{where}: not an app body (a mapping with name, source, ...)")
            try:
                wire_size(item)
            except (TypeError, ValueError) as e:
                raise ClientError(
                    f"{where}: a value JSON cannot carry ({e}); quote dates and times"
                ) from None
            bodies.append(item)
    if not bodies:
        raise ClientError(f"-f {path}: no app in the file")
    return bodies


def _documents(path: str, text: str) -> list[Any]:
    """The file's documents: JSON as JSON (tabs and all), anything else as a YAML stream. A
    syntax error names only its line and column, never the text there (a password)."""
    try:
        return [json.loads(text)]
    except ValueError:
        pass
    try:
        return list(yaml.safe_load_all(text))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ClientError(f"-f {path}: not YAML or JSON{where}") from None


def wire_size(body: dict[str, Any]) -> int:
    """Bytes of `body` as the request sends it: strict JSON (no NaN), UTF-8. TypeError or
    ValueError when JSON cannot carry a value of it."""
    return len(json.dumps(body, ensure_ascii=False, allow_nan=False).encode())


def batches(bodies: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """`bodies` in order, cut into batches of at most MAX_BATCH apps and BATCH_BYTES of JSON."""
    cut: list[list[dict[str, Any]]] = [[]]
    size = 0
    for body in bodies:
        length = wire_size(body)
        if cut[-1] and (len(cut[-1]) == MAX_BATCH or size + length > BATCH_BYTES):
            cut.append([])
            size = 0
        cut[-1].append(body)
        size += length
    return cut


def run_import(args: argparse.Namespace) -> int:
    bodies, client = app_bodies(args.file), client_of(args)
    created: list[str] = []
    for batch in batches(bodies):
        span = f"apps {len(created) + 1}-{len(created) + len(batch)} of the file"
        done = f"{len(created)} app(s) created before it" if created else "none created before it"
        try:  # `bulk` retries what the coordinator says a retry can cure
            [answer] = client.bulk([("POST", BATCH_PATH, {"apps": batch})], concurrency=1)
        except Unreachable as e:
            raise ClientError(
                f"no answer for the batch of {span}, which may or may not have been created "
                f"({done}; `gitfleet app list` shows which): {e}"
            ) from None
        except ClientError as e:
            raise ClientError(
                f"the batch of {span} was refused, none of it created ({done}): {e}"
            ) from None
        created += answer["created"]
        if args.output != "json":
            print(f"{len(created)}/{len(bodies)} apps created")
    if args.output == "json":
        print_json({"created": created})
    return 0


def add_verb(verbs: Any, common: argparse.ArgumentParser) -> None:
    """Add `import` to the `gitfleet app` verbs (`cli.apps.register`)."""
    parser: argparse.ArgumentParser = verbs.add_parser(
        "import",
        parents=[common],
        help=f"create apps from a file, in batches of up to {MAX_BATCH} apps (and 512 KiB), each "
        "batch whole or not at all; earlier batches stay",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-f",
        "--file",
        required=True,
        help="app bodies as POST /api/v1/apps takes them (name, source, destination, ...): "
        "YAML documents or lists, or JSON ('-': stdin)",
    )
    parser.set_defaults(run=run_import)
