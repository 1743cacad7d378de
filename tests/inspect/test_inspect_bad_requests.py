"""Bad values in the page's address get a 4xx page (or an empty answer), never a crash.

The inspector takes no value of the core's (a budget, k, a text): what its callers write is a
path and a query string. So the conformance suite's ``bad`` (a refusal compared with the
core's error) does not apply to it (tests/conformance/drivers/inspect_page.py); these are its
own bad values: ports, ids that are not text (a lone surrogate, percent-encoded), huge numbers,
and the server answers on after each.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from inspect_helpers import get

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.inspect import InspectServer, serve

LONE = "%ED%A0%80"  # "\ud800" as UTF-8 would write it (surrogatepass): not text
HUGE = "9" * 5000
PATHS = [
    f"/session/s{LONE}",
    f"/session/s{LONE}/assembly/r1",
    f"/session/s1/message/m{LONE}",
    f"/session/s1/assembly/{HUGE}",
    f"/session/{HUGE}",
    f"/session/s1/message/{HUGE}",
    "/session/s1/assembly/-1",
    "/session/s1/assembly/1e309",
    "/session/%00",
    "/session/s1:8765",
    "/:8765",
    "/99999",
    "/session/s1/assembly",
    "/session/s1/nothing/m1",
]
QUERIES = [f"q={LONE}", f"q={HUGE}", "port=99999", "port=-1", f"format={LONE}", f"q=%FF%FE{LONE}"]


@pytest.fixture(scope="module")
def page(
    tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder
) -> Iterator[InspectServer]:
    memory = ContextMemory(tmp_path_factory.mktemp("bad-requests"), embedder=embedder)
    memory.add_message("s1", "user", "My locker code is 4417.", id="m1", user_id="ana")
    memory.assemble("s1", "what is my locker code?", budget=300)
    with serve(memory, port=0) as served:
        yield served
    memory.close()


@pytest.mark.parametrize("path", PATHS)
def test_a_bad_path_is_a_4xx_page(page: InspectServer, path: str) -> None:
    for suffix in ("", "?format=json"):
        status, _, body = get(page.url.rstrip("/") + path + suffix)
        assert 400 <= status < 500, (path, status, body[:200])
    assert get(page.url)[0] == 200  # and it answers on


@pytest.mark.parametrize("query", QUERIES)
def test_a_bad_query_string_is_answered_without_a_crash(page: InspectServer, query: str) -> None:
    for path in ("/", "/session/s1", "/session/s1/message/m1"):
        status, _, body = get(f"{page.url.rstrip('/')}{path}?{query}")
        assert status == 200 or 400 <= status < 500, (path, query, status, body[:200])
        assert "Traceback" not in body
    assert get(page.url)[0] == 200
