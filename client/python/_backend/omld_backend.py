"""omld_backend - the in-tree PEP 517 build backend of the omld package.

Why in-tree: pyproject.toml says ``requires = []``, so pip (with build
isolation, the default) installs nothing before building and
``pip install ./client/python`` works offline on a fresh machine. A
setuptools backend would make pip download setuptools into the isolated
build environment. Only the standard library is used here.

What it builds:

* a wheel (``py3-none-any``): the ``omld`` package plus ``omld/omld_pb2.py``
  generated now with protoc from proto/omld.proto (omld._pb.make_pb2), so the
  installed package needs neither protoc nor the .proto at run time;
* an sdist: the package, this backend, pyproject.toml, README.md and a copy
  of omld.proto at its root (an sdist is built without the source tree);
* an editable wheel (``pip install -e``): a .pth naming this directory;
  omld._pb then finds or generates omld_pb2 as in a checkout.

The .proto is $OMLD_PROTO, else ./omld.proto (in an sdist), else
../../proto/omld.proto (the source tree); protoc is $OMLD_PROTOC or
``protoc`` on PATH (Debian: protobuf-compiler). The protobuf runtime the
generated code needs becomes Requires-Dist: protobuf>=3.20 (the builder
API that protoc >= 3.20 output uses), or the version the generated code
itself validates at import (newer protoc).

Metadata: [project] of pyproject.toml (name, description, readme,
requires-python; read with tomllib, or on Python < 3.11 a reader of its
``key = "string"`` lines); the version is omld.__version__.
"""
import base64
import hashlib
import importlib.util
import io
import os
import re
import shutil
import tarfile
import tempfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = "py3-none-any"
# Reproducible archives: SOURCE_DATE_EPOCH if set, else 1980-01-01 (zip's epoch).
EPOCH = max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800)


def _project():
    path = os.path.join(ROOT, "pyproject.toml")
    try:
        import tomllib
    except ImportError:  # Python < 3.11: the "key = string" lines of [project]
        import ast
        out, section = {}, None
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line.startswith("["):
                    section = line
                elif section == "[project]" and re.match(r'^[\w-]+\s*=\s*"', line):
                    key, _, value = line.partition("=")
                    out[key.strip()] = ast.literal_eval(value.strip())
        return out
    with open(path, "rb") as f:
        return tomllib.load(f)["project"]


def _version():
    with open(os.path.join(ROOT, "omld", "__init__.py"), encoding="utf-8") as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


def _proto():
    for path in (os.environ.get("OMLD_PROTO"), os.path.join(ROOT, "omld.proto"),
                 os.path.join(ROOT, "..", "..", "proto", "omld.proto")):
        if path and os.path.isfile(path):
            return os.path.abspath(path)
    raise RuntimeError("omld: omld.proto not found (set OMLD_PROTO to proto/omld.proto)")


def _make_pb2(out_dir):
    """Runs protoc through omld/_pb.py's make_pb2 (loaded by path: importing
    the package would want google.protobuf, which a build does not need)."""
    spec = importlib.util.spec_from_file_location("_omld_pb_build", os.path.join(ROOT, "omld", "_pb.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    try:
        return mod.make_pb2(out_dir, proto=_proto())
    except ImportError as e:  # make_pb2's way of saying protoc is missing or failed
        raise RuntimeError(str(e)) from None


def _runtime_floor(pb2_path):
    """The protobuf runtime the generated code needs: the version newer
    protoc output validates at import, else 3.20 (the builder API)."""
    with open(pb2_path, encoding="utf-8") as f:
        m = re.search(r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.\w+,"
                      r"\s*(\d+),\s*(\d+),\s*(\d+)", f.read())
    return ".".join(m.groups()) if m else "3.20"


def _metadata(requires_protobuf):
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + _version(),
             "Summary: " + p.get("description", ""),
             "Requires-Python: " + p.get("requires-python", ">=3"),
             "Requires-Dist: protobuf>=" + requires_protobuf]
    readme = p.get("readme")
    if readme:
        with open(os.path.join(ROOT, readme), encoding="utf-8") as f:
            lines += ["Description-Content-Type: text/markdown", "", f.read()]
    return ("\n".join(lines) + "\n").encode("utf-8")


def _dist_info():
    return "%s-%s.dist-info" % (_project()["name"], _version())


def _wheel_file():
    return ("Wheel-Version: 1.0\nGenerator: omld_backend\nRoot-Is-Purelib: true\nTag: %s\n"
            % TAG).encode()


def _write_wheel(directory, files, requires_protobuf):
    """files: [(archive name, bytes)]. Adds the .dist-info and RECORD;
    returns the wheel's file name."""
    info = _dist_info()
    files = files + [(info + "/METADATA", _metadata(requires_protobuf)),
                     (info + "/WHEEL", _wheel_file())]
    name = "%s-%s-%s.whl" % (_project()["name"], _version(), TAG)
    record = []
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files:
            _zip_add(z, arc, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append("%s,sha256=%s,%d" % (arc, digest.decode(), len(data)))
        record.append(info + "/RECORD,,")
        _zip_add(z, info + "/RECORD", ("\n".join(record) + "\n").encode())
    return name


def _zip_add(z, arc, data):
    zi = zipfile.ZipInfo(arc, date_time=time.gmtime(EPOCH)[:6])
    zi.external_attr = 0o644 << 16
    zi.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(zi, data)


def _package_files():
    """The omld package's sources: omld/*.py but a stray generated module,
    and the PEP 561 marker py.typed (the package has type hints)."""
    out = []
    for name in sorted(os.listdir(os.path.join(ROOT, "omld"))):
        if (name.endswith(".py") and name != "omld_pb2.py") or name == "py.typed":
            with open(os.path.join(ROOT, "omld", name), "rb") as f:
                out.append(("omld/" + name, f.read()))
    return out


# ------------------------------------------------------------ PEP 517 / 660 hooks

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    tmp = tempfile.mkdtemp(prefix="omld-wheel-")
    try:
        pb2 = _make_pb2(tmp)
        with open(pb2, "rb") as f:
            files = _package_files() + [("omld/omld_pb2.py", f.read())]
        return _write_wheel(wheel_directory, files, _runtime_floor(pb2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [("omld_editable.pth", (ROOT + "\n").encode())], "3.20")


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (_project()["name"], _version())
    name = base + ".tar.gz"
    members = [("pyproject.toml", "pyproject.toml"), ("README.md", "README.md"),
               ("_backend/omld_backend.py", "_backend/omld_backend.py"), ("omld.proto", _proto())]
    members += [(arc, os.path.join(ROOT, arc)) for arc, _ in _package_files()]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for arc, src in members:
            with open(os.path.join(ROOT, src), "rb") as f:
                _tar_add(t, base + "/" + arc, f.read())
        _tar_add(t, base + "/PKG-INFO", _metadata("3.20"))
    return name


def _tar_add(t, arc, data):
    ti = tarfile.TarInfo(arc)
    ti.size, ti.mtime, ti.mode = len(data), EPOCH, 0o644
    t.addfile(ti, io.BytesIO(data))
