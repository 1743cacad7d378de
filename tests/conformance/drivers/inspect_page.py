"""The door ``ctxbudget inspect``: the inspector's pages, read over HTTP as a browser reads them.

The page is served by `ctxbudget.inspect.serve` on the door's own `ContextMemory` (the way an
application serves it on an embedded folder it holds), with the product's defaults and
``InclusionLogConfig(keep_context=True)`` so the page can show the context as sent. ``add``
stores turns through that memory; ``send`` makes one logged assembly through it, then reads
what the page says about that call (``/session/S/assembly/RECORD?format=json``): ``got`` is
the items the page lists as included (caller id and the text it shows, in order), ``chosen``
the `AssembledContext`'s; ``report_tokens`` the page's tokens used, ``sent_tokens`` the
context's. ``texts`` is every text the page shows around that call: the assembly page (items
and the context as sent), the sessions page, a search for the query's words, and the message
page of every turn this driver stored in the session (a removed one must show nothing).

Not in ``can``:

- ``bad``: the page takes no value of the core's (no budget, k, text or timestamp); what it
  takes is a path and a query string, which it answers with a 4xx page, not with the core's
  error. tests/inspect/test_inspect_bad_requests.py checks those (ports, lone surrogates
  percent-encoded, huge numbers).
- ``close``: closing the page stops its server (a request then cannot connect at all), and
  the memory it shows belongs to the application; a page on a closed memory answers 503.
- ``span``: the page makes no span of its own (the assembly does, as the memory door's).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlencode

from .base import Place, Received, Refusal, Turn
from .common import Registry

__all__ = ["InspectPage", "make"]

_WORD = re.compile(r"\w+", re.UNICODE)


class InspectPage:
    """The inspector's pages, served on the door's own memory."""

    name = "inspect_page"
    can = frozenset({"add", "send", "report", "removal", "pin"})
    takes = frozenset({"budget", "query", "session_id"})

    def __init__(self, place: Place) -> None:
        from ctxbudget.inspect import serve
        from ctxbudget.memory import InclusionLogConfig

        self.memory = place.open_memory(
            write_behind=True, inclusion_log=InclusionLogConfig(keep_context=True)
        )
        self.page = serve(self.memory, port=0)
        self.registry = Registry()
        self.ids: dict[str, list[str]] = {}  # session -> ids of the turns stored through here
        self._closed = False

    def add(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        messages = [{"role": t.role, "text": t.text, "id": t.id} for t in turns]
        self.memory.add_messages(session, messages, user_id=user)
        for turn in turns:
            self.registry.note(turn.id, turn.text)
            self.ids.setdefault(session, []).append(turn.id)

    def pin(self, text: str, id: str, session: str | None = None, user: str | None = None) -> None:
        self.memory.pin(session, text, user_id=user, id=id)
        self.registry.note(id, text)

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        ctx = self.memory.assemble(session, query, budget=budget, user_id=user)
        self.memory.flush()  # the page shows what is stored: the turns written behind too
        newest = self.memory.contexts(session, limit=1)[0]
        doc = self._get(_path("session", session, "assembly", newest.id))
        if doc is None:
            msg = f"the page has no assembly {newest.id} of session {session!r}"
            raise AssertionError(msg)
        included = [i for i in doc["items"] if i["status"] == "included"]
        got = [(i["ref"]["id"], i["text"]) for i in included if i["ref"] is not None]
        chosen = [(item.ref.id, item.text) for item in ctx.included if item.ref is not None]
        return Received(
            got=got,
            chosen=chosen,
            available=ctx.tokens_available,
            sent_tokens=ctx.tokens_used,
            report_tokens=doc["summary"]["tokens_used"],
            report=doc,
            texts=self._shown(session, query, doc),
        )

    def _shown(self, session: str, query: str, doc: dict[str, Any]) -> list[str]:
        """Every text the page shows about this call, its session and its query."""
        texts = [i["text"] for i in doc["items"] if i["text"] is not None]
        context = doc.get("context") or {}
        texts += [str(m.get("content")) for m in context.get("messages", [])]
        texts += [context["text"]] if "text" in context else []
        texts.append(json.dumps(self._get("/"), ensure_ascii=False))
        words = " ".join(_WORD.findall(query))
        found = self._get("/?" + urlencode({"q": words})) if words else None
        texts += [h["text"] for h in (found or {}).get("hits", [])]
        for message_id in self.ids.get(session, []):
            page = self._get(_path("session", session, "message", message_id))
            if page is not None:
                texts.append(page["message"]["text"])
        return texts

    def _get(self, path: str) -> dict[str, Any] | None:
        """The JSON twin of a page (None: 404, nothing stored there)."""
        joiner = "&" if "?" in path else "?"
        url = self.page.url.rstrip("/") + path + joiner + "format=json"
        try:
            with urllib.request.urlopen(url, timeout=60) as answer:  # noqa: S310 - loopback
                found: dict[str, Any] = json.load(answer)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise
        return found

    def bad(self, argument: str, value: object) -> Refusal | None:
        msg = "inspect_page does not take the core's values (see the module docstring)"
        raise NotImplementedError(msg)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.page.close()
            self.memory.close()

    def after_close(self) -> BaseException | None:
        msg = "inspect_page has no call after close (see the module docstring)"
        raise NotImplementedError(msg)


def _path(*parts: str) -> str:
    return "/" + "/".join(quote(part, safe="") for part in parts)


def make(place: Place) -> InspectPage:
    """The driver of the inspector's page on ``place``."""
    return InspectPage(place)
