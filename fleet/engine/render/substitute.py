"""Post-build variable substitution: `${var}` in rendered objects, as Flux's `postBuild` does.

Opt-in per app (`RenderParams.substitute` is None when the app has no `postBuild`), so existing
manifests holding `${...}` (shell scripts in ConfigMaps) are left alone. When on, the text of
every manifest file (plain renders) or of the tool's output (kustomize, helm) is substituted
document by document before it is parsed, so quoting decides types as in Flux:
`replicas: ${n}` is a number, `"${n}"` a string. The render cache keys on the variables. The
syntax:

- `${var}`: the variable's value; a variable set nowhere and given no default is a
  `SubstitutionError` naming the variable, the object and the file it came from.
- `${var:=default}` and `${var:-default}`: the default when the variable is unset or empty.
- `$${var}`: the text `${var}`, unreplaced (the escape).
- `$var` without braces is left as it is (shell scripts keep working).

Variable names match `^[_a-zA-Z][_a-zA-Z0-9]*$`; an expression with another name (or another
operator) is left untouched rather than guessed at. A document annotated or labelled
`gitfleet.io/substitute: disabled` (or Flux's `kustomize.toolkit.fluxcd.io/substitute`) is
kept as it is. Substitution runs before SOPS decryption (`sops`), on the encrypted text: keep
`${var}` out of encrypted files, whose MAC covers every value. Helm values (`values_yaml` and
`--set` values) are substituted the same way before helm renders (`substitute_values`).

Where the variables come from (`fleet.control.policy.variables_for`): the app's parameters and
the destination cluster's `cluster_name` and `cluster_label_<key>` (the label key with every
character that cannot be in a name turned into `_`). Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from fleet.errors import RenderError

NAME = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")
# `$${...}` (escape) or `${name}` / `${name:=default}` / `${name:-default}`
_EXPRESSION = re.compile(
    r"\$\$\{(?P<escaped>[^}]*)\}"
    r"|\$\{(?P<name>[_a-zA-Z][_a-zA-Z0-9]*)(?:(?P<op>:=|:-)(?P<default>[^}]*))?\}"
)


class SubstitutionError(RenderError):
    """A `${var}` with no value and no default; names the variable and where it was used."""

    def __init__(self, variable: str, where: str) -> None:
        self.variable = variable
        self.where = where
        super().__init__(
            f"{where}: variable ${{{variable}}} is not set and has no default: add it to the "
            f"app's postBuild.substitute parameters, label the cluster, or write "
            f"${{{variable}:=default}}"
        )


def is_name(text: str) -> bool:
    return bool(NAME.match(text))


def identifier(text: str) -> str:
    """`text` as a variable name part: every character outside [_a-zA-Z0-9] becomes `_`."""
    return re.sub(r"[^_a-zA-Z0-9]", "_", text)


def cluster_variables(name: str, labels: Mapping[str, str]) -> dict[str, str]:
    """`cluster_name` and `cluster_label_<key>` for each label of the destination cluster."""
    found = {"cluster_name": name}
    for key in sorted(labels):
        found[f"cluster_label_{identifier(key)}"] = labels[key]
    return found


def substitute_text(text: str, variables: Mapping[str, str], where: str) -> str:
    """`text` with its expressions replaced; SubstitutionError for one without a value."""
    if "${" not in text:
        return text

    def replace(match: re.Match[str]) -> str:
        if match.group("escaped") is not None:
            return "${" + match.group("escaped") + "}"
        name = match.group("name")
        value = variables.get(name)
        if match.group("op") is not None and not value:
            return match.group("default")
        if value is None:
            raise SubstitutionError(name, where)
        return value

    return _EXPRESSION.sub(replace, text)


def substitute_stream(data: bytes, variables: Mapping[str, str], where: str) -> bytes:
    """A YAML stream (or JSON file) with each document's expressions replaced, before it is
    parsed, so quoting decides types as in Flux: `replicas: ${n}` is a number, `"${n}"` a
    string. A document marked `substitute: disabled` is kept as it is. Errors name `where`
    (the file, or the tool's output and the `# Source:` template helm names) and the document."""
    if b"${" not in data:
        return data
    try:
        text = data.decode()
    except UnicodeDecodeError as e:
        raise RenderError(f"{where}: not UTF-8 text, cannot substitute ${{var}}: {e}") from e
    parts = _DOCUMENT.split(text)
    out: list[str] = []
    for index, part in enumerate(parts):
        if index % 2 or "${" not in part or _DISABLED.search(part):
            out.append(part)
            continue
        source = _SOURCE.search(part)
        origin = f"{where} ({source.group(1).strip()})" if source else where
        number = index // 2 + 1
        out.append(substitute_text(part, variables, f"{origin} document {number}"))
    return "".join(out).encode()


_DOCUMENT = re.compile(r"(^---[ \t]*(?:#.*)?$)", re.MULTILINE)
_SOURCE = re.compile(r"^# Source: (.+)$", re.MULTILINE)
_DISABLED = re.compile(
    r"""(?:gitfleet\.io|kustomize\.toolkit\.fluxcd\.io)/substitute['"]?\s*:\s*['"]?disabled"""
)


def substitute_values(
    values: Sequence[tuple[str, str]], documents: Sequence[str], variables: Mapping[str, str]
) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """Helm `--set` values and values documents with their expressions replaced."""
    sets = tuple(
        (key, substitute_text(value, variables, f"helm parameter {key}")) for key, value in values
    )
    docs = tuple(substitute_text(doc, variables, "helm values") for doc in documents)
    return sets, docs
