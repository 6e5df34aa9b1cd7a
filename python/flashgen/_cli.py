"""The `flashgen` command of a pip installation: runs the CLI binary the wheel carries
(flashgen/_bin/flashgen, built with the runtime linked in), telling it where pip put NVRTC
for this interpreter ($FLASHGEN_NVRTC_PATHS, the files flashgen/_library.py would hand the
library), where the wheel's kernel set is ($FLASHGEN_PACKAGED_KERNELS) and, on PATH after the
rest, pip's nvdisasm (nvidia-cuda-nvdisasm), so that `flashgen cache warm`, `dump`, `bench` and
`tune` find what `import flashgen` finds.
"""
import os
import pathlib
import sys

from . import _library

BINARY = pathlib.Path(__file__).resolve().parent / "_bin" / "flashgen"


def main():
    if not BINARY.is_file():
        sys.exit(f"flashgen: the command-line tool is not part of this installation ({BINARY} is missing); "
                 "install the wheel (pip install <flashgen repository>) or run build/tools/flashgen of a checkout")
    env = dict(os.environ)
    if "FLASHGEN_NVRTC_PATHS" not in env:
        found = [path for path, _ in _library.nvrtc_candidates() if os.path.isfile(path)]
        if found:
            env["FLASHGEN_NVRTC_PATHS"] = ":".join(found)
    # `dump --emit sass` looks for nvdisasm on PATH: pip's nvidia-cuda-nvdisasm comes last.
    tools = _library.pip_tool_directories()
    if tools:
        env["PATH"] = os.pathsep.join([p for p in env.get("PATH", "").split(os.pathsep) if p] + tools)
    if not env.get("FLASHGEN_PACKAGED_KERNELS") and _library.PACKAGED_KERNELS.is_dir():
        env["FLASHGEN_PACKAGED_KERNELS"] = str(_library.PACKAGED_KERNELS)
    os.execve(str(BINARY), [str(BINARY), *sys.argv[1:]], env)


if __name__ == "__main__":
    main()
