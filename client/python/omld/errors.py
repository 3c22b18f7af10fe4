"""Exceptions of the omld client.

    OmldException                 root of everything this package raises
    +-- OmldError                 the daemon answered with a non-OK Status
    |   +-- InvalidArgument       code 1
    |   +-- NotFound              code 2
    |   +-- WrongDimension        code 3
    |   +-- NonFinite             code 4
    |   +-- ResourceExhausted     code 5
    |   +-- FrameTooLarge         code 6 (the daemon then closes the connection)
    |   +-- Malformed             code 7
    |   +-- Unavailable           code 8
    |   +-- Internal              code 9
    |   +-- Unauthenticated       code 10
    |   +-- PermissionDenied      code 11
    |   +-- Conflict              code 12
    +-- OmldConnectionError       transport: connect failed, I/O error, the
        |                         daemon closed, or an answer that makes no
        |                         sense; the Client is closed afterwards
        +-- OmldTimeout           no progress within the timeout
        +-- OmldProtocolError     an answer that is not a valid Response,
                                  has the wrong request id or body

A daemon error leaves the connection usable; a transport error does not.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

CODE_NAMES: Dict[int, str] = {
    0: "OK",
    1: "INVALID_ARGUMENT",
    2: "NOT_FOUND",
    3: "WRONG_DIMENSION",
    4: "NON_FINITE",
    5: "RESOURCE_EXHAUSTED",
    6: "FRAME_TOO_LARGE",
    7: "MALFORMED",
    8: "UNAVAILABLE",
    9: "INTERNAL",
    10: "UNAUTHENTICATED",
    11: "PERMISSION_DENIED",
    12: "CONFLICT",
    13: "NOT_PRIMARY",
}


def code_name(code: int) -> str:
    """The name of a Status.Code ("NOT_FOUND"), or "UNKNOWN_STATUS"."""
    return CODE_NAMES.get(code, "UNKNOWN_STATUS")


class OmldException(Exception):
    """Root of every exception raised by the omld client."""


class OmldError(OmldException):
    """The daemon refused a request: a non-OK Status.

    code        the Status.Code number (omld.proto)
    code_name   its name, e.g. "NOT_FOUND"
    message     the daemon's sentence
    field       path of the offending field ("put_items.items[3].features"),
                or "" when the error is not about one field
    request_id  the id of the request this answers
    model_version  as in the Response
    Batch helpers also set: batch_index (which request of the run failed),
    offset (index in the whole input of that batch's first element; the
    field path is relative to the batch), totals (a BatchResult of what
    the batches before it did) and applied_after (a list of (offset, count)
    of later batches that were in flight and were applied anyway).
    """

    code = -1

    def __init__(self, code: int, code_name_: str, message: str, field: str = "",
                 request_id: int = 0, model_version: int = 0) -> None:
        self.code = code
        self.code_name = code_name_
        self.message = message
        self.field = field
        self.request_id = request_id
        self.model_version = model_version
        self.batch_index: Optional[int] = None
        self.offset: Optional[int] = None
        self.totals: Any = None  # a BatchResult
        self.applied_after: List[Tuple[int, int]] = []
        super().__init__(code, code_name_, message, field)

    def __str__(self) -> str:
        where = " (field %s)" % self.field if self.field else ""
        text = "%s: %s%s" % (self.code_name, self.message or "(no message)", where)
        if self.offset is not None:
            text += " [batch %s, starting at input element %d]" % (self.batch_index, self.offset)
        return text

    def __reduce__(self) -> Any:
        return (type(self), (self.code, self.code_name, self.message, self.field,
                             self.request_id, self.model_version))


class InvalidArgument(OmldError):
    code = 1


class NotFound(OmldError):
    code = 2


class WrongDimension(OmldError):
    code = 3


class NonFinite(OmldError):
    code = 4


class ResourceExhausted(OmldError):
    code = 5


class FrameTooLarge(OmldError):
    code = 6


class Malformed(OmldError):
    code = 7


class Unavailable(OmldError):
    code = 8


class Internal(OmldError):
    code = 9


class Unauthenticated(OmldError):
    code = 10


class PermissionDenied(OmldError):
    code = 11


class Conflict(OmldError):
    code = 12


class NotPrimary(OmldError):
    """A write sent to a read replica; the message names the primary."""
    code = 13


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgument, NotFound, WrongDimension, NonFinite, ResourceExhausted, FrameTooLarge,
    Malformed, Unavailable, Internal, Unauthenticated, PermissionDenied, Conflict,
    NotPrimary)}


def error_for(code: int, message: str, field: str = "", request_id: int = 0,
              model_version: int = 0) -> OmldError:
    """The OmldError subclass instance for a Status code (OmldError itself
    for a code this client does not know)."""
    cls = _BY_CODE.get(code, OmldError)
    return cls(code, code_name(code), message, field, request_id, model_version)


class OmldConnectionError(OmldException):
    """The connection failed: connect, read or write error, the daemon
    closed, or a nonsensical answer. The Client is unusable afterwards."""


class OmldTimeout(OmldConnectionError):
    """No progress within the client's timeout (connect, send or receive)."""


class OmldProtocolError(OmldConnectionError):
    """An answer that is not a valid Response, or has the wrong request id
    or body."""
