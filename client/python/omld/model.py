"""The serving model as a file, to embed offline as omld does.

`Client.export_model()` (or `omlctl export-model FILE`) returns an OMLSNAP
file (format in src/snapshot.h): the network's shape, the head weights
alpha and its parameter block. `load()` reads one and `Model.embed()`
computes every head's L2-normalised embedding of feature rows, the same
forward pass the daemon serves with (float64 here, float32 in omld: they
agree to about 1e-6). numpy is used when it is importable (fast, for batch
pipelines); without it the pass runs in plain Python.

    model = omld.model.load(client.export_model())
    heads = model.embed([[0.1] * model.dim])   # heads[l][row] -> emb floats
"""
import struct
import zlib
from typing import Any, List, Optional, Sequence, Tuple, Union

_np: Optional[Any]
try:
    import numpy as _np
except ImportError:  # plain Python below
    _np = None

MAGIC = b"OMLSNAP\0"
VERSION = 1
_SCALE, _BIAS, _BASIS = 1, 2, 4


class ModelFileError(ValueError):
    """The bytes are not an OMLSNAP file this package reads."""


class Model:
    """A decoded OMLSNAP file: dim, layers, hidden, emb, alpha, version,
    updates, and embed()."""

    def __init__(self, data: bytes):
        if len(data) < 12 or data[:8] != MAGIC:
            raise ModelFileError("not an exported omld model (bad magic)")
        (version,) = struct.unpack_from("<I", data, 8)
        if version != VERSION:
            raise ModelFileError("model file format version %d; this package reads %d"
                                 % (version, VERSION))
        if len(data) < 16 or zlib.crc32(data[:-4]) != struct.unpack_from("<I", data, len(data) - 4)[0]:
            raise ModelFileError("checksum mismatch (truncated or altered)")
        try:
            (self.dim, self.layers, self.hidden, self.emb, flags,
             self.version, self.updates) = struct.unpack_from("<5I2Q", data, 12)
            at = 12 + struct.calcsize("<5I2Q")
            heads = self.layers + 1
            self.alpha = list(struct.unpack_from("<%df" % heads, data, at))
            at += 4 * heads
            (count,) = struct.unpack_from("<Q", data, at)
            at += 8
        except struct.error:
            raise ModelFileError("truncated header") from None
        if flags & ~(_SCALE | _BIAS | _BASIS):
            raise ModelFileError("unknown flags %#x (a newer omld's model?)" % flags)
        self.standardised = bool(flags & _SCALE)
        self.has_offset = bool(flags & _BIAS)
        # A fixed basis B (emb, dim) maps the input before the trained layers.
        self.has_basis = bool(flags & _BASIS)
        d, h, e, L = self.dim, self.hidden, self.emb, self.layers
        if self.has_basis and e >= d:
            raise ModelFileError("an input basis needs emb < dim (emb %d, dim %d)" % (e, d))
        w0 = e if self.has_basis else d  # what W1 and T0 read
        # The block as net.h lays it out.
        shapes: List[Tuple[str, Tuple[int, ...]]] = [("mu", (d,))]
        if self.standardised:
            shapes.append(("scale", (d,)))
        if self.has_basis:
            shapes.append(("B", (e, d)))
        if L >= 1:
            shapes.append(("W1", (h, w0)))
        shapes.append(("T0", (e, w0)))
        shapes += [("W%d" % l, (h, h)) for l in range(2, L + 1)]
        shapes += [("T%d" % l, (e, h)) for l in range(1, L + 1)]
        if self.has_offset:
            shapes += [("b%d" % l, (e,)) for l in range(L + 1)]
        need = sum(_size(s) for _, s in shapes)
        if count != need or len(data) - 4 - at != 4 * count:
            raise ModelFileError("parameter block of %d floats where the shape needs %d"
                                 % (count, need))
        flat = struct.unpack_from("<%df" % count, data, at)
        self._p: dict = {}
        for name, shape in shapes:
            n = _size(shape)
            block, flat = flat[:n], flat[n:]
            if _np is not None:
                self._p[name] = _np.asarray(block, dtype=_np.float64).reshape(shape)
            elif len(shape) == 2:
                self._p[name] = [list(block[r * shape[1]:(r + 1) * shape[1]])
                                 for r in range(shape[0])]
            else:
                self._p[name] = list(block)

    @property
    def heads(self) -> int:
        return self.layers + 1

    def embed(self, rows: Sequence[Sequence[float]]) -> List[List[List[float]]]:
        """Every head's embedding of each row: result[l][i] is head l's unit
        vector (emb floats) for rows[i] (dim features each)."""
        for i, r in enumerate(rows):
            if len(r) != self.dim:
                raise ValueError("rows[%d] has %d features; the model takes %d"
                                 % (i, len(r), self.dim))
        if _np is not None:
            return self._embed_np(_np.asarray(rows, dtype=_np.float64).reshape(-1, self.dim))
        return self._embed_py(rows)

    def _embed_np(self, X):
        p = self._p
        h = X - p["mu"]
        if self.standardised:
            h = h * p["scale"]
        if self.has_basis:
            h = h @ p["B"].T
        out = []
        for l in range(self.heads):
            if l >= 1:
                h = _np.maximum(h @ p["W%d" % l].T, 0.0)
            z = h @ p["T%d" % l].T
            if self.has_offset:
                z = z + p["b%d" % l]
            n = _np.linalg.norm(z, axis=1, keepdims=True)
            out.append((z / _np.where(n > 0, n, 1.0)).tolist())
        return out

    def _embed_py(self, rows):
        p = self._p
        out = [[] for _ in range(self.heads)]
        for r in rows:
            h = [x - m for x, m in zip(r, p["mu"])]
            if self.standardised:
                h = [x * s for x, s in zip(h, p["scale"])]
            if self.has_basis:
                h = [_dot(b, h) for b in p["B"]]
            for l in range(self.heads):
                if l >= 1:
                    h = [max(0.0, _dot(w, h)) for w in p["W%d" % l]]
                z = [_dot(t, h) for t in p["T%d" % l]]
                if self.has_offset:
                    z = [a + b for a, b in zip(z, p["b%d" % l])]
                n = sum(v * v for v in z) ** 0.5
                out[l].append([v / n for v in z] if n > 0 else z)
        return out


def _size(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _dot(a, b):
    return sum(x * y for x, y in zip(a, b))


def load(source: Union[bytes, bytearray, str]) -> Model:
    """A Model from the bytes export_model() returned or a file's path."""
    if isinstance(source, str):
        with open(source, "rb") as f:
            source = f.read()
    return Model(bytes(source))
