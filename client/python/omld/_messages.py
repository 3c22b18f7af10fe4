"""omld._messages - every operation as a request and an answer parser, no I/O.

Each public function here builds one operation's Request from Python
arguments (checking them: TypeError / ValueError before anything is sent)
and returns an Op: the Request, the Response body an OK answer must carry,
and the function that turns that Response into the result dataclass of
omld.types. The blocking Client runs an Op with send + receive, the
AsyncClient with a future; neither builds a message itself, so the two
offer the same operations with the same arguments and results.
"""
from __future__ import annotations

from dataclasses import fields
from typing import Any, Callable, Generic, Iterable, List, Mapping, Optional, TypeVar, Union

from ._wire import PbRequest, PbResponse, Server, pb
from .errors import code_name
from .types import (CheckpointResult, Classification, ClassScore, CountResult, DeleteResult,
                    Embedding,
                    Health, Hit, Item, ItemPage, ItemLike, JobInfo, ModelInfo, Pair, PairLike, PairResult,
                    PromoteResult, PutResult, Ref, Rejected, Retrieval, RollbackResult, Status,
                    TrainParams, TrainStartResult, Triplet, TripletLike, TripletResult,
                    Verification, Where)

T = TypeVar("T")
Ids = Union[str, Iterable[str]]


class Op(Generic[T]):
    """One operation ready to send: request, the body name an OK answer
    carries (expect), and parse(response) -> the result."""
    __slots__ = ("request", "expect", "parse")

    def __init__(self, request: PbRequest, expect: str,
                 parse: Callable[[PbResponse], T]) -> None:
        self.request = request
        self.expect = expect
        self.parse = parse


# ------------------------------------------------------------ input conversion

def _floats(x, what):
    """A list of Python floats from a list, tuple, array('f'), numpy array,
    or any iterable of numbers. Non-finite values are passed on (the daemon
    answers NON_FINITE)."""
    if isinstance(x, (str, bytes, bytearray)):
        raise TypeError("%s: expected a sequence of floats, got %s" % (what, type(x).__name__))
    ndim = getattr(x, "ndim", None)
    if ndim is not None:  # numpy (optional)
        if ndim != 1:
            raise ValueError("%s: expected a 1-D vector, got %d dimensions" % (what, ndim))
        x = x.tolist()
    try:
        return [float(v) for v in x]
    except TypeError:
        raise TypeError("%s: expected a sequence of floats, got %s" % (what, type(x).__name__))


def _set_ref(msg, x, what):
    """Fills an ItemRef: str -> id, a sequence of floats -> inline vector."""
    if isinstance(x, str):
        msg.id = x
    elif isinstance(x, Item):
        msg.id = x.id
    else:
        msg.vector.values.extend(_floats(x, what))
        if not msg.HasField("vector"):  # an empty vector still selects the oneof
            msg.vector.SetInParent()


def _set_item(msg, x, what):
    if isinstance(x, Item):
        iid, feats, label, meta = x.id, x.features, x.label, x.metadata
    elif isinstance(x, dict):
        iid, feats, label, meta = x.get("id"), x.get("features"), x.get("label"), x.get("metadata")
    elif isinstance(x, (tuple, list)) and len(x) in (2, 3, 4):
        iid, feats = x[0], x[1]
        label, meta = (tuple(x[2:]) + (None, None))[:2]
    else:
        raise TypeError("%s: expected an Item, a dict or an (id, features[, label[, metadata]]) "
                        "tuple" % what)
    if not isinstance(iid, str):
        raise TypeError("%s.id: expected str, got %s" % (what, type(iid).__name__))
    msg.id = iid
    msg.features.extend(_floats(feats, what + ".features"))
    if label is not None:
        msg.label = label
    for key, value in (meta or {}).items():
        kv = msg.metadata.add()
        kv.key = _str(key, what + ".metadata key")
        kv.value = _str(value, what + ".metadata[%r]" % key)


def _fill_where(repeated, where, what="metadata"):
    """A metadata filter (types.Where) into repeated MetadataConditions."""
    for key, values in (where or {}).items():
        c = repeated.add()
        c.key = _str(key, what + " key")
        c.values.extend([values] if isinstance(values, str) else
                        [_str(v, "%s[%r]" % (what, key)) for v in values])


def _metadata_of(it):
    """An Item message's metadata as a dict, None when it has none."""
    return {kv.key: kv.value for kv in it.metadata} or None


def _set_triplet(msg, x, what):
    w = None
    if isinstance(x, Triplet):
        a, p, n, w = x.anchor, x.positive, x.negative, x.weight
    elif isinstance(x, dict):
        a, p, n, w = x.get("anchor"), x.get("positive"), x.get("negative"), x.get("weight")
    else:
        try:
            a, p, n, *rest = x
        except (TypeError, ValueError):
            rest = [None, None]
        if len(rest) > 1:
            raise TypeError("%s: expected a Triplet or an (anchor, positive, negative[, weight]) "
                            "tuple" % what)
        w = rest[0] if rest else None
    _set_ref(msg.anchor, a, what + ".anchor")
    _set_ref(msg.positive, p, what + ".positive")
    _set_ref(msg.negative, n, what + ".negative")
    if w is not None:
        msg.weight = float(w)


_RELATIONS = {"similar": 1, "dissimilar": 2, "SIMILAR": 1, "DISSIMILAR": 2}


def _set_pair(msg, x, what):
    if isinstance(x, Pair):
        a, b, rel = x.a, x.b, x.similar
    elif isinstance(x, dict):
        a, b, rel = x.get("a"), x.get("b"), x.get("similar", x.get("relation"))
    else:
        try:
            a, b, rel = x
        except (TypeError, ValueError):
            raise TypeError("%s: expected a Pair or an (a, b, similar) tuple" % what)
    _set_ref(msg.a, a, what + ".a")
    _set_ref(msg.b, b, what + ".b")
    if isinstance(rel, str):
        if rel not in _RELATIONS:
            raise ValueError("%s: relation must be 'similar' or 'dissimilar'" % what)
        msg.relation = _RELATIONS[rel]
    elif rel is None:
        msg.relation = 0  # RELATION_UNSPECIFIED: the daemon refuses it
    else:
        msg.relation = 1 if rel else 2


def _batch_request(body, repeated, fill, elements):
    """A Request whose body `body` holds one `repeated` entry per element,
    each filled by fill(msg, element, path)."""
    req = pb.Request()
    msg = getattr(req, body)
    entries = getattr(msg, repeated)
    for i, x in enumerate(elements):
        fill(entries.add(), x, "%s[%d]" % (repeated, i))
    msg.SetInParent()
    return req


def items_request(items: Iterable[ItemLike]) -> PbRequest:
    return _batch_request("put_items", "items", _set_item, items)


def triplets_request(triplets: Iterable[TripletLike]) -> PbRequest:
    return _batch_request("add_triplets", "triplets", _set_triplet, triplets)


def pairs_request(pairs: Iterable[PairLike]) -> PbRequest:
    return _batch_request("add_pairs", "pairs", _set_pair, pairs)


def _write_options(body, idempotency_key, wait_for_view):
    """The IDEMPOTENCY and WAITING FOR THE VIEW fields of a write (omld.proto)."""
    if idempotency_key is not None:
        if not isinstance(idempotency_key, str) or not idempotency_key:
            raise ValueError("idempotency_key must be a non-empty str")
        body.idempotency_key = idempotency_key
    body.wait_for_view = bool(wait_for_view)


def _ids(ids):
    if isinstance(ids, str):
        return [ids]
    return list(ids)


def _str(x, what):
    if not isinstance(x, str):
        raise TypeError("%s: expected str, got %s" % (what, type(x).__name__))
    return x


def _uint(x, what):
    if isinstance(x, bool) or not isinstance(x, int) or x < 0:
        raise TypeError("%s: expected an int >= 0, got %r" % (what, x))
    return x


def _refs(queries):
    """The queries of a batch: a list of ids and vectors (a 2-D array is
    its rows; one id or one vector alone is not a batch)."""
    if isinstance(queries, (str, bytes)):
        raise TypeError("queries: a list of ids or vectors, not one id")
    out = list(queries)
    if out and isinstance(out[0], (int, float)):
        raise TypeError("queries: a list of ids or vectors, not one vector")
    return out


def _fill_classify(msg, query, k, model, where=None):
    """msg: a ClassifyRequest (alone or in a batch)."""
    _set_ref(msg.query, query, "query")
    if k is not None:
        msg.k = k
    if model is not None:
        msg.model = model
    _fill_where(msg.metadata, where)


def _fill_retrieve(msg, query, k, model, labels, exclude_ids, offset, min_similarity, where,
                   with_metadata=False):
    """msg: a RetrieveRequest (alone or in a batch), or a RecommendRequest
    (query None: its examples are set apart)."""
    if query is not None:
        _set_ref(msg.query, query, "query")
    if k is not None:
        msg.k = k
    if model is not None:
        msg.model = model
    msg.labels.extend(_ids(labels or []))
    msg.exclude_ids.extend(_ids(exclude_ids or []))
    msg.offset = offset
    if min_similarity is not None:
        msg.min_similarity = min_similarity
    _fill_where(msg.metadata, where)
    msg.with_metadata = bool(with_metadata)


# ------------------------------------------------------------ answer conversion

def _classification_of(b, version):
    """b: a ClassifyResponse."""
    return Classification(b.label, [ClassScore(s.label, s.score) for s in b.scores], version)


def classification(r: PbResponse) -> Classification:
    return _classification_of(r.classify, r.model_version)


def _retrieval_of(b, version):
    """b: a RetrieveResponse (or RecommendResponse)."""
    return Retrieval([Hit(h.id, h.score, h.label if h.HasField("label") else None, h.similarity,
                          _metadata_of(h)) for h in b.hits], version)


def _copy(cls, msg, **extra):
    """cls (a dataclass) from the fields of msg of the same names; repeated
    fields become lists; extra overrides."""
    have = msg.DESCRIPTOR.fields_by_name
    out = {}
    for f in fields(cls):
        if f.name in extra:
            out[f.name] = extra[f.name]
        elif f.name in have:
            v = getattr(msg, f.name)
            out[f.name] = list(v) if have[f.name].label == have[f.name].LABEL_REPEATED else v
    return cls(**out)


def _job(b, version):
    """b: a JobInfo; its state as a name (the number if this client does
    not know it)."""
    try:
        state = pb.JobInfo.State.Name(b.state)
    except ValueError:
        state = str(b.state)
    return _copy(JobInfo, b, state=state, model_version=version)


# ------------------------------------------------------------ items

def put_items(items: Iterable[ItemLike], idempotency_key: Optional[str],
              wait_for_view: bool) -> Op[PutResult]:
    req = items_request(items)
    _write_options(req.put_items, idempotency_key, wait_for_view)
    return Op(req, "put_items", lambda r: PutResult(
        r.put_items.created, r.put_items.replaced, r.model_version, r.put_items.duplicate))


def delete_items(ids: Optional[Ids], missing_ok: bool, labels: Optional[Ids] = None,
                 where: Optional[Where] = None) -> Op[DeleteResult]:
    req = pb.Request()
    req.delete_items.ids.extend(_ids(ids or []))
    req.delete_items.missing_ok = bool(missing_ok)
    req.delete_items.labels.extend(_ids(labels or []))
    _fill_where(req.delete_items.metadata, where)
    req.delete_items.SetInParent()
    return Op(req, "delete_items", lambda r: DeleteResult(r.delete_items.deleted, r.model_version))


def _item_of(it) -> Item:
    return Item(it.id, list(it.features), it.label if it.HasField("label") else None,
                _metadata_of(it))


def get_items(ids: Ids) -> Op[List[Item]]:
    req = pb.Request()
    req.get_items.ids.extend(_ids(ids))
    req.get_items.SetInParent()
    return Op(req, "get_items", lambda r: [_item_of(it) for it in r.get_items.items])


def list_items(cursor: int, limit: Optional[int], labels: Optional[Ids], where: Optional[Where],
               with_features: bool) -> Op[ItemPage]:
    req = pb.Request()
    req.list_items.cursor = int(cursor)
    if limit is not None:
        req.list_items.limit = int(limit)
    req.list_items.labels.extend(_ids(labels or []))
    _fill_where(req.list_items.metadata, where)
    req.list_items.with_features = bool(with_features)
    req.list_items.SetInParent()
    return Op(req, "list_items", lambda r: ItemPage(
        [_item_of(it) for it in r.list_items.items], r.list_items.next_cursor,
        r.list_items.total, r.model_version))


def count_items(labels: Optional[Ids], where: Optional[Where]) -> Op[CountResult]:
    req = pb.Request()
    req.count_items.labels.extend(_ids(labels or []))
    _fill_where(req.count_items.metadata, where)
    req.count_items.SetInParent()
    return Op(req, "count_items", lambda r: CountResult(r.count_items.count, r.count_items.total,
                                                         r.model_version))


# ------------------------------------------------------------ constraints

def add_triplets(triplets: Iterable[TripletLike], partial: bool, idempotency_key: Optional[str],
                 wait_for_view: bool) -> Op[TripletResult]:
    req = triplets_request(triplets)
    req.add_triplets.partial = bool(partial)
    _write_options(req.add_triplets, idempotency_key, wait_for_view)

    def parse(r):
        a = r.add_triplets
        return TripletResult(a.accepted, a.queue_depth, r.model_version,
                             [Rejected(e.index, code_name(e.code), e.field, e.message)
                              for e in a.rejected], a.duplicate)
    return Op(req, "add_triplets", parse)


def add_pairs(pairs: Iterable[PairLike], idempotency_key: Optional[str],
              wait_for_view: bool) -> Op[PairResult]:
    req = pairs_request(pairs)
    _write_options(req.add_pairs, idempotency_key, wait_for_view)
    return Op(req, "add_pairs", lambda r: PairResult(
        r.add_pairs.accepted, r.add_pairs.derived_triplets, r.model_version,
        r.add_pairs.duplicate))


# ------------------------------------------------------------ queries

def classify(query: Ref, k: Optional[int], model: Optional[str],
             where: Optional[Where] = None) -> Op[Classification]:
    req = pb.Request()
    _fill_classify(req.classify, query, k, model, where)
    return Op(req, "classify", classification)


def verify(a: Ref, b: Ref, threshold: Optional[float], model: Optional[str]) -> Op[Verification]:
    req = pb.Request()
    _set_ref(req.verify.a, a, "a")
    _set_ref(req.verify.b, b, "b")
    if threshold is not None:
        req.verify.threshold = threshold
    if model is not None:
        req.verify.model = model
    return Op(req, "verify", lambda r: Verification(
        r.verify.similar, r.verify.score, list(r.verify.distances), r.model_version))


def retrieve(query: Ref, k: Optional[int], model: Optional[str], labels: Optional[Ids],
             exclude_ids: Optional[Ids], offset: int, min_similarity: Optional[float],
             where: Optional[Where] = None, with_metadata: bool = False) -> Op[Retrieval]:
    req = pb.Request()
    _fill_retrieve(req.retrieve, query, k, model, labels, exclude_ids, offset, min_similarity,
                   where, with_metadata)
    return Op(req, "retrieve", lambda r: _retrieval_of(r.retrieve, r.model_version))


def recommend(positive: Iterable[Ref], negative: Iterable[Ref], k: Optional[int],
              model: Optional[str], labels: Optional[Ids], exclude_ids: Optional[Ids],
              offset: int, min_similarity: Optional[float],
              where: Optional[Where] = None, with_metadata: bool = False) -> Op[Retrieval]:
    req = pb.Request()
    m = req.recommend
    positive, negative = list(positive), list(negative)
    if not positive:
        raise ValueError("recommend needs at least one positive example")
    for i, x in enumerate(positive):
        _set_ref(m.positive.add(), x, "positive[%d]" % i)
    for i, x in enumerate(negative):
        _set_ref(m.negative.add(), x, "negative[%d]" % i)
    _fill_retrieve(m, None, k, model, labels, exclude_ids, offset, min_similarity, where,
                   with_metadata)
    return Op(req, "recommend", lambda r: _retrieval_of(r.recommend, r.model_version))


def classify_batch(queries: Iterable[Ref], k: Optional[int],
                   model: Optional[str]) -> Op[List[Classification]]:
    req = pb.Request()
    for q in _refs(queries):
        _fill_classify(req.classify_batch.queries.add(), q, k, model)
    req.classify_batch.SetInParent()
    return Op(req, "classify_batch", lambda r: [
        _classification_of(a, r.model_version) for a in r.classify_batch.answers])


def retrieve_batch(queries: Iterable[Ref], k: Optional[int], model: Optional[str],
                   labels: Optional[Ids], exclude_ids: Optional[Ids], offset: int,
                   min_similarity: Optional[float], where: Optional[Where] = None,
                   with_metadata: bool = False) -> Op[List[Retrieval]]:
    req = pb.Request()
    for q in _refs(queries):
        _fill_retrieve(req.retrieve_batch.queries.add(), q, k, model, labels, exclude_ids,
                       offset, min_similarity, where, with_metadata)
    req.retrieve_batch.SetInParent()
    return Op(req, "retrieve_batch", lambda r: [
        _retrieval_of(a, r.model_version) for a in r.retrieve_batch.answers])


def embed(item: Ref, model: Optional[str]) -> Op[Embedding]:
    req = pb.Request()
    _set_ref(req.embed.item, item, "item")
    if model is not None:
        req.embed.model = model
    return Op(req, "embed", lambda r: Embedding(
        [list(h.values) for h in r.embed.heads], list(r.embed.alpha), r.model_version))


def export_model(model: Optional[str]) -> Op[bytes]:
    """The serving model as an OMLSNAP file (omld.model.load reads it)."""
    req = pb.Request()
    req.export_model.SetInParent()
    if model is not None:
        req.export_model.model = model
    return Op(req, "export_model", lambda r: bytes(r.export_model.model))


# ------------------------------------------------------------ operations

def _empty(body):
    """A Request whose body is the empty message `body`."""
    req = pb.Request()
    getattr(req, body).SetInParent()
    return req


def status() -> Op[Status]:
    return Op(_empty("status"), "status_info", lambda r: _copy(Status, r.status_info))


def health() -> Op[Health]:
    return Op(_empty("health"), "health", lambda r: Health(
        r.health.live, r.health.ready, r.health.draining, r.model_version))


def checkpoint() -> Op[CheckpointResult]:
    return Op(_empty("checkpoint"), "checkpoint", lambda r: CheckpointResult(
        r.checkpoint.path, r.checkpoint.bytes, r.checkpoint.triplets_applied, r.model_version))


def auth(token: str) -> Op[bool]:
    req = pb.Request()
    req.auth.token = _str(token, "token")
    req.auth.SetInParent()
    return Op(req, "auth", lambda r: bool(r.auth.read_write))


def learned(s: Status, applied: Optional[int]) -> bool:
    """wait_learned's condition: the learner queue is empty, at least
    `applied` triplets are applied (if given) and the serving view has
    learned them all."""
    return (s.queue_depth == 0 and (applied is None or s.triplets_applied >= applied)
            and s.view_triplets >= s.triplets_applied)


def not_learned(server: Server, timeout: float, s: Status) -> str:
    return ("%s: learner not caught up within %ss (applied %d, view %d, queue %d)"
            % (server, timeout, s.triplets_applied, s.view_triplets, s.queue_depth))


# ------------------------------------------------------------ trainer

def _params(msg, params):
    """Fills a TrainParams message from a TrainParams or a dict of its
    fields (an unknown key is a TypeError); None leaves a field unset."""
    if isinstance(params, Mapping):
        params = TrainParams(**params)
    elif not isinstance(params, TrainParams):
        raise TypeError("params: expected omld.TrainParams or a dict, got %s"
                        % type(params).__name__)
    for f in fields(TrainParams):
        v = getattr(params, f.name)
        if v is not None:
            setattr(msg, f.name, v)
    msg.SetInParent()


def train_start(method: str, variant: Optional[str],
                params: Union[TrainParams, Mapping[str, Any], None], labels: Optional[Ids],
                name: Optional[str]) -> Op[TrainStartResult]:
    req = pb.Request()
    t = req.train_start
    t.method = _str(method, "method")
    t.SetInParent()
    if variant is not None:
        t.variant = _str(variant, "variant")
    if params is not None:
        _params(t.params, params)
    t.labels.extend(_ids(labels or []))
    if name is not None:
        t.name = _str(name, "name")
    return Op(req, "train_start", lambda r: TrainStartResult(
        r.train_start.job_id, r.train_start.model, r.train_start.items, r.train_start.classes,
        r.model_version))


def train_status(job_id: int) -> Op[JobInfo]:
    req = pb.Request()
    req.train_status.job_id = _uint(job_id, "job_id")
    req.train_status.SetInParent()
    return Op(req, "train_status", lambda r: _job(r.train_status.job, r.model_version))


def train_cancel(job_id: int) -> Op[JobInfo]:
    req = pb.Request()
    req.train_cancel.job_id = _uint(job_id, "job_id")
    req.train_cancel.SetInParent()
    return Op(req, "train_cancel", lambda r: _job(r.train_cancel.job, r.model_version))


def list_models() -> Op[List[ModelInfo]]:
    return Op(_empty("list_models"), "list_models", lambda r: [
        _copy(ModelInfo, m) for m in r.list_models.models])


def promote(name: str) -> Op[PromoteResult]:
    req = pb.Request()
    req.promote.name = _str(name, "name")
    req.promote.SetInParent()
    return Op(req, "promote", lambda r: PromoteResult(r.promote.model_version, r.promote.depth))


def rollback() -> Op[RollbackResult]:
    return Op(_empty("rollback"), "rollback", lambda r: RollbackResult(
        r.rollback.model_version, r.rollback.undone))


def delete_model(name: str) -> Op[None]:
    req = pb.Request()
    req.delete_model.name = _str(name, "name")
    req.delete_model.SetInParent()
    return Op(req, "delete_model", lambda r: None)


def job_not_finished(server: Server, timeout: float, job: JobInfo) -> str:
    return ("%s: job %d still %s after %ss (epoch %d of %d)"
            % (server, job.id, job.state, timeout, job.epoch, job.epochs))

