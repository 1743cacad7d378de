"""Read, edit and write an ONNX model with protobuf alone (no ``onnx`` package).

onnxruntime depends on protobuf but not on ``onnx`` (31 MB with ml_dtypes), and a graph rewrite
touches only nodes, initializers and opset imports. Those few message types are declared here
with onnx.proto's field numbers (which ONNX never changes); every other field of the file
(value infos, metadata, docs) travels through as protobuf unknown fields, so a model parsed and
written again keeps them.

`Graph` collects edits (nodes inserted before a node, nodes removed) against the parsed node
list; `Graph.commit` applies them and drops nodes that no graph output needs any more.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from google.protobuf import (  # type: ignore[import-untyped]
    descriptor_pb2,
    descriptor_pool,
    message_factory,
)

__all__ = ["FLOAT", "INT8", "INT64", "UINT8", "Graph"]

FLOAT, UINT8, INT8, INT32, INT64 = 1, 2, 3, 6, 7
"""TensorProto data types used by the rewrites."""

_NUMPY = {FLOAT: np.float32, UINT8: np.uint8, INT8: np.int8, INT32: np.int32, INT64: np.int64}
_CODES = {np.dtype(v): k for k, v in _NUMPY.items()}

# (field, number, type, repeated) of the onnx.proto messages a rewrite reads or writes.
_SCHEMA: dict[str, list[tuple[str, int, str, bool]]] = {
    "TensorProto": [
        ("dims", 1, "int64", True),
        ("data_type", 2, "int32", False),
        ("float_data", 4, "float", True),
        ("int32_data", 5, "int32", True),
        ("int64_data", 7, "int64", True),
        ("name", 8, "string", False),
        ("raw_data", 9, "bytes", False),
    ],
    "AttributeProto": [
        ("name", 1, "string", False),
        ("f", 2, "float", False),
        ("i", 3, "int64", False),
        ("ints", 8, "int64", True),
        ("type", 20, "int32", False),
    ],
    "NodeProto": [
        ("input", 1, "string", True),
        ("output", 2, "string", True),
        ("name", 3, "string", False),
        ("op_type", 4, "string", False),
        ("attribute", 5, "AttributeProto", True),
        ("domain", 7, "string", False),
    ],
    "ValueInfoProto": [("name", 1, "string", False)],
    "GraphProto": [
        ("node", 1, "NodeProto", True),
        ("initializer", 5, "TensorProto", True),
        ("output", 12, "ValueInfoProto", True),
    ],
    "OperatorSetIdProto": [("domain", 1, "string", False), ("version", 2, "int64", False)],
    "ModelProto": [
        ("graph", 7, "GraphProto", False),
        ("opset_import", 8, "OperatorSetIdProto", True),
    ],
}


def _message_classes() -> dict[str, Any]:
    field = descriptor_pb2.FieldDescriptorProto
    scalars = {
        "int64": field.TYPE_INT64,
        "int32": field.TYPE_INT32,
        "float": field.TYPE_FLOAT,
        "string": field.TYPE_STRING,
        "bytes": field.TYPE_BYTES,
    }
    file = descriptor_pb2.FileDescriptorProto(
        name="ctxbudget_onnx_subset.proto", package="ctxbudget_onnx", syntax="proto2"
    )
    for message, fields in _SCHEMA.items():
        proto = file.message_type.add(name=message)
        for name, number, kind, repeated in fields:
            label = field.LABEL_REPEATED if repeated else field.LABEL_OPTIONAL
            entry = proto.field.add(name=name, number=number, label=label)
            if kind in scalars:
                entry.type = scalars[kind]
            else:
                entry.type = field.TYPE_MESSAGE
                entry.type_name = f".ctxbudget_onnx.{kind}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"ctxbudget_onnx.{name}"))
        for name in _SCHEMA
    }


_MESSAGES = _message_classes()


class Graph:
    """The main graph of an ONNX model, with lookups by tensor name and deferred edits."""

    def __init__(self, model: bytes) -> None:
        self.model: Any = _MESSAGES["ModelProto"]()
        self.model.ParseFromString(model)
        self._before: dict[int, list[Any]] = {}
        self._removed: set[int] = set()
        self._index()

    def _index(self) -> None:
        graph = self.model.graph
        self.nodes: list[Any] = list(graph.node)
        self.initializers: dict[str, Any] = {t.name: t for t in graph.initializer}
        self.producer: dict[str, Any] = {o: n for n in self.nodes for o in n.output}
        self.consumers: dict[str, list[Any]] = {}
        for node in self.nodes:
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)

    def array(self, name: str) -> np.ndarray[Any, Any] | None:
        """The value of an initializer, or None if ``name`` is not one (or of another type)."""
        tensor = self.initializers.get(name)
        if tensor is None or tensor.data_type not in _NUMPY:
            return None
        dtype = _NUMPY[tensor.data_type]
        if tensor.raw_data:
            flat = np.frombuffer(tensor.raw_data, dtype=dtype)
        elif tensor.data_type == FLOAT:
            flat = np.array(tensor.float_data, dtype=dtype)
        elif tensor.data_type == INT64:
            flat = np.array(tensor.int64_data, dtype=dtype)
        else:
            flat = np.array(tensor.int32_data, dtype=np.int32).astype(dtype)
        return flat.reshape(tuple(tensor.dims))

    def scalar(self, name: str) -> float | None:
        """The value of a one-element initializer, or None."""
        value = self.array(name)
        return None if value is None or value.size != 1 else float(value.reshape(-1)[0])

    def constant(self, name: str, value: np.ndarray[Any, Any]) -> str:
        """Add an initializer (once per name) and return its name."""
        if name not in self.initializers:
            value = np.ascontiguousarray(value)
            tensor = self.model.graph.initializer.add(
                name=name, data_type=_CODES[value.dtype], raw_data=value.tobytes()
            )
            tensor.dims.extend(value.shape)
            self.initializers[name] = tensor
        return name

    def node(self, op: str, inputs: list[str], output: str, domain: str = "", **attrs: Any) -> Any:
        """A new node (not yet in the graph: pass it to `insert_before`)."""
        node = _MESSAGES["NodeProto"](
            op_type=op, input=inputs, output=[output], domain=domain, name=f"{output}/{op}"
        )
        for key, value in attrs.items():
            if isinstance(value, float):
                node.attribute.add(name=key, f=value, type=1)  # FLOAT
            else:
                node.attribute.add(name=key, i=int(value), type=2)  # INT
        return node

    @staticmethod
    def attribute(node: Any, name: str) -> Any:
        """A node's attribute by name, or None."""
        return next((a for a in node.attribute if a.name == name), None)

    def single_consumer(self, name: str, op: str) -> Any:
        """The one node reading tensor ``name`` if there is exactly one and it is an ``op``."""
        users = self.consumers.get(name, [])
        return users[0] if len(users) == 1 and users[0].op_type == op else None

    def insert_before(self, anchor: Any, nodes: list[Any]) -> None:
        """Run ``nodes`` just before ``anchor`` (so after everything ``anchor`` reads)."""
        self._before.setdefault(id(anchor), []).extend(nodes)

    def remove(self, node: Any) -> None:
        """Drop a node whose outputs the inserted nodes now produce."""
        self._removed.add(id(node))

    def commit(self) -> None:
        """Apply the edits, drop nodes no graph output needs, and index the result."""
        edited: list[Any] = []
        for node in self.nodes:
            edited.extend(self._before.get(id(node), []))
            if id(node) not in self._removed:
                edited.append(node)
        needed = {output.name for output in self.model.graph.output}
        kept: list[Any] = []
        for node in reversed(edited):
            if any(name in needed for name in node.output):
                kept.append(node)
                needed.update(name for name in node.input if name)
        kept.reverse()
        kept_ids = {id(node) for node in kept}
        dropped = {name for node in edited if id(node) not in kept_ids for name in node.input}
        graph = self.model.graph
        del graph.node[:]
        graph.node.extend(kept)
        # Initializers only the dropped nodes read (the scales of int8 weights) go too.
        unused = [t for t in graph.initializer if t.name in dropped and t.name not in needed]
        for tensor in unused:
            graph.initializer.remove(tensor)
        self._before.clear()
        self._removed.clear()
        self._index()

    def serialize(self, *, opset: int) -> bytes:
        """The model, importing at least ``opset`` of ONNX and ORT's ``com.microsoft`` ops."""
        self.commit()
        imports = self.model.opset_import
        for entry in imports:
            if entry.domain in ("", "ai.onnx"):
                entry.version = max(entry.version, opset)
        if not any(entry.domain == "com.microsoft" for entry in imports):
            imports.add(domain="com.microsoft", version=1)
        data: bytes = self.model.SerializeToString()
        return data
