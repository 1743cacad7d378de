"""A damaged model or tokenizer file given by path: a clear error naming the file, what to do.

Before the fix a cut ``model.onnx`` given with ``sha256=None`` (a user's own export) raised
protobuf's ``DecodeError`` or onnxruntime's ``Fail``, and a cut ``tokenizer.json`` a bare
``Exception`` from ``tokenizers``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.embed.onnx_files import MODEL_PACKAGE
from ctxbudget.errors import MissingDependencyError


def _pinned_model() -> Path:
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "model.onnx"


@pytest.mark.parametrize("arithmetic", ["int8", "fp32"])
@pytest.mark.parametrize("how", ["cut in half", "empty", "text"])
def test_a_damaged_model_file_is_a_clear_error(tmp_path: Path, how: str, arithmetic: str) -> None:
    data = _pinned_model().read_bytes()
    content = {"cut in half": data[: len(data) // 2], "empty": b"", "text": b"hello"}[how]
    path = tmp_path / "model.onnx"
    path.write_bytes(content)
    embedder = OnnxEmbedder(path, sha256=None, arithmetic=arithmetic)
    with pytest.raises(MissingDependencyError) as info:
        embedder.embed_query("hello")
    text = str(info.value)
    assert str(path) in text and f"({len(content):,} bytes)" in text
    assert "damaged or not an ONNX model" in text and "export it again" in text


@pytest.mark.parametrize("content", [b'{"version": "1.0", "model": {', b'{"a": 1}', b"\xff\xfe"])
def test_a_damaged_tokenizer_file_is_a_clear_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_bytes(content)
    with pytest.raises(MissingDependencyError, match="tokenizer at .*tokenizer.json") as info:
        OnnxEmbedder(tokenizer_path=path).embed_query("hello")
    assert "pass tokenizer_path=" in str(info.value)
