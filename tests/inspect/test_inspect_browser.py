"""The inspector in a real headless Chromium: sessions -> timeline -> assembly -> message.

Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them), driven by Selenium;
nothing is downloaded. The screenshots docs/inspect.md shows are taken here.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from inspect_helpers import HOSTILE_ID, HOSTILE_SESSION, SCRIPT, Written

from ctxbudget import ContextMemory
from ctxbudget.inspect import InspectServer, serve
from ctxbudget.inspect.pages import session_url

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
#: Set to take the screenshots into docs/images (otherwise each test's own tmp_path: a test run
#: writes nothing into the working tree): CTXBUDGET_SCREENSHOTS=1 pytest tests/inspect -k navigate
SCREENSHOTS = "CTXBUDGET_SCREENSHOTS"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not (CHROMIUM.exists() and DRIVER.exists()),
        reason="no /usr/bin/chromium or /usr/bin/chromedriver: apt-get install chromium "
        "chromium-driver (.ci/run does)",
    ),
]


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is a dev dependency")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,1000",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(DRIVER)))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(tmp_path / "chromium-profile", ignore_errors=True)


@pytest.fixture
def page(reader: ContextMemory) -> Iterator[InspectServer]:
    with serve(reader, port=0) as served:
        yield served


def shot(driver: Any, name: str, tmp_path: Path) -> None:
    folder = IMAGES if os.environ.get(SCREENSHOTS) else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"inspect-{name}.png"
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 1000  # a picture, not an empty file


def navigate(driver: Any, go: Callable[[], object]) -> None:
    """Do ``go`` (a click, a submit) and wait until the browser has loaded the page it leads to.

    Selenium's ``click`` and ``submit`` return once the event is dispatched, not once the next
    page is there: reading the title right after can still read the old page's.
    """
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    old = driver.find_element(By.TAG_NAME, "html")
    go()
    wait = WebDriverWait(driver, 30)
    wait.until(expected_conditions.staleness_of(old))
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete")


def test_navigate_and_check_the_numbers(
    browser: Any, page: InspectServer, demo_store: Written, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    session, calls = demo_store.latest, demo_store.calls[demo_store.latest]
    browser.get(page.url)
    assert browser.title == "Sessions"
    shot(browser, "sessions", tmp_path)
    box = browser.find_element(By.NAME, "q")
    box.send_keys("Lisbon flat")
    navigate(browser, box.submit)  # a GET form to the same origin: served
    assert browser.title == "Search: Lisbon flat"
    assert browser.find_elements(By.CSS_SELECTOR, "a.message")
    browser.get(page.url)
    navigate(browser, browser.find_element(By.LINK_TEXT, session).click)
    assert browser.title == f"Session {session}"
    used = [
        int(td.text.replace(",", "")) for td in browser.find_elements(By.CSS_SELECTOR, "td.used")
    ]
    assert used == [ctx.tokens_used for ctx in calls]
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg.bar")) == len(calls)
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg.chart")) == 1
    shot(browser, "timeline", tmp_path)
    navigate(browser, browser.find_elements(By.CSS_SELECTOR, "a.assembly")[1].click)
    ctx = calls[1]
    assert browser.find_element(By.ID, "tokens-used").text == f"{ctx.tokens_used:,}"
    assert browser.find_element(By.ID, "budget").text == f"{ctx.budget.available:,}"
    assert browser.find_element(By.ID, "included-count").text == str(len(ctx.included))
    assert browser.find_element(By.ID, "pruned-count").text == str(len(ctx.pruned))
    assert len(browser.find_elements(By.CSS_SELECTOR, "tr.included")) == len(ctx.included)
    assert len(browser.find_elements(By.CSS_SELECTOR, "tr.pruned")) == len(ctx.pruned)
    shot(browser, "assembly", tmp_path)
    own = [it.id for it in ctx.included if it.id.startswith(session)]
    # One that a later call no longer sent, when there is one: its page says since when.
    message = next((i for i in own if not calls[-1].includes(i)), own[0])
    navigate(browser, browser.find_element(By.LINK_TEXT, f"{message} (session {session})").click)
    assert browser.title == f"Message {message}"
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.included a.assembly")
    assert [int(a.text) for a in rows] == [n for n, c in enumerate(calls, 1) if c.includes(message)]
    if not calls[-1].includes(message):
        assert f"not since call {len(calls)}" in browser.find_element(By.ID, "fate").text
    shot(browser, "message", tmp_path)


def test_hostile_texts_run_nothing(browser: Any, page: InspectServer) -> None:
    from selenium.webdriver.common.by import By

    base = page.url.rstrip("/")
    for url in (
        page.url,
        base + session_url(HOSTILE_SESSION),
        base + session_url(HOSTILE_SESSION, "message", HOSTILE_ID),
        base + session_url(HOSTILE_SESSION, "message", "m2"),
    ):
        browser.get(url)
        assert browser.title != "pwned"
        assert browser.find_elements(By.TAG_NAME, "script") == []
        assert browser.find_elements(By.TAG_NAME, "img") == []
        assert browser.find_elements(By.CSS_SELECTOR, "body b, body u, body i") == []
    browser.get(base + session_url(HOSTILE_SESSION, "message", HOSTILE_ID))
    assert SCRIPT in browser.find_element(By.ID, "message-text").text
