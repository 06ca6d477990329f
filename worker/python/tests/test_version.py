"""The package's version is the C programs': the project VERSION of the top
CMakeLists.txt (and, with JRPC_BIN, what jrpc-broker --version prints)."""

import os
import re
import subprocess
import unittest

import jrpc
import jrpc.worker

SRC = os.environ.get("JRPC_SOURCE_DIR",
                     os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


class Version(unittest.TestCase):
    def test_cmake_project_version(self):
        with open(os.path.join(SRC, "CMakeLists.txt"), encoding="utf-8") as f:
            m = re.search(r"project\(jrpc VERSION ([0-9.]+)", f.read())
        self.assertIsNotNone(m)
        self.assertEqual(jrpc.__version__, m.group(1))
        self.assertEqual(jrpc.worker.__version__, m.group(1))

    def test_installed_metadata(self):
        from importlib.metadata import version
        self.assertEqual(version("jrpc"), jrpc.__version__)

    @unittest.skipUnless(os.environ.get("JRPC_BIN"), "JRPC_BIN unset")
    def test_the_c_programs(self):
        for prog in ("jrpc-broker", "jrpc-worker", "jrpc"):
            out = subprocess.run([os.path.join(os.environ["JRPC_BIN"], prog), "--version"],
                                 capture_output=True, text=True, timeout=10).stdout
            self.assertIn(jrpc.__version__, out, prog)


if __name__ == "__main__":
    unittest.main()
