"""Inputs and results of the omld client: small dataclasses.

Every result carries model_version, the version of the serving view that
answered (or the newest published one, for ingest; see omld.proto).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional


# ------------------------------------------------------------ inputs (and get_items)

@dataclass
class Item:
    """A stored item: id, feature vector (dim floats) and optional label.
    put_items also takes (id, features), (id, features, label) tuples and
    dicts with those keys."""
    id: str
    features: List[float]
    label: Optional[str] = None


@dataclass
class Triplet:
    """anchor is more like positive than like negative. Each member is an
    id (str) or an inline vector (a sequence of floats). add_triplets also
    takes plain (anchor, positive, negative) tuples."""
    anchor: object
    positive: object
    negative: object


@dataclass
class Pair:
    """a and b (ids) are similar (True) or dissimilar (False). add_pairs
    also takes (a, b, similar) tuples; similar may be a bool or
    "similar" / "dissimilar"."""
    a: object
    b: object
    similar: bool = True


# ------------------------------------------------------------ results

@dataclass
class PutResult:
    created: int
    replaced: int
    model_version: int = 0
    duplicate: bool = False  # the idempotency key was applied before: nothing changed


@dataclass
class DeleteResult:
    deleted: int
    model_version: int = 0


@dataclass
class Rejected:
    """A triplet a partial batch left out, with the error it alone would have had."""
    index: int
    code: str        # e.g. "NOT_FOUND"
    field: str       # e.g. "add_triplets.triplets[3].anchor.id"
    message: str


@dataclass
class TripletResult:
    accepted: int
    queue_depth: int
    model_version: int = 0
    rejected: List[Rejected] = field(default_factory=list)  # partial batches only
    duplicate: bool = False  # the idempotency key was applied before: nothing learned again


@dataclass
class PairResult:
    accepted: int
    derived_triplets: int
    model_version: int = 0
    duplicate: bool = False  # the idempotency key was applied before: nothing changed


@dataclass
class ClassScore:
    label: str
    score: float


@dataclass
class Classification:
    label: str                       # the argmax; "" if there are no labelled items
    scores: List[ClassScore] = field(default_factory=list)  # best first
    model_version: int = 0


@dataclass
class Verification:
    similar: bool
    score: float                     # the alpha sum in [0, 1]
    distances: List[float] = field(default_factory=list)  # D per head
    model_version: int = 0


@dataclass
class Hit:
    id: str
    score: float                 # OAHU Eq. 27: a share among the hits, changes with k
    label: Optional[str] = None
    similarity: float = 0.0      # the pair's, in [-1, 1], whatever k is


@dataclass
class Retrieval:
    """The hits, best first; iterable and indexable like a list."""
    hits: List[Hit] = field(default_factory=list)
    model_version: int = 0

    def __iter__(self):
        return iter(self.hits)

    def __len__(self):
        return len(self.hits)

    def __getitem__(self, i):
        return self.hits[i]

    @property
    def ids(self):
        return [h.id for h in self.hits]


@dataclass
class Embedding:
    heads: List[List[float]]         # L+1 unit vectors, l = 0..L
    alpha: List[float]               # head weights, sum 1
    model_version: int = 0


@dataclass
class Status:
    version: str = ""
    uptime_ms: int = 0
    dim: int = 0
    depth: int = 0
    alpha: List[float] = field(default_factory=list)
    items: int = 0
    triplets_received: int = 0
    triplets_applied: int = 0
    queue_depth: int = 0
    snapshot_age_ms: int = 0
    model_version: int = 0
    view_triplets: int = 0
    preset: str = ""
    seed: int = 0
    utilisation: float = 0.0
    triplet_accuracy: float = 0.0
    recent_accuracy: float = float("nan")  # newest 1,000 triplets (NaN before any)
    triplets_rehearsed: int = 0
    replay_triplets: int = 0


@dataclass
class Health:
    live: bool
    ready: bool
    draining: bool
    model_version: int = 0


@dataclass
class CheckpointResult:
    path: str
    bytes: int
    triplets_applied: int
    model_version: int = 0


@dataclass
class BatchResult:
    """Sums over the answers of a batch helper run."""
    requests: int = 0                # requests answered OK
    done: int = 0                    # input elements acknowledged
    created: int = 0                 # put_items
    replaced: int = 0
    accepted: int = 0                # add_triplets / add_pairs
    derived_triplets: int = 0        # add_pairs
    queue_depth: int = 0             # add_triplets: of the last answer
    model_version: int = 0           # of the last answer
