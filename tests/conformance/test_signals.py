"""A server stops on SIGTERM or SIGINT whatever stdin does, and stores what it acknowledged.

Each case starts the server, stores a few turns through it (acknowledged), sends the signal
with stdin left open, and waits for the process to end (a bounded wait: a server that does not
stop is killed after it, and the test fails); then a fresh memory on the same place holds every
acknowledged turn. A SIGTERM during start-up (before the client's handshake, while the
server imports or opens its store) stops it too.
"""

from __future__ import annotations

import signal
from typing import Any

import pytest
from _suite import fresh, needs, tagged
from drivers.base import Place, Turn

STOP = 30.0  # seconds a server may take to store what it acknowledged and exit


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_server_and_keeps_what_was_acknowledged(
    driver: Any, place: Place, signum: signal.Signals
) -> None:
    needs(driver, "signals")
    session, user = fresh("s"), fresh("u")
    turns = [
        Turn("user" if n % 2 == 0 else "assistant", tagged(["cello", "sunday"]), f"{session}-{n}")
        for n in range(3)
    ]
    driver.add(session, user, turns)
    code = driver.stop(int(signum), STOP)
    assert code is not None, f"{driver.name} still ran {STOP:.0f} s after {signum.name}"
    memory = place.open_memory()
    try:
        stored = [r.text for r in memory.history(session)]
    finally:
        memory.close()
    assert stored == [t.text for t in turns], f"{driver.name} exited {code}, stored {stored}"


def test_sigterm_during_start_up_stops_the_server(driver: Any) -> None:
    needs(driver, "signals")
    if not hasattr(driver, "catching"):
        pytest.skip(f"{driver.name} cannot tell when its server catches SIGTERM")
    # Once the server handles SIGTERM itself, before any handshake: it is starting up.
    assert driver.catching(int(signal.SIGTERM), STOP), f"{driver.name} never caught SIGTERM"
    code = driver.stop(int(signal.SIGTERM), STOP)
    assert code is not None, f"{driver.name} still ran {STOP:.0f} s after SIGTERM at start-up"
