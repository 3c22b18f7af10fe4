"""Finds (or generates) omld_pb2, the protoc output for proto/omld.proto.

Generated code is never committed. The module is looked for, in order:

1. ``omld/omld_pb2.py`` inside this package (an installed copy: the wheel
   that ``pip install ./client/python`` builds and the CMake install rule
   put it there; the build backend, ../_backend/omld_backend.py, runs
   ``make_pb2`` below);
2. ``$OMLD_PB2_DIR/omld_pb2.py`` (the build tree: CMake generates it into
   ``<build>/client/python/`` and the tests set this variable);
3. a cache: if ``protoc`` is available (``$OMLD_PROTOC`` or ``protoc`` on
   PATH) and the .proto is found (``$OMLD_PROTO``, or ``proto/omld.proto``
   of the source tree this package sits in), it is generated once into
   ``$OMLD_PB2_CACHE`` (default ``$XDG_CACHE_HOME/omld-python`` or
   ``~/.cache/omld-python``), in a directory named after the hash of the
   .proto so that an edited contract regenerates.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

_HERE = os.path.dirname(os.path.abspath(__file__))
_MODULE = None


def _source_proto():
    path = os.environ.get("OMLD_PROTO")
    if path:
        return path
    # client/python/omld/_pb.py -> <root>/proto/omld.proto
    return os.path.normpath(os.path.join(_HERE, "..", "..", "..", "proto", "omld.proto"))


def _load_file(path):
    if "omld_pb2" in sys.modules:  # already imported (e.g. by the caller)
        return sys.modules["omld_pb2"]
    spec = importlib.util.spec_from_file_location("omld_pb2", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["omld_pb2"] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules["omld_pb2"]
        raise
    return mod


def make_pb2(out_dir, proto=None, protoc=None):
    """Runs protoc --python_out=out_dir on omld.proto; returns the path of
    the generated omld_pb2.py."""
    proto = proto or _source_proto()
    protoc = protoc or os.environ.get("OMLD_PROTOC") or shutil.which("protoc")
    if not protoc:
        raise ImportError("omld: protoc not found (install protobuf-compiler or set OMLD_PROTOC)")
    if not os.path.isfile(proto):
        raise ImportError("omld: %s not found (set OMLD_PROTO)" % proto)
    os.makedirs(out_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=out_dir, prefix=".gen-")
    try:
        subprocess.run([protoc, "--proto_path=" + os.path.dirname(os.path.abspath(proto)),
                        "--python_out=" + tmp, os.path.abspath(proto)],
                       check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        dst = os.path.join(out_dir, "omld_pb2.py")
        os.replace(os.path.join(tmp, "omld_pb2.py"), dst)  # atomic: racing importers agree
        return dst
    except subprocess.CalledProcessError as e:
        raise ImportError("omld: protoc failed: %s" % e.stderr.decode(errors="replace").strip())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _cached():
    proto = _source_proto()
    if not os.path.isfile(proto):
        return None
    with open(proto, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    base = os.environ.get("OMLD_PB2_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "omld-python")
    out = os.path.join(base, digest)
    path = os.path.join(out, "omld_pb2.py")
    if not os.path.isfile(path):
        make_pb2(out, proto)
    return path


def load():
    """Returns the omld_pb2 module (see the module docstring for where from)."""
    global _MODULE
    if _MODULE is not None:
        return _MODULE
    try:
        import google.protobuf  # type: ignore  # noqa: F401
    except ImportError as e:
        raise ImportError("omld needs the protobuf runtime (Debian: apt-get install "
                          "python3-protobuf; elsewhere: pip install protobuf)") from e
    candidates = [os.path.join(_HERE, "omld_pb2.py")]
    if os.environ.get("OMLD_PB2_DIR"):
        candidates.append(os.path.join(os.environ["OMLD_PB2_DIR"], "omld_pb2.py"))
    for path in candidates:
        if os.path.isfile(path):
            _MODULE = _load_file(path)
            return _MODULE
    path = _cached()
    if path is None:
        raise ImportError("omld: no generated omld_pb2.py found: set OMLD_PB2_DIR to a "
                          "directory holding it, or OMLD_PROTO to proto/omld.proto so it can "
                          "be generated with protoc")
    _MODULE = _load_file(path)
    return _MODULE
