"""Inputs and results of the omld client: small dataclasses.

Every result carries model_version, the version of the serving view that
answered (or the newest published one, for ingest; see omld.proto).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

# ------------------------------------------------------------ argument types

#: A feature vector: any 1-D sequence of floats (list, tuple, array('f'), a
#: numpy array) of the daemon's dimension.
Vector = Union[Sequence[float], Any]
#: Names an item: a stored id (str), an Item (its id) or an inline vector.
Ref = Union[str, "Item", Vector]
#: An item to store: an Item, a dict with id / features / label / metadata,
#: or an (id, features), (id, features, label) or (id, features, label,
#: metadata) tuple.
ItemLike = Union["Item", Mapping[str, Any], Tuple[str, Vector], Tuple[str, Vector, Optional[str]],
                 Tuple[str, Vector, Optional[str], Mapping[str, str]]]
#: A metadata filter (omld.proto METADATA): key -> value (equality) or
#: key -> several values (set membership); every key must match (AND).
#: {"color": ["red", "blue"], "size": "L"}
Where = Mapping[str, Union[str, Sequence[str]]]
#: A triplet: a Triplet, an (anchor, positive, negative) tuple or a dict.
TripletLike = Union["Triplet", Tuple[Ref, Ref, Ref], Tuple[Ref, Ref, Ref, float], Mapping[str, Any]]
#: A pair: a Pair, an (a, b, similar) tuple (similar: bool or "similar" /
#: "dissimilar") or a dict.
PairLike = Union["Pair", Tuple[Ref, Ref, Union[bool, str]], Mapping[str, Any]]


# ------------------------------------------------------------ inputs (and get_items)

@dataclass
class Item:
    """A stored item: id, feature vector (dim floats), optional label and
    metadata (small str -> str key/values, bounded by the daemon's
    max_metadata_* options). put_items also takes (id, features[, label[,
    metadata]]) tuples and dicts with those keys."""
    id: str
    features: List[float]
    label: Optional[str] = None
    metadata: Optional[Dict[str, str]] = None


@dataclass
class Triplet:
    """anchor is more like positive than like negative. Each member is an
    id (str) or an inline vector (a sequence of floats). weight (None: the
    daemon's 1) scales how far the triplet moves the model, in (0, 100],
    e.g. a click's confidence. add_triplets also takes plain (anchor,
    positive, negative) or (anchor, positive, negative, weight) tuples."""
    anchor: Ref
    positive: Ref
    negative: Ref
    weight: Optional[float] = None


@dataclass
class Pair:
    """a and b (ids) are similar (True) or dissimilar (False). add_pairs
    also takes (a, b, similar) tuples; similar may be a bool or
    "similar" / "dissimilar"."""
    a: Ref
    b: Ref
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
class ItemPage:
    """A page of ListItems: items in store order; next_cursor (0: the last
    page) goes back as cursor for the next one; total: live items now."""
    items: List["Item"]
    next_cursor: int
    total: int
    model_version: int = 0


@dataclass
class CountResult:
    count: int       # items matching the filter
    total: int       # live items in the store
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
    metadata: Optional[Dict[str, str]] = None  # with with_metadata=True (None: none)


@dataclass
class Retrieval:
    """The hits, best first; iterable and indexable like a list."""
    hits: List[Hit] = field(default_factory=list)
    model_version: int = 0

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, i: int) -> Hit:
        return self.hits[i]

    @property
    def ids(self) -> List[str]:
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
    duplicates: int = 0          # writes answered from their idempotency key


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


# ------------------------------------------------------------ trainer (batch models)

@dataclass
class TrainParams:
    """Hyper-parameters of a training job (TrainParams in omld.proto).
    None (or 0 for the plain numbers) means the method's default; which
    apply depends on the method. train_start also takes a dict with these
    keys."""
    epochs: int = 0                  # 0: 20; at most 10000
    learning_rate: float = 0.0
    depth: Optional[int] = None      # trunk depth, 0 .. the live model's L
    batch_m: int = 0                 # classes per batch (0: 8)
    batch_k: int = 0                 # items per class (0: 16)
    margin: Optional[float] = None
    gamma1: Optional[float] = None
    gamma2: Optional[float] = None
    lambda1: Optional[float] = None
    lambda2: Optional[float] = None
    seed: Optional[int] = None       # None: 1
    validation_fraction: Optional[float] = None  # held-out share, [0, 0.5]; None: 0.1
    patience: int = 0                # epochs without a better val R@1 (0: 3)


@dataclass
class TrainStartResult:
    job_id: int                      # 1, 2, ... per daemon run
    model: str                       # the name the model will have
    items: int                       # training items copied
    classes: int                     # distinct labels among them
    model_version: int = 0


@dataclass
class JobInfo:
    """One training job (JobInfo in omld.proto); state is the name:
    "QUEUED", "RUNNING", "DONE", "FAILED" or "CANCELLED"."""
    id: int
    method: str
    variant: str
    state: str
    epoch: int = 0                   # 1-based epoch in progress (or last run)
    epochs: int = 0                  # the cap
    step: int = 0
    steps_total: int = 0
    loss: float = 0.0                # mean loss of the current epoch so far
    val_r1: float = float("nan")     # last validation Recall@1 (NaN: none yet)
    best_val_r1: float = float("nan")
    eta_s: float = -1.0              # estimated seconds left (-1: unknown)
    elapsed_s: float = 0.0
    error: str = ""                  # FAILED: what went wrong
    model: str = ""                  # the model's name (made when DONE)
    items: int = 0
    classes: int = 0
    cancel_requested: bool = False
    model_version: int = 0

    @property
    def finished(self) -> bool:
        """DONE, FAILED or CANCELLED: the job will not change any more."""
        return self.state not in ("QUEUED", "RUNNING", "STATE_UNSPECIFIED")


@dataclass
class ModelInfo:
    """A named batch model (ModelInfo in omld.proto)."""
    name: str
    method: str
    variant: str
    depth: int
    created_ms: int = 0              # Unix time, milliseconds
    val_r1: float = float("nan")     # best validation Recall@1 (NaN: no validation)
    items_indexed: int = 0           # items in its serving index
    trained_items: int = 0
    epochs_run: int = 0
    job_id: int = 0                  # 0 if loaded from disk
    index_version: int = 0           # the model_version its queries carry


@dataclass
class PromoteResult:
    model_version: int               # the live view now serving the promoted model
    depth: int


@dataclass
class RollbackResult:
    model_version: int
    undone: str                      # name of the promoted model undone
