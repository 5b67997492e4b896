#!/usr/bin/env python3
"""Compiles every *.cu of a kernels folder to PTX with NVRTC: geeps-cuda's
own (this folder, the default) or another's (--kernels, e.g.
examples/caffe/src/layers/pool for one of caffe-geeps' kernels; .ci/cuda.sh
runs it on every folder of examples/caffe/src holding a .cu).

The PTX is checked in beside the sources and embedded in the crate, so a
machine running geeps needs only the NVIDIA driver (which JIT-compiles the
PTX for its GPU), never NVRTC. CI regenerates the PTX with `--check` and
fails if the checked-in files differ.

The compiler is pinned: other NVRTC releases emit different (and newer-ISA)
PTX. Put the pinned NVRTC's library folder on LD_LIBRARY_PATH, or pass
--nvrtc PATH_TO_libnvrtc.so.12.

    build_ptx.py            rewrite kernels/*.ptx
    build_ptx.py --check    compare instead of writing; exit 1 on a difference
    build_ptx.py --out DIR  write the PTX into DIR
    build_ptx.py --kernels DIR [--check]   the same for DIR's *.cu
"""

import argparse
import ctypes
import difflib
import pathlib
import sys

# The NVRTC release the checked-in PTX comes from (PTX ISA 8.0, so any
# driver for CUDA 12.0 or later can load it).
NVRTC_VERSION = (12, 0)
# The baseline virtual architecture: compute capability 7.0 (Volta) and up.
ARCH = "compute_70"
# C++03: later standards make NVRTC 12.0 emit unused `nv::target` globals.
OPTIONS = [f"--gpu-architecture={ARCH}", "--std=c++03"]

KERNELS = pathlib.Path(__file__).resolve().parent


def load_nvrtc(path):
    try:
        return ctypes.CDLL(path or "libnvrtc.so.12")
    except OSError as e:
        sys.exit(f"cannot load NVRTC ({e}); install nvidia-cuda-nvrtc-cu12 and put its lib folder on LD_LIBRARY_PATH")


def check(nvrtc, code, what):
    if code != 0:
        nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
        sys.exit(f"NVRTC {what} failed: {nvrtc.nvrtcGetErrorString(code).decode()}")


def compile_ptx(nvrtc, source, name):
    prog = ctypes.c_void_p()
    check(nvrtc, nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None), "create")
    opts = (ctypes.c_char_p * len(OPTIONS))(*[o.encode() for o in OPTIONS])
    status = nvrtc.nvrtcCompileProgram(prog, len(OPTIONS), opts)
    log_size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(log_size))
    log = ctypes.create_string_buffer(log_size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    if status != 0:
        sys.exit(f"{name}: compilation failed:\n{log.value.decode()}")
    if log.value.strip():
        sys.exit(f"{name}: compiler warnings (fix them):\n{log.value.decode()}")
    size = ctypes.c_size_t()
    check(nvrtc, nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(size)), "PTX size")
    ptx = ctypes.create_string_buffer(size.value)
    check(nvrtc, nvrtc.nvrtcGetPTX(prog, ptx), "PTX")
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return ptx.value.decode()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the checked-in PTX instead of writing")
    ap.add_argument("--kernels", type=pathlib.Path, default=KERNELS, help="folder of the .cu files (default: geeps-cuda's)")
    ap.add_argument("--out", type=pathlib.Path, help="folder for the .ptx files (default: the kernels folder)")
    ap.add_argument("--nvrtc", help="path to libnvrtc.so.12")
    args = ap.parse_args()
    kernels = args.kernels
    if args.out is None:
        args.out = kernels

    nvrtc = load_nvrtc(args.nvrtc)
    major, minor = ctypes.c_int(), ctypes.c_int()
    check(nvrtc, nvrtc.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "version")
    if (major.value, minor.value) != NVRTC_VERSION:
        want = ".".join(map(str, NVRTC_VERSION))
        sys.exit(f"NVRTC {major.value}.{minor.value} found; the PTX is generated with NVRTC {want} "
                 f"(nvidia-cuda-nvrtc-cu12=={want}.*)")

    stale = []
    sources = sorted(kernels.glob("*.cu"))
    if not sources:
        sys.exit(f"no .cu files in {kernels}")
    for cu in sources:
        ptx = compile_ptx(nvrtc, cu.read_text(), cu.name)
        target = args.out / (cu.stem + ".ptx")
        if args.check:
            current = target.read_text() if target.exists() else ""
            if current != ptx:
                stale.append(target)
                sys.stdout.writelines(difflib.unified_diff(
                    current.splitlines(True), ptx.splitlines(True), str(target), "regenerated"))
        else:
            args.out.mkdir(parents=True, exist_ok=True)
            target.write_text(ptx)
            print(f"{cu.name} -> {target}")
    if stale:
        sys.exit(f"stale PTX: {', '.join(map(str, stale))}; run geeps-cuda/kernels/build_ptx.py --kernels {kernels} and commit the result")
    if args.check:
        print("PTX up to date")


if __name__ == "__main__":
    main()
