"""The inspector on a Chroma server, beside a live worker writing to it."""

from __future__ import annotations

import subprocess
import sys
import uuid
from urllib.parse import quote

import pytest
from inspect_helpers import SCRIPT, dump, get, get_json

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.inspect import open_reader, serve
from ctxbudget.testing import ChromaServer

pytestmark = pytest.mark.integration


def test_pages_on_a_server_beside_a_worker(
    chroma_server: ChromaServer, embedder: OnnxEmbedder
) -> None:
    namespace = f"inspect-{uuid.uuid4().hex[:8]}"
    worker = ContextMemory(chroma_url=chroma_server.url, namespace=namespace, embedder=embedder)
    reader = open_reader(chroma_url=chroma_server.url, namespace=namespace)
    try:
        worker.add_messages(
            "chat 1",
            [
                {"id": "m1", "role": "user", "text": "My locker code is 4417."},
                {"id": "m2", "role": "assistant", "text": f"Noted {SCRIPT}."},
                {"id": "m3", "role": "user", "text": "The gym opens at six."},
            ],
            user_id="ana",
        )
        calls = [worker.assemble("chat 1", "locker code?", budget=b) for b in (40, 400)]
        worker.flush()
        before = dump(chroma_server.url)
        with serve(reader, port=0) as page:
            sessions = get_json(page.url)["users"]
            assert [(g["user"], [s["session"] for s in g["sessions"]]) for g in sessions] == [
                ("ana", ["chat 1"])
            ]
            timeline = get_json(page.url + "session/" + quote("chat 1", safe=""))
            assert [a["tokens_used"] for a in timeline["assemblies"]] == [
                c.tokens_used for c in calls
            ]
            for shown, ctx in zip(timeline["assemblies"], calls, strict=True):
                doc = get_json(page.url + f"session/chat%201/assembly/{shown['id']}")
                assert [i["id"] for i in doc["items"] if i["status"] == "included"] == [
                    it.id for it in ctx.included
                ]
            message = get_json(page.url + "session/chat%201/message/m1")
            assert message["included_in"] == [n for n, c in enumerate(calls, 1) if c.includes("m1")]
            status, _, body = get(page.url + "session/chat%201/message/m2")
            assert status == 200 and "<script" not in body
            get(page.url + "session/typo/message/m1")
            assert dump(chroma_server.url) == before  # browsing wrote nothing to the server
            # The worker goes on; the page shows its new call at the next read.
            worker.add_message("chat 1", "user", "And the bike lock is 9021.", id="m4")
            ctx = worker.assemble("chat 1", "bike lock?", budget=400)
            worker.flush()
            timeline = get_json(page.url + "session/chat%201")
            assert timeline["messages"] == 4
            assert timeline["assemblies"][-1]["tokens_used"] == ctx.tokens_used
    finally:
        reader.close()
        worker.close()


def test_cli_inspect_on_a_server(chroma_server: ChromaServer, embedder: OnnxEmbedder) -> None:
    namespace = f"inspect-{uuid.uuid4().hex[:8]}"
    with ContextMemory(
        chroma_url=chroma_server.url, namespace=namespace, embedder=embedder
    ) as worker:
        worker.add_message("s1", "user", "hello there", id="m1", user_id="bo")
        ctx = worker.assemble("s1", "hello?", budget=200)
        worker.flush()
        command = [sys.executable, "-m", "ctxbudget.cli", "inspect", "--port", "0"]
        command += ["--chroma-url", chroma_server.url, "--namespace", namespace]
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        try:
            assert process.stderr is not None
            line = process.stderr.readline()
            url = line.split(" at ", 1)[1].split()[0]
            timeline = get_json(url + "session/s1")
            assert timeline["assemblies"][0]["tokens_used"] == ctx.tokens_used
            process.terminate()
            assert process.wait(timeout=60) == 0
        finally:
            process.kill()
            process.wait()
            if process.stderr is not None:
                process.stderr.close()
