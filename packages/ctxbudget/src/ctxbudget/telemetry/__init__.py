"""OpenTelemetry spans of assemblies, searches and writes (docs/observability.md).

With ``pip install 'ctxbudget[otel]'`` (the OpenTelemetry API), every assembly, memory search
and store write is a span, started in the current context so that it nests under the span of
the application or its framework; the application's SDK and exporter send it on. Without the
API, nothing is traced and nothing is imported: each call costs one check.

`configure` says what spans record (ids hashed, no content by default) and where they go (an
explicit ``TracerProvider``, or the global one). `operations` lists the spans and their
attributes; `spans` is how a call becomes one.

>>> from ctxbudget import telemetry
>>> telemetry.configure().capture_content
False
"""

from __future__ import annotations

from ctxbudget.telemetry.settings import TelemetrySettings, configure, current, hashed_id

__all__ = ["TelemetrySettings", "configure", "current", "hashed_id"]
