"""Where pip's NVRTC is looked for, and the numpy API in a process that can reach no CUDA
(FLASHGEN_NVRTC naming a missing file, no CUDA_HOME/CUDA_PATH/LD_LIBRARY_PATH): it works
and maps neither libnvrtc nor libcuda."""
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap
import unittest

import support  # noqa: F401  (puts the package on sys.path)

from flashgen import _library

PACKAGE_PARENT = str(pathlib.Path(_library.__file__).resolve().parents[1])

CPU_ONLY_CHILD = textwrap.dedent(
    """
    import numpy as np
    import flashgen.numpy as fgnp
    from reference import standard_attention

    rng = np.random.default_rng({seed})
    q, k, v, dout = (rng.standard_normal(s).astype(np.float32)
                     for s in [(1, 19, 2, 16), (1, 23, 2, 16), (1, 23, 2, 16), (1, 19, 2, 16)])
    o, lse = fgnp.attention_forward(q, k, v, causal=True)
    dq, dk, dv = fgnp.attention_backward(dout, q, k, v, o, lse, causal=True)
    exact = standard_attention(q, k, v, dout, causal=True)
    for name, got in (("o", o), ("lse", lse), ("dq", dq), ("dk", dk), ("dv", dv)):
        error = float(np.max(np.abs(got - exact[name])))
        assert error < 1e-4, f"{{name}}: max error {{error}}"
    maps = open("/proc/self/maps").read()
    for library in ("libnvrtc", "libcuda"):
        assert library not in maps, f"{{library}} is mapped in a CPU-only process"
    print("cpu-only: ok")
    """
)


class PipNvrtcCandidatesTest(unittest.TestCase):
    def test_every_wheel_in_every_site_directory_newest_cuda_first(self):
        self.assertEqual(
            [path for path, _ in _library.nvrtc_candidates(["/venv/site", "/user/site"])],
            [
                "/venv/site/nvidia/cu13/lib/libnvrtc.so.13",
                "/user/site/nvidia/cu13/lib/libnvrtc.so.13",
                "/venv/site/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
                "/user/site/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
            ],
        )
        origins = {origin for _, origin in _library.nvrtc_candidates(["/venv/site"])}
        self.assertEqual(origins, {"pip nvidia-cuda-nvrtc (CUDA 13)", "pip nvidia-cuda-nvrtc-cu12"})

    def test_a_path_entry_holding_pips_nvidia_package_is_a_site_directory(self):
        with tempfile.TemporaryDirectory() as root:
            (pathlib.Path(root) / "nvidia" / "cuda_nvrtc" / "lib").mkdir(parents=True)
            sys.path.append(root)
            try:
                self.assertIn(os.path.abspath(root), _library.site_directories())
            finally:
                sys.path.remove(root)


class NoCudaTest(unittest.TestCase):
    def test_numpy_api_runs_with_no_cuda_reachable(self):
        env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH")}
        env["FLASHGEN_NVRTC"] = "/nonexistent/libnvrtc.so.12"
        env["PYTHONPATH"] = os.pathsep.join([PACKAGE_PARENT, str(pathlib.Path(__file__).resolve().parent)])
        seed = int.from_bytes(os.urandom(4), "little")
        run = subprocess.run(
            [sys.executable, "-c", CPU_ONLY_CHILD.format(seed=seed)],
            env=env, capture_output=True, text=True, timeout=300,
        )
        self.assertEqual(run.returncode, 0, f"seed {seed}:\n{run.stdout}{run.stderr}")
        self.assertIn("cpu-only: ok", run.stdout)


if __name__ == "__main__":
    unittest.main()
