"""``ctxbudget inspect``: a read-only local web page of every logged assembly's decisions.

Sessions by user, each session's timeline of assemblies (tokens by tier against the budget,
prune reasons, budget use over the conversation), one assembly's items (included or pruned,
with the reason), and one message's fate across the calls; each page also as JSON
(``?format=json``). Served by the standard library on 127.0.0.1 only, GET and HEAD only, for
this server's own origin only, without any script (docs/inspect.md).

`serve` runs it inside an application, on the application's own memory (the way to inspect an
embedded folder the application holds); `open_reader` opens a store only to look at it.
"""

from __future__ import annotations

from ctxbudget.inspect.data import open_reader
from ctxbudget.inspect.server import InspectServer, serve

__all__ = ["InspectServer", "open_reader", "serve"]
