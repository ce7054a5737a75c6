"""`{{param}}` in an app set's template: the parameter syntax, rendering, and its errors.

A parameter is `{{ name }}` (spaces optional) anywhere inside a string of the template, in
values and in map keys (labels, helm parameters). Names are letters, digits, `_`, `-`, `.` and
`[N]`: `{{name}}`, `{{labels.region}}`, `{{path.basename}}`, `{{path[1]}}`. Only strings are
rendered; numbers and booleans are taken as written. A parameter the generator does not give is
a `TemplateError` naming it and the field it is in. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from fleet.errors import UsageError

PARAMETER = re.compile(r"\{\{\s*([A-Za-z0-9_.\[\]-]+)\s*\}\}")


class TemplateError(UsageError):
    """A template names a parameter its generator does not give, or renders an invalid app."""


def render(template: Any, params: Mapping[str, str], *, where: str = "template") -> Any:
    """`template` with every `{{param}}` replaced by its value in `params`."""
    return walk(template, lambda text, at: substitute(text, params, at), where)


def substitute(text: str, params: Mapping[str, str], where: str) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in params:
            known = ", ".join(sorted(params)) or "none"
            raise TemplateError(f"{where}: unknown parameter {{{{{name}}}}} (known: {known})")
        return params[name]

    return PARAMETER.sub(value, text)


def walk(data: Any, change: Callable[[str, str], str], where: str) -> Any:
    """`data` with `change(text, where)` applied to every string, map keys included."""
    if isinstance(data, str):
        return change(data, where)
    if isinstance(data, Mapping):
        return {
            change(str(k), f"{where}.{k}"): walk(v, change, f"{where}.{k}") for k, v in data.items()
        }
    if isinstance(data, list | tuple):
        return [walk(v, change, f"{where}[{i}]") for i, v in enumerate(data)]
    return data
