"""SOPS-encrypted objects decrypted at render time, with the project's age key.

A rendered object holding SOPS metadata (a top-level `sops` mapping with a `mac`) is decrypted
after the render cache (`fleet.engine.render.cache`): the cache, in memory and on disk, keeps
the encrypted form as git holds it, and the plaintext lives only in the sync's memory, on its
way to the cluster. The `sops` binary (built from pinned Go modules with the testbed's tools,
found like helm: `fleet.engine.render.tools.find_tool`) decrypts one object at a time, run as
every render tool is (`tools.run_tool`): off the network (the metadata of a file from git could
name a Vault or KMS address), bounded in time and memory, without core dumps. The object goes
in on stdin as JSON (from an unlinked temporary file), the age private key in the SOPS_AGE_KEY
variable of the child alone, never in a file; its environment is otherwise the render
allow-list and a HOME that holds nothing, so no key file of the worker's is found.

Only a `v1` Secret may be encrypted: diffs show Secret values masked
(`fleet.engine.diff.compare`), and no other kind's would be. An encrypted object of another
kind, one found when the project has no key, or one the key cannot decrypt is a RenderError
naming the object and its file, never a value. Errors of sops are cut to one line, with the
key scrubbed should it ever be echoed.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fleet.engine.limits import Limits
from fleet.engine.render.tools import child_environment, find_tool, run_tool
from fleet.errors import RenderError
from fleet.model import Manifest

KEY_PREFIX = "AGE-SECRET-KEY-1"


def is_encrypted(obj: Manifest) -> bool:
    """Whether `obj` carries SOPS metadata (and so encrypted values)."""
    meta = obj.get("sops")
    return isinstance(meta, dict) and "mac" in meta


def check_age_key(text: str) -> str:
    """`text` stripped, when it holds age private keys (one per line, comments allowed)."""
    lines = [line.strip() for line in text.strip().splitlines()]
    keys = [line for line in lines if line and not line.startswith("#")]
    if not keys or not all(k.startswith(KEY_PREFIX) for k in keys):
        raise ValueError(f"not an age private key: expected lines starting with {KEY_PREFIX}")
    return "\n".join(keys)


def decrypt_objects(
    objects: Sequence[Manifest], origins: Sequence[str], age_key: str, limits: Limits
) -> list[Manifest]:
    """`objects` with each encrypted one decrypted (and its `sops` metadata gone)."""
    if not any(is_encrypted(obj) for obj in objects):
        return list(objects)
    return [
        _decrypt(obj, f"{origin}: {_label(obj)}", age_key, limits) if is_encrypted(obj) else obj
        for obj, origin in zip(objects, origins, strict=True)
    ]


def _decrypt(obj: Manifest, where: str, age_key: str, limits: Limits) -> Manifest:
    if obj.get("apiVersion") != "v1" or obj.get("kind") != "Secret":
        raise RenderError(
            f"{where} is SOPS-encrypted, but only v1 Secrets may be (their values are masked in "
            "diffs, other kinds' are not): make it a Secret"
        )
    if not age_key:
        raise RenderError(
            f"{where} is SOPS-encrypted, but the app's project has no age key: store one with "
            "`gitfleet project age-key set PROJECT --key-file FILE`"
        )
    argv = [str(find_tool("sops")), "--decrypt", "--input-type", "json", "--output-type", "json"]
    with (
        tempfile.TemporaryDirectory(prefix="gitfleet-sops-") as home,
        tempfile.TemporaryFile() as encrypted,  # unlinked: no name on disk
    ):
        encrypted.write(json.dumps(obj).encode())
        encrypted.seek(0)
        env = {**child_environment(Path(home)), "SOPS_AGE_KEY": age_key}
        try:
            output = run_tool(
                [*argv, "/dev/stdin"],
                cwd=Path(home),
                what="sops",
                limits=limits,
                env=env,
                stdin=encrypted,
            )
        except RenderError as e:
            problem = _problem(str(e).encode(), age_key)
            raise RenderError(f"{where}: sops cannot decrypt it: {problem}") from None
    try:
        decrypted: Any = json.loads(output)
    except ValueError:
        raise RenderError(f"{where}: sops wrote something that is not JSON") from None
    if not isinstance(decrypted, dict):
        raise RenderError(f"{where}: sops wrote something that is not an object")
    decrypted.pop("sops", None)
    return decrypted


def _problem(stderr: bytes, age_key: str) -> str:
    """What sops said, on one line: its first line, and whether the key was the wrong one."""
    text = stderr.decode(errors="replace").removeprefix("sops failed: ")
    for key in age_key.splitlines():
        text = text.replace(key, "AGE-SECRET-KEY-(hidden)")
    lines = [line.strip(" |-\t") for line in text.strip().splitlines()]
    lines = [line for line in lines if line]
    first = lines[0] if lines else "no message"
    if "identity did not match" in text:
        first += " (the project's age key is not one of the file's age recipients)"
    return first[:500]


def _label(obj: Manifest) -> str:
    metadata = obj.get("metadata")
    name = metadata.get("name", "") if isinstance(metadata, dict) else ""
    namespace = metadata.get("namespace", "") if isinstance(metadata, dict) else ""
    return f"{obj.get('kind', '?')} {namespace + '/' if namespace else ''}{name}"
