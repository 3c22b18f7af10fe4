"""omld.shards - a retrieval or a classification fanned out over the n read
replicas started with shard = i/n, merged into exactly the answer one node
holding every item gives (omld.proto SHARDS).

    with omld.Shards.from_redis("redis://127.0.0.1:6379/omld", 2) as s:
        s.retrieve("item-1", k=10)
        s.classify([0.1] * 8, k=5)

Each shard answers ShardRetrieve: its offset + k nearest per head with
their distances. The merge is proto/shard_merge.c's, in the same double
arithmetic (Python floats are C doubles, math.exp is the C library's exp),
so scores equal one node's bit for bit: per head the nearest of the union
by (distance, store slot); Eq. 27 ranks a retrieval, the Eq. 23-25 vote a
classification (src/vote.c), its ties to the smaller store label id.
Answers under different model versions are asked again (~0.5 s, then
Unavailable). Not thread-safe: one Shards per thread.
"""
from __future__ import annotations

import math
import socket
import struct
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import _messages as M
from .client import Client, pb
from .errors import OmldConnectionError, OmldProtocolError, Unavailable
from .types import Classification, ClassScore, Hit, Ref, Retrieval, Where

Ids = Union[str, Iterable[str]]
VERSION_TRIES = 50  # answers of different model versions: asked again, 10 ms apart


def _f32(x: float) -> float:
    """x rounded to a C float, as the daemon's (float) casts do."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _eq23(d: float, d_min: float, d_max: float, alpha: float) -> float:
    """OAHU Eq. 23 (= Eq. 27), src/vote.c oml__eq23_score."""
    if not d_max > d_min:
        return alpha
    return math.exp(-(d - d_min) / (d_max - d_min)) * alpha


def _head_union(parts: Sequence[Any], h: int, ranked: int) -> List[Tuple[float, Any]]:
    """Head h's nearest `ranked` of the shards' lists, by (distance, slot)."""
    e = []
    for p in parts:
        sh = p.heads[h]
        if len(sh.dist) != len(sh.candidate):
            raise OmldProtocolError("a shard's answer has %d distances for %d candidates"
                                    % (len(sh.dist), len(sh.candidate)))
        for j, ci in enumerate(sh.candidate):
            if ci >= len(p.candidates):
                raise OmldProtocolError("a shard's answer names a candidate it does not hold")
            e.append((sh.dist[j], p.candidates[ci]))
    e.sort(key=lambda t: (t[0], t[1].order))
    return e[:ranked]


def _check_model(parts: Sequence[Any]) -> None:
    first = parts[0]
    for p in parts:
        if len(p.heads) != len(first.heads) or len(p.alpha) != len(p.heads) or \
                list(p.alpha) != list(first.alpha):
            raise Unavailable(8, "UNAVAILABLE", "the shards answered with different models "
                              "(shard %d of %d differs from shard %d): retry once they serve "
                              "the same version" % (p.shard, p.shards, first.shard))


def merge_retrieve(parts: Sequence[Any], k: int, offset: int = 0,
                   min_similarity: Optional[float] = None) -> List[Hit]:
    """The ShardRetrieveResponses parts merged as oml_shard_merge does."""
    _check_model(parts)
    best: Dict[int, Tuple[float, Any]] = {}  # slot -> (score, candidate): each item at its best
    for h in range(len(parts[0].heads)):
        m = _head_union(parts, h, offset + k)
        if not m:
            continue
        for d, c in m:
            s = _eq23(d, m[0][0], m[-1][0], parts[0].alpha[h])
            if c.order not in best or s > best[c.order][0]:
                best[c.order] = (s, c)
    ranked = sorted(best.values(), key=lambda t: (-t[0], t[1].order))
    floor = None if min_similarity is None else _f32(min_similarity)
    hits: List[Hit] = []
    for s, c in ranked[offset:]:
        if len(hits) == k:
            break
        if floor is not None and not c.similarity >= floor:
            continue
        hits.append(Hit(c.id, _f32(s), c.label if c.HasField("label") else None, c.similarity))
    return hits


def merge_classify(parts: Sequence[Any], k: int) -> Tuple[str, List[ClassScore]]:
    """The vote of oml_shard_classify (src/vote.c oml__vote): the label and
    the up to 16 classes with a non-zero score, best first."""
    _check_model(parts)
    sums: Dict[int, float] = {}  # store label id -> S(c), Eq. 24, summed in the node's order
    names: Dict[int, str] = {}
    for h in range(len(parts[0].heads)):
        m = _head_union(parts, h, k)
        if not m:
            continue
        d_min, d_max = m[0][0], m[-1][0]
        for d, c in m:
            if not c.HasField("label"):
                continue  # an unlabelled neighbour votes for nothing
            names[c.label_id] = c.label
            sums[c.label_id] = sums.get(c.label_id, 0.0) + _eq23(d, d_min, d_max,
                                                                 parts[0].alpha[h])
    if not sums:
        return "", []
    order = sorted(sums, key=lambda lab: (-sums[lab], lab))  # Eq. 25: ties to the smaller id
    scores = [ClassScore(names[lab], _f32(sums[lab])) for lab in order if sums[lab] > 0.0][:16]
    return names[order[0]], scores


def _redis_hgetall(host: str, port: int, key: str, timeout: float) -> Dict[str, str]:
    """HGETALL over RESP (a few lines instead of a Redis client dependency)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        arg = key.encode()
        s.sendall(b"*2\r\n$7\r\nHGETALL\r\n$%d\r\n%s\r\n" % (len(arg), arg))
        f = s.makefile("rb")
        head = f.readline()
        if head[:1] == b"-":
            raise OmldConnectionError("reading %s: %s" % (key, head[1:].decode().strip()))
        if head[:1] != b"*":
            raise OmldProtocolError("reading %s: not an array reply" % key)
        items = []
        for _ in range(int(head[1:])):
            size = f.readline()
            if size[:1] != b"$":
                raise OmldProtocolError("reading %s: not a bulk string" % key)
            items.append(f.read(int(size[1:]) + 2)[:-2].decode())
        return dict(zip(items[0::2], items[1::2]))


def shard_map(url: str, n: int, timeout: float = 30.0) -> List[str]:
    """The shard addresses in Redis (each shard writes its own into
    PREFIX:shards:n, field i): url "redis://HOST:PORT/PREFIX"."""
    rest = url[len("redis://"):] if url.startswith("redis://") else ""
    hostport, _, prefix = rest.partition("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit() or not prefix or n < 1:
        raise ValueError("shard_map: want redis://HOST:PORT/PREFIX and n >= 1, got %r and %r"
                         % (url, n))
    key = "%s:shards:%d" % (prefix, n)
    found = _redis_hgetall(host, int(port), key, timeout)
    for i in range(n):
        if str(i) not in found:
            raise OmldConnectionError("no shard %d of %d in %s (start a replica with shard = "
                                      "%d/%d)" % (i, n, key, i, n))
    return [found[str(i)] for i in range(n)]


class Shards:
    """One Client per shard; a query goes to every shard before any answer
    is read, so they work at once."""

    def __init__(self, servers: Sequence[str], timeout: Optional[float] = 30.0,
                 **client_args: Any) -> None:
        if not servers:
            raise ValueError("Shards: no shard")
        self.clients: List[Client] = []
        try:
            for s in servers:
                self.clients.append(Client(s, timeout=timeout, **client_args))
        except Exception:
            self.close()
            raise

    @classmethod
    def from_redis(cls, url: str, n: int, timeout: float = 30.0, **client_args: Any) -> "Shards":
        return cls(shard_map(url, n, timeout), timeout=timeout, **client_args)

    def close(self) -> None:
        for c in self.clients:
            c.close()

    def __enter__(self) -> "Shards":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _ask(self, req: Any) -> Tuple[List[Any], int]:
        """Every shard's ShardRetrieveResponse under one model version."""
        for _ in range(VERSION_TRIES):
            for c in self.clients:
                c.send(req)
            raw = [c.recv() for c in self.clients]  # every answer read, whatever one says
            answers = [c.check(r) for r in raw]
            for a in answers:
                if a.WhichOneof("body") != "shard_retrieve":
                    raise OmldProtocolError("a shard answered another operation")
            if len({a.model_version for a in answers}) == 1:
                return [a.shard_retrieve for a in answers], answers[0].model_version
            time.sleep(0.01)
        raise Unavailable(8, "UNAVAILABLE", "the shards serve different model versions (one "
                          "of them is behind): retry")

    def retrieve(self, query: Ref, k: int, labels: Optional[Ids] = None,
                 exclude_ids: Optional[Ids] = None, offset: int = 0,
                 min_similarity: Optional[float] = None,
                 where: Optional[Where] = None) -> Retrieval:
        """Client.retrieve over every shard (k > 0; no with_metadata)."""
        if k < 1:
            raise ValueError("Shards.retrieve: k must be at least 1")
        req = pb.Request()
        M._fill_retrieve(req.shard_retrieve.retrieve, query, k, None, labels, exclude_ids,
                         offset, min_similarity, where, False)
        parts, version = self._ask(req)
        return Retrieval(merge_retrieve(parts, k, offset, min_similarity), version)

    def classify(self, query: Ref, k: int, where: Optional[Where] = None) -> Classification:
        """Client.classify over every shard (k > 0)."""
        if k < 1:
            raise ValueError("Shards.classify: k must be at least 1")
        req = pb.Request()
        M._fill_retrieve(req.shard_retrieve.retrieve, query, k, None, None, None, 0, None,
                         where, False)
        parts, version = self._ask(req)
        label, scores = merge_classify(parts, k)
        return Classification(label, scores, version)
