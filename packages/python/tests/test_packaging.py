"""The in-tree build backend (packages/python/_build): what pip runs to install the client."""

from __future__ import annotations

import importlib.util
import sys
import tempfile
import unittest
import zipfile
from pathlib import Path
from types import ModuleType

import safety_incident_api

ROOT = Path(__file__).resolve().parent.parent


def backend() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "safety_build", ROOT / "_build" / "safety_build.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Backend(unittest.TestCase):
    def test_python_3_10_reads_pyproject_as_tomllib_does(self) -> None:
        text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
        build = backend()
        without = build.project_table_as_json_lines(text)
        if sys.version_info >= (3, 11):
            self.assertEqual(without, build.project_table(text))
        self.assertEqual(without["name"], "safety-incident-api")
        self.assertEqual(without["requires-python"], ">=3.10")

    def test_the_wheel_holds_the_package_and_its_metadata(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            name = backend().build_wheel(directory)
            self.assertEqual(
                name, f"safety_incident_api-{safety_incident_api.__version__}-py3-none-any.whl"
            )
            with zipfile.ZipFile(Path(directory) / name) as wheel:
                files = wheel.namelist()
                metadata = wheel.read(
                    f"safety_incident_api-{safety_incident_api.__version__}.dist-info/METADATA"
                ).decode()
        self.assertIn("safety_incident_api/__init__.py", files)
        self.assertIn("safety_incident_api/models.py", files)
        self.assertIn("safety_incident_api/py.typed", files)
        self.assertFalse(
            [file for file in files if "__pycache__" in file or file.startswith("tests/")]
        )
        self.assertIn("Name: safety-incident-api\n", metadata)
        self.assertIn(f"Version: {safety_incident_api.__version__}\n", metadata)
        self.assertIn("Requires-Python: >=3.10\n", metadata)


if __name__ == "__main__":
    unittest.main()
