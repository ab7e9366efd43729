"""The package's build backend (PEP 517 and PEP 660), standard library only.

`pip install ./packages/python` builds in an isolated environment, into which pip installs the
backend's requirements first: setuptools would have to come from a package index, which the
machines this client is for do not reach. This backend needs nothing, so the install works
offline, with or without build isolation, on every Python from 3.10.

It builds a pure-Python wheel of `src/safety_incident_api`, its metadata from pyproject.toml's
`[project]` table and the version from `src/safety_incident_api/_version.py`.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "safety_incident_api"
SOURCE = ROOT / "src" / PACKAGE
#: Fixed file times, so that the same sources make the same wheel.
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def project_table(text: str) -> dict[str, Any]:
    """pyproject.toml's `[project]` table, read with tomllib (Python 3.11+), or as JSON lines."""
    if sys.version_info >= (3, 11):
        import tomllib

        project: dict[str, Any] = tomllib.loads(text)["project"]
        return project
    return project_table_as_json_lines(text)


def project_table_as_json_lines(text: str) -> dict[str, Any]:
    """The `[project]` table for Python 3.10, which has no tomllib: each line `key = value` of
    the table read as JSON, which its values are written to be (basic strings and one-line arrays
    of them)."""
    table: dict[str, Any] = {}
    section = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[project]" and "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            table[key.strip()] = json.loads(value)
    return table


def version() -> str:
    found = re.search(r'^__version__ = "([^"]+)"$', (SOURCE / "_version.py").read_text(), re.M)
    if found is None:
        raise RuntimeError(f"no __version__ in {SOURCE / '_version.py'}")
    return found.group(1)


def _metadata() -> tuple[str, str, str]:
    """The distribution's name, its version, and the text of its METADATA."""
    project = project_table((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {version()}",
        f"Summary: {project['description']}",
        f"Requires-Python: {project['requires-python']}",
        *(f"Classifier: {classifier}" for classifier in project.get("classifiers", [])),
        "Description-Content-Type: text/markdown",
        "",
        (ROOT / project["readme"]).read_text(encoding="utf-8"),
    ]
    return project["name"], version(), "\n".join(lines)


def _wheel_name(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _write_wheel(directory: str, files: dict[str, bytes]) -> str:
    """A wheel of `files` (path in the wheel → content) and its dist-info; returns its name."""
    name, release, metadata = _metadata()
    dist_info = f"{_wheel_name(name)}-{release}.dist-info"
    files = {
        **files,
        f"{dist_info}/METADATA": metadata.encode(),
        f"{dist_info}/WHEEL": (
            "Wheel-Version: 1.0\n"
            "Generator: safety_build\n"
            "Root-Is-Purelib: true\n"
            "Tag: py3-none-any\n"
        ).encode(),
        f"{dist_info}/top_level.txt": f"{PACKAGE}\n".encode(),
    }
    record = "".join(f"{path},{_hash(data)},{len(data)}\n" for path, data in files.items())
    files[f"{dist_info}/RECORD"] = f"{record}{dist_info}/RECORD,,\n".encode()
    wheel = f"{_wheel_name(name)}-{release}-py3-none-any.whl"
    with zipfile.ZipFile(Path(directory) / wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in files.items():
            info = zipfile.ZipInfo(path, _ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return wheel


def _sources() -> dict[str, bytes]:
    return {
        f"{PACKAGE}/{path.relative_to(SOURCE).as_posix()}": path.read_bytes()
        for path in sorted(SOURCE.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


# PEP 517


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings: dict[str, Any] | None = None) -> list[str]:
    return []


def get_requires_for_build_editable(config_settings: dict[str, Any] | None = None) -> list[str]:
    return []


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    return _write_wheel(wheel_directory, _sources())


def build_editable(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """PEP 660 (`pip install -e`): a wheel whose .pth file puts src/ on the path."""
    return _write_wheel(wheel_directory, {f"{PACKAGE}.pth": f"{SOURCE.parent}\n".encode()})


def build_sdist(sdist_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    name, release, metadata = _metadata()
    base = f"{_wheel_name(name)}-{release}"
    paths = [ROOT / "pyproject.toml", ROOT / "README.md", Path(__file__).resolve()]
    paths += [
        path
        for path in sorted(SOURCE.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    ]
    with tarfile.open(
        Path(sdist_directory) / f"{base}.tar.gz", "w:gz", format=tarfile.PAX_FORMAT
    ) as archive:
        for path in paths:
            archive.add(path, f"{base}/{path.relative_to(ROOT).as_posix()}", recursive=False)
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = metadata.encode()
        info.size = len(data)
        info.mode = 0o644
        archive.addfile(info, io.BytesIO(data))
    return f"{base}.tar.gz"
