"""The ``ctxbudget`` command: demo, assemble, count, and the LoCoMo evaluation."""

from __future__ import annotations

from ctxbudget.cli.main import main

__all__ = ["main"]
