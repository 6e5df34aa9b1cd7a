# lit configuration of flashgen's dialect tests. Run through ctest (`ctest -L lit`)
# or directly: python3 <llvm>/build/utils/lit/lit.py -sv <build>/tests/lit
import os
import sys

import lit.formats

config.name = "flashgen"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.flashgen_lit_binary_dir

# flashgen-opt, flashgen, FileCheck, not: found on PATH, the built ones first.
path = config.environment.get("PATH", os.environ["PATH"])
config.environment["PATH"] = os.pathsep.join(config.flashgen_tool_dirs + [path])
# The runtime must not pick up a user's cache or autotune winners.
config.environment["FLASHGEN_CACHE_DIR"] = os.path.join(config.flashgen_lit_binary_dir, "cache")
config.substitutions.append(("%python", sys.executable))
