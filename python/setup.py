"""Builds the flashgen package; bundles the runtime library when one is built.

The library is taken from $FLASHGEN_LIBRARY, else from the repository's build/
directory (scripts/build.sh). Without one the package installs alone and finds
the library at run time (see flashgen/_library.py).
"""
import os
import pathlib
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = pathlib.Path(__file__).resolve().parent


def built_library():
    path = os.environ.get("FLASHGEN_LIBRARY") or HERE.parent / "build" / "runtime" / "libflashgen.so"
    path = pathlib.Path(path)
    return path.resolve() if path.is_file() else None


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        library = built_library()
        if library is not None:
            target = pathlib.Path(self.build_lib) / "flashgen" / "libflashgen.so"
            shutil.copyfile(library, target)
            print(f"flashgen: bundled {library}")


class PlatformDistribution(Distribution):
    def has_ext_modules(self):
        # A bundled shared library makes the wheel platform-specific.
        return built_library() is not None


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=PlatformDistribution)
