"""The int8-arithmetic graph of a MiniLM export whose weights are stored int8.

The pinned ``model.onnx`` stores each weight matrix as int8 with one fp32 scale per output
column (``Mul(Cast(W_int8), scale)`` in front of every ``MatMul``); onnxruntime folds that into
an fp32 matrix, so 75% of the time goes to fp32 matrix products. `int8_graph` rewrites each of
those ``MatMul``s to onnxruntime's ``MatMulIntegerToFloat`` on the file's own int8 weights and
scales (unchanged), with the activations quantized to uint8 in the graph:

- per row (one token of one text), asymmetric: ``scale = (max - min) / 255`` over the row's
  values (its range widened to include 0), zero point ``round(-min / scale)``. Per row, so the
  [CLS] token's large values do not coarsen the other tokens, and a text's vector does not depend
  on the other texts of its batch; asymmetric, because those rows are skewed (a symmetric
  scale fell short of the quality bar: min cosine 0.968 to sentence-transformers);
- ``MatMulIntegerToFloat`` takes one zero point per matrix, so the per-row zero points are
  corrected in fp32: ``x @ W = scale * (q @ W) - scale * zero_point * colsum(W)``, added
  together with the layer's bias as one rank-2 product ``[-scale * zero_point, 1] @
  [colsum(W); bias]``.

Two fp32 kernels that became the bottleneck once the products were int8 are swapped for
equivalent ones (same formula, float rounding apart): ``LayerNormalization`` (about 6x slower
than its parts in onnxruntime 1.32 on this machine) becomes mean-centering plus
``SimplifiedLayerNormalization`` (RMS normalization) plus beta, and the erf GELU chain
(``x * 0.5 * (1 + erf(x / sqrt 2))``) becomes one ``Gelu`` (ONNX opset 20).

int8 products are exact integer sums on x86 with AVX512-VNNI or AVX-VNNI; without VNNI (plain
AVX2) onnxruntime's u8s8 kernel can saturate 16-bit pair sums, so vectors there differ more
(measured on an AMD EPYC with AVX2, 2026-12-01: min cosine 0.886 to fp32, the empty string).
So `OnnxEmbedder` uses int8 by default only where `exact_int8` holds and fp32 elsewhere.
They also depend a little on the onnxruntime version (measured: min cosine 0.9976 between 1.20
and 1.32 on 300 LoCoMo turns, where the fp32 graph gives equal vectors to 2e-7).
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

import numpy as np

from ctxbudget.embed.onnx_graph import INT8, UINT8, Graph
from ctxbudget.errors import ConfigurationError

__all__ = ["OPSET", "exact_int8", "int8_graph"]


def exact_int8() -> bool:
    """Whether this CPU sums int8 products exactly (x86 with AVX512-VNNI or AVX-VNNI, Linux)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        info = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return False
    flags = {
        flag for line in info.splitlines() if line.startswith("flags") for flag in line.split()
    }
    return bool(flags & {"avx512_vnni", "avx_vnni"})


OPSET = 21
"""ONNX opset of the rewritten graph: blocked QuantizeLinear (21) and Gelu (20)."""

_MS = "com.microsoft"


def int8_graph(model: bytes, *, levels: int = 255) -> tuple[bytes, int]:
    """The model with int8 matrix products, and how many ``MatMul``s were rewritten.

    A ``MatMul`` whose weights are not an int8 initializer with per-column scales is left as
    it is, so a float export comes back with fp32 products (and 0). ``levels``: the steps of a
    row's quantized range (255: 8 bits; 127, 7 bits, is exact without VNNI too, and is measured
    by ``benchmarks/bench_activation_bits.py``, not used).
    """
    if not 1 <= levels <= 255:
        msg = f"levels must be 1 to 255 (the steps of a uint8 row), got {levels!r}"
        raise ConfigurationError(msg)
    graph = Graph(model)
    _swap_layer_norms(graph)
    _swap_gelus(graph)
    graph.commit()
    count = _quantize_matmuls(graph, levels)
    return graph.serialize(opset=OPSET), count


def _swap_layer_norms(graph: Graph) -> None:
    axes = graph.constant("ln/axes", np.array([-1], dtype=np.int64))
    for node in graph.nodes:
        if node.op_type != "LayerNormalization" or node.domain or len(node.input) != 3:
            continue
        axis = graph.attribute(node, "axis")
        if axis is not None and axis.i != -1:
            continue
        epsilon = graph.attribute(node, "epsilon")
        x, gamma, beta = node.input
        out = node.output[0]
        graph.insert_before(
            node,
            [
                graph.node("ReduceMean", [x, axes], f"{out}/mean", keepdims=1),
                graph.node("Sub", [x, f"{out}/mean"], f"{out}/centered"),
                graph.node(
                    "SimplifiedLayerNormalization",
                    [f"{out}/centered", gamma],
                    f"{out}/normalized",
                    axis=-1,
                    epsilon=epsilon.f if epsilon is not None else 1e-5,
                ),
                graph.node("Add", [f"{out}/normalized", beta], out),
            ],
        )
        graph.remove(node)


def _swap_gelus(graph: Graph) -> None:
    for erf in graph.nodes:
        if erf.op_type != "Erf":
            continue
        div = graph.producer.get(erf.input[0])
        if div is None or div.op_type != "Div":
            continue
        if abs((graph.scalar(div.input[1]) or 0.0) - 2**0.5) > 1e-4:
            continue
        x = div.input[0]
        plus = graph.single_consumer(erf.output[0], "Add")
        if plus is None or graph.scalar(_other(plus, erf.output[0])) != 1.0:
            continue
        half = graph.single_consumer(plus.output[0], "Mul")
        if half is None or graph.scalar(_other(half, plus.output[0])) != 0.5:
            continue
        last = graph.single_consumer(half.output[0], "Mul")
        if last is None or x not in last.input:
            continue
        graph.insert_before(last, [graph.node("Gelu", [x], last.output[0])])
        graph.remove(last)  # the Div/Erf/Add/Mul before it are no longer read: commit drops them


def _other(node: Any, name: str) -> str:
    """The input of a two-input node that is not ``name``."""
    return str(node.input[1] if node.input[0] == name else node.input[0])


def _int8_weights(graph: Graph, matmul: Any) -> tuple[str, Any, Any] | None:
    """(int8 weight name, its values, fp32 per-column scales) if ``matmul`` reads such weights."""
    mul = graph.producer.get(matmul.input[1])
    if mul is None or mul.op_type != "Mul":
        return None
    cast = graph.producer.get(mul.input[0])
    if cast is None or cast.op_type != "Cast" or graph.initializers.get(cast.input[0]) is None:
        return None
    if graph.initializers[cast.input[0]].data_type != INT8:
        return None
    weights, scales = graph.array(cast.input[0]), graph.array(mul.input[1])
    if weights is None or scales is None or weights.ndim != 2:
        return None
    if scales.size != weights.shape[1]:
        return None
    return cast.input[0], weights, scales.reshape(-1).astype(np.float32)


def _quantize_rows(
    graph: Graph, x: str, width: int, anchor: Any, levels: int
) -> tuple[str, str, str]:
    """Nodes quantizing tensor ``x`` per row; returns (uint8 values, scales, offset lhs)."""
    p = f"{x}/q8"
    axes = graph.constant("q8/axes", np.array([-1], dtype=np.int64))
    zero = graph.constant("q8/zero", np.array(0.0, dtype=np.float32))
    tiny = graph.constant("q8/tiny", np.array(1e-12, dtype=np.float32))
    step = graph.constant(f"q8/1_{levels}", np.array(1 / levels, dtype=np.float32))
    one = graph.constant("q8/one", np.array(1.0, dtype=np.float32))
    node = graph.node
    graph.insert_before(
        anchor,
        [
            node("ReduceMax", [x, axes], f"{p}/max", keepdims=1),
            node("ReduceMin", [x, axes], f"{p}/min", keepdims=1),
            node("Max", [f"{p}/max", zero], f"{p}/hi"),
            node("Min", [f"{p}/min", zero], f"{p}/lo"),
            node("Sub", [f"{p}/hi", f"{p}/lo"], f"{p}/span"),
            node("Max", [f"{p}/span", tiny], f"{p}/span+"),
            node("Mul", [f"{p}/span+", step], f"{p}/scale"),
            node("Div", [f"{p}/lo", f"{p}/scale"], f"{p}/-zero"),
            node("Neg", [f"{p}/-zero"], f"{p}/zero~"),
            node("Round", [f"{p}/zero~"], f"{p}/zero"),
            node("Cast", [f"{p}/zero"], f"{p}/zero_u8", to=UINT8),
            node(
                "QuantizeLinear",
                [x, f"{p}/scale", f"{p}/zero_u8"],
                f"{p}/values",
                axis=-1,
                block_size=width,
            ),
            node("Mul", [f"{p}/scale", f"{p}/zero"], f"{p}/scaled_zero"),
            node("Neg", [f"{p}/scaled_zero"], f"{p}/shift"),
            node("Shape", [f"{p}/scale"], f"{p}/shape"),
            node("Expand", [one, f"{p}/shape"], f"{p}/ones"),
            node("Concat", [f"{p}/shift", f"{p}/ones"], f"{p}/lhs", axis=-1),
        ],
    )
    return f"{p}/values", f"{p}/scale", f"{p}/lhs"


def _quantize_matmuls(graph: Graph, levels: int) -> int:
    rows: dict[str, tuple[str, str, str]] = {}
    count = 0
    for matmul in graph.nodes:
        if matmul.op_type != "MatMul":
            continue
        found = _int8_weights(graph, matmul)
        if found is None:
            continue
        name, weights, scales = found
        x = matmul.input[0]
        if x not in rows:  # Q, K and V read the same rows: quantize them once
            rows[x] = _quantize_rows(graph, x, int(weights.shape[0]), matmul, levels)
        values, row_scales, lhs = rows[x]
        out = matmul.output[0]
        bias = np.zeros(weights.shape[1], dtype=np.float32)
        add = graph.single_consumer(out, "Add")
        added = None if add is None else graph.array(add.input[1])
        if add is not None and added is not None and added.shape == bias.shape:
            bias, target = added.astype(np.float32), add.output[0]
            graph.remove(add)
        else:
            target = out
        column_sums = (weights.astype(np.float64).sum(axis=0) * scales).astype(np.float32)
        rhs = graph.constant(f"{name}/offset", np.stack([column_sums, bias]))
        col_scales = graph.constant(f"{name}/scale", scales)
        graph.insert_before(
            matmul,
            [
                graph.node(
                    "MatMulIntegerToFloat",
                    [values, name, row_scales, col_scales],
                    f"{out}/int8",
                    domain=_MS,
                ),
                graph.node("MatMul", [lhs, rhs], f"{out}/offset"),
                graph.node("Add", [f"{out}/int8", f"{out}/offset"], target),
            ],
        )
        graph.remove(matmul)
        count += 1
    return count
