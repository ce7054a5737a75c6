"""Tracing shared by the library and the processes.

- `spans`: span helpers on the OpenTelemetry API only; what `fleet.engine` and `fleet.control` use.
- `sdk`: the SDK set-up (provider, exporters) that process entry points (`cli`, `worker`, `api`)
  call once. The library never imports it.
"""
