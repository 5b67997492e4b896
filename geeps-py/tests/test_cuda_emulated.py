"""The CUDA device from Python on geeps' emulated driver: buffers exported
through DLPack as CUDA memory, refused as numpy, rows written and read
through the driver (geeps-py/gpu/check_cuda.py --no-torch under
scripts/with-cuda-emu). GEEPS_TEST_CUDA_EMU=1 (the CI lane) requires it;
otherwise it is skipped, since it builds the emulator."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT, clean_env


def test_cuda_device_buffers_on_the_emulated_driver():
    if os.environ.get("GEEPS_TEST_CUDA_EMU") != "1":
        pytest.skip("set GEEPS_TEST_CUDA_EMU=1 to build and use the emulated CUDA driver")
    out = subprocess.run(
        [str(ROOT / "scripts" / "with-cuda-emu"), sys.executable, str(ROOT / "geeps-py/gpu/check_cuda.py"), "--no-torch"],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "numpy refused" in out.stdout and "rows through the GPU: ok" in out.stdout
