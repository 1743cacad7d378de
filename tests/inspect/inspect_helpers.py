"""Helpers of the inspector's tests: the demo's writes with kept reports, requests, store dumps.

`write_demo` writes what ``ctxbudget demo`` writes (the bundled conversation of user maya, two
pinned facts, the notes, summaries of the earlier sessions), then makes logged assemblies of the
newest session at several budgets and of a session holding hostile texts, keeping each call's
`AssembledContext` so the tests compare the pages with them. `dump` reads a whole store (every
collection: ids, documents, metadata) so a test can check that browsing changed nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ctxbudget import ContextMemory
from ctxbudget.core.report import AssembledContext

SCRIPT = "<script>document.title='pwned'</script>"
IMG = "<img src=x onerror=\"document.title='pwned'\">"
HOSTILE_SESSION = 'evil"><b>session</b>'
HOSTILE_ID = 'm"><img src=x onerror=alert(1)>'
QUESTIONS = (
    "When is the move to Lisbon now?",
    "What can Maya not eat?",
    "What is the dog called?",
)
BUDGETS = (1200, 4000, 400)


@dataclass
class Written:
    """A store and the reports of the calls logged in it, oldest first, by session."""

    path: Path
    latest: str
    calls: dict[str, list[AssembledContext]] = field(default_factory=dict)


def write_demo(memory: ContextMemory) -> tuple[str, dict[str, list[AssembledContext]]]:
    """What ``ctxbudget demo`` writes, then logged calls; the newest session and the reports."""
    data = resources.files("ctxbudget.demo_data")
    sessions: dict[str, list[dict[str, Any]]] = {}
    for line in data.joinpath("conversation.jsonl").read_text("utf-8").splitlines():
        if line.strip():
            message = json.loads(line)
            sessions.setdefault(message.pop("session"), []).append(message)
    for session, messages in sessions.items():
        memory.add_messages(session, messages, user_id="maya", progress=False)
    memory.pin(user_id="maya", text="Maya is vegetarian and allergic to peanuts.")
    memory.pin(user_id="maya", text="Maya's partner is Tomás; their dog is Pixel.")
    memory.add_documents(
        [{"id": "notes", "text": data.joinpath("notes.md").read_text("utf-8")}],
        collection="notes",
    )
    latest = list(sessions)[-1]
    for session in sessions:
        if session != latest:
            memory.summarize(session, keep_recent=0, stretch=12)
    system = "You are Maya's assistant. Use the context; say when you do not know."
    calls: dict[str, list[AssembledContext]] = {latest: [], HOSTILE_SESSION: []}
    for question, budget in zip(QUESTIONS, BUDGETS, strict=True):
        calls[latest].append(memory.assemble(latest, question, budget=budget, system=system))
    memory.add_messages(
        HOSTILE_SESSION,
        [
            {"id": HOSTILE_ID, "role": "user", "text": f"hello {SCRIPT} there"},
            {"id": "m2", "role": "assistant", "text": f"an image {IMG} here"},
            {"id": "m3", "role": "user", "text": "what was the </blockquote><i>x</i> again?"},
        ],
        user_id="mallory<u>",
    )
    for budget in (60, 600):
        calls[HOSTILE_SESSION].append(memory.assemble(HOSTILE_SESSION, "again?", budget=budget))
    memory.flush()
    return latest, calls


def get(url: str, *, headers: dict[str, str] | None = None, method: str = "GET") -> Any:
    """(status, headers, body text) of a request; an HTTP error is an answer too."""
    request = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.headers, answer.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode("utf-8")


def get_json(url: str) -> Any:
    """The JSON twin of a page (``?format=json``); fails on any status but 200."""
    status, _, body = get(url + ("&" if "?" in url else "?") + "format=json")
    assert status == 200, body
    return json.loads(body)


_DUMP = """
import json, sys, chromadb
from chromadb.config import Settings
if sys.argv[1].startswith("http"):
    host, port = sys.argv[1].rsplit("/", 1)[-1].rsplit(":", 1)
    client = chromadb.HttpClient(host=host, port=int(port),
                                 settings=Settings(anonymized_telemetry=False))
else:
    client = chromadb.PersistentClient(path=sys.argv[1],
                                       settings=Settings(anonymized_telemetry=False))
out = {}
for col in sorted(client.list_collections(), key=lambda c: c.name):
    got = col.get(include=["documents", "metadatas"])
    rows = sorted(zip(got["ids"], got["documents"], got["metadatas"]), key=lambda r: r[0])
    out[col.name] = [col.metadata, rows]
print(json.dumps(out, sort_keys=True, default=str))
"""


def dump(where: str | Path) -> dict[str, Any]:
    """Every collection of a store (a folder, or a server's URL): read in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", _DUMP, str(where)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result
