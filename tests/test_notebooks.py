"""Every notebook in notebooks/ runs top to bottom on the venv's kernel, offline.

Each notebook runs in a temporary directory (the kernel's cwd), so nothing it writes lands in
the working tree, and the notebook file itself is never rewritten. A notebook added to
notebooks/ is picked up without editing this file.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
OFFLINE = {"HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False", "ORT_DISABLE_TELEMETRY": "1"}


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in OFFLINE.items():
        monkeypatch.setenv(name, value)  # the kernel process inherits os.environ
    monkeypatch.chdir(tmp_path)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    # Raises CellExecutionError (with the cell's traceback) when any cell fails.
    client.execute()
