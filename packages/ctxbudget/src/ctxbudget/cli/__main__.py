"""``python -m ctxbudget.cli``."""

from __future__ import annotations

from ctxbudget.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
