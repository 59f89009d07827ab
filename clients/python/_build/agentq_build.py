"""A PEP 517 build backend in the standard library alone, so that
`pip install ./clients/python` needs nothing from a package index (not even
setuptools): it builds a pure-Python wheel of the agentq package and an
sdist, with the metadata of pyproject.toml's [project] table."""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = "agentq"


def _table(text, name):
    """The body of the TOML table [name] (up to the next table)."""
    m = re.search(r"^\[%s\]\s*$(.*?)(?=^\[|\Z)" % re.escape(name), text, re.M | re.S)
    return m.group(1) if m else ""


def _project():
    """pyproject.toml's [project] fields the metadata needs (strings, string
    arrays, license = {text = ...}) and its [project.urls]: a TOML subset
    read with re, as tomllib is Python 3.11+."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as fh:
        text = fh.read()
    proj = _table(text, "project")

    def field(name):
        m = re.search(r'^%s\s*=\s*"([^"]*)"' % name, proj, re.M)
        return m.group(1) if m else ""

    def array(name):
        m = re.search(r"^%s\s*=\s*\[(.*?)\]" % name, proj, re.M | re.S)
        return re.findall(r'"([^"]*)"', m.group(1)) if m else []
    lic = re.search(r'^license\s*=\s*\{\s*text\s*=\s*"([^"]*)"', proj, re.M)
    urls = re.findall(r'^([A-Za-z][\w -]*?)\s*=\s*"([^"]*)"', _table(text, "project.urls"), re.M)
    return {"name": field("name"), "version": field("version"), "summary": field("description"),
            "requires": field("requires-python"), "license": lic.group(1) if lic else "",
            "keywords": array("keywords"), "classifiers": array("classifiers"), "urls": urls}


def _metadata():
    p = _project()
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    head = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + p["version"], "Summary: " + p["summary"]]
    if p["keywords"]:
        head.append("Keywords: " + ",".join(p["keywords"]))
    if p["license"]:
        head.append("License: " + p["license"])
    head += ["Classifier: " + c for c in p["classifiers"]]
    head += ["Project-URL: %s, %s" % u for u in p["urls"]]
    head += ["Requires-Python: " + p["requires"], "Description-Content-Type: text/markdown"]
    return p["name"], p["version"], "\n".join(head) + "\n\n" + readme


def _files():
    for d, _, names in os.walk(os.path.join(ROOT, PKG)):
        if "__pycache__" in d:
            continue
        for n in sorted(names):
            if n.endswith((".py", ".typed")):
                p = os.path.join(d, n)
                yield p, os.path.relpath(p, ROOT).replace(os.sep, "/")


def _record_line(arc, data):
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arc, h, len(data))


def _wheel(wheel_directory, editable=False):
    name, version, meta = _metadata()
    dist = "%s-%s.dist-info" % (name, version)
    fname = "%s-%s-py3-none-any.whl" % (name, version)
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, fname), "w", zipfile.ZIP_DEFLATED) as z:
        def add(arc, data):
            z.writestr(arc, data)
            record.append(_record_line(arc, data))
        if editable:
            add("%s.pth" % name, (ROOT + "\n").encode())
        else:
            for path, arc in _files():
                with open(path, "rb") as fh:
                    add(arc, fh.read())
        add(dist + "/METADATA", meta.encode())
        add(dist + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: agentq_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        record.append(dist + "/RECORD,,")
        z.writestr(dist + "/RECORD", "\n".join(record) + "\n")
    return fname


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, editable=True)


def build_sdist(sdist_directory, config_settings=None):
    name, version, meta = _metadata()
    base = "%s-%s" % (name, version)
    fname = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, fname), "w:gz") as t:
        def add(path, arc):
            t.add(path, arcname=base + "/" + arc, recursive=False)
        for arc in ("pyproject.toml", "README.md", "_build/agentq_build.py"):
            add(os.path.join(ROOT, arc), arc)
        for path, arc in _files():
            add(path, arc)
        info = tarfile.TarInfo(base + "/PKG-INFO")
        data = meta.encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return fname


def get_requires_for_build_wheel(config_settings=None):
    return []


get_requires_for_build_sdist = get_requires_for_build_editable = get_requires_for_build_wheel
