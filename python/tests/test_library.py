"""Loading the runtime library: lookup order, version, and the ctypes mirror of flashgen.h."""
import ctypes
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import unittest

import support  # noqa: F401  (puts the package on sys.path)

import flashgen
from flashgen import _capi, _library

HEADER_DIR = pathlib.Path(__file__).resolve().parents[2] / "include"


class LookupTest(unittest.TestCase):
    def setUp(self):
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="flashgen-lookup-"))
        self.addCleanup(shutil.rmtree, self.root)
        self.package = self.root / "python" / "flashgen"
        self.package.mkdir(parents=True)

    def touch(self, relative, mtime=None):
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        if mtime is not None:
            os.utime(path, (mtime, mtime))
        return str(path)

    def test_environment_variable_wins(self):
        self.touch("build/runtime/libflashgen.so")
        chosen = self.touch("elsewhere/libflashgen.so.0")
        self.assertEqual(_library.locate({"FLASHGEN_LIBRARY": chosen}, self.package), chosen)

    def test_environment_variable_naming_a_missing_file_is_an_error(self):
        missing = str(self.root / "nope.so")
        with self.assertRaises(OSError) as caught:
            _library.locate({"FLASHGEN_LIBRARY": missing}, self.package)
        self.assertIn(missing, str(caught.exception))

    def test_package_copy_then_build_then_newest_other_build(self):
        self.touch("build-old/runtime/libflashgen.so", mtime=1000)
        newest = self.touch("build-new/runtime/libflashgen.so", mtime=2000)
        self.assertEqual(_library.locate({}, self.package), newest)
        build = self.touch("build/runtime/libflashgen.so")
        self.assertEqual(_library.locate({}, self.package), build)
        installed = self.touch("python/flashgen/libflashgen.so")
        self.assertEqual(_library.locate({}, self.package), installed)

    def test_nothing_found_names_what_was_tried(self):
        if _library.ctypes.util.find_library("flashgen"):
            self.skipTest("a system-wide libflashgen is installed")
        with self.assertRaises(OSError) as caught:
            _library.locate({}, self.package)
        self.assertIn(str(self.package / "libflashgen.so"), str(caught.exception))
        self.assertIn("FLASHGEN_LIBRARY", str(caught.exception))


class VersionTest(unittest.TestCase):
    def test_library_version_is_the_package_version(self):
        version = flashgen.library_version()
        self.assertRegex(version, r"^\d+\.\d+\.\d+$")
        self.assertEqual(version, flashgen.__version__)

    def test_status_strings(self):
        lib = _library.library()
        for status in _capi.Status:
            text = lib.flashgen_status_string(int(status))
            self.assertTrue(text, f"status {status.name} has no string")


# sizeof and offsetof of every struct field as the C compiler lays them out.
_LAYOUT_PROGRAM = """
#include <stddef.h>
#include <stdio.h>
#include "flashgen/flashgen.h"
#define FIELD(T, f) printf(#T " " #f " %zu %zu\\n", offsetof(T, f), sizeof(((T*)0)->f));
#define SIZE(T) printf(#T " sizeof %zu %zu\\n", sizeof(T), _Alignof(T));
int main(void) {
%s
  return 0;
}
"""

_STRUCTS = {
    "flashgen_tensor": _capi.Tensor,
    "flashgen_attention_options": _capi.AttentionOptions,
    "flashgen_forward_args": _capi.ForwardArgs,
    "flashgen_backward_args": _capi.BackwardArgs,
    "flashgen_runtime_options": _capi.RuntimeOptions,
    "flashgen_tune_shape": _capi.TuneShape,
    "flashgen_kv_append_args": _capi.KvAppendArgs,
}


@unittest.skipUnless(shutil.which("cc") and (HEADER_DIR / "flashgen" / "flashgen.h").is_file(),
                     "needs a C compiler and the repository's include/flashgen/flashgen.h")
class AbiTest(unittest.TestCase):
    def test_ctypes_structs_match_the_header(self):
        lines = []
        for c_name, py in _STRUCTS.items():
            lines.append(f"  SIZE({c_name})")
            lines += [f"  FIELD({c_name}, {field})" for field, _ in py._fields_]
        with tempfile.TemporaryDirectory() as tmp:
            source, binary = pathlib.Path(tmp) / "layout.c", pathlib.Path(tmp) / "layout"
            source.write_text(_LAYOUT_PROGRAM.replace("%s", "\n".join(lines)))
            subprocess.run(["cc", "-std=c11", f"-I{HEADER_DIR}", str(source), "-o", str(binary)], check=True)
            output = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout
        for line in output.splitlines():
            c_name, field, a, b = line.split()
            py = _STRUCTS[c_name]
            if field == "sizeof":
                self.assertEqual((ctypes.sizeof(py), ctypes.alignment(py)), (int(a), int(b)), f"{c_name} size/alignment")
            else:
                descriptor = getattr(py, field)
                self.assertEqual((descriptor.offset, descriptor.size), (int(a), int(b)), f"{c_name}.{field}")

    def test_every_struct_in_the_header_is_mirrored(self):
        header = (HEADER_DIR / "flashgen" / "flashgen.h").read_text()
        declared = set(re.findall(r"typedef struct (\w+) \{", header))
        self.assertEqual(declared, set(_STRUCTS))


if __name__ == "__main__":
    unittest.main()
