#!/usr/bin/env python3
"""Lays out the GPU check's bundle (called by scripts/gpu-check.d/pack.sh):

    bundle.py --root REPO --target TARGET_DIR --work WORK --soname SONAME --out DIR

Reads cargo's JSON (WORK/build.json, tests.json, bench.json) for the test
executables, copies them, the bins and libgeeps stripped of debug info into
DIR laid out like the repository, with the data, the LeNet models, the
PyTorch LeNet, the runner (scripts/gpu-check, scripts/gpu-check.d), the
namespace cluster with iproute2's ip and tc (tools/, for a machine without
them) and gpu-check.json, the manifest `run` reads.

The tests find their data, models and binaries through paths compiled in
(env!("CARGO_MANIFEST_DIR"), env!("CARGO_BIN_EXE_*")): absolute paths of this
checkout, recorded in gpu-check.json (build_root, and build_target when the
target dir lies outside it). Rewriting them in the binaries does not work
(the compiler folds short strings into instructions), so `run` puts the
bundle at those paths instead (a link, or a bind mount in a private mount
namespace).
"""

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

# (package dir relative to the root, target kind, target name) -> suite
# name, the arguments `run` passes and the environment it adds.
SUITES = [
    ("geeps-cuda", "lib", "geeps_cuda", "geeps-cuda lib", [], {}),
    ("geeps-cuda", "test", "device_contract", "device_contract", [], {}),
    ("geeps-cuda", "test", "ptx_interpreter", "ptx_interpreter", [], {}),
    *[(".", "test", t, t, [], {}) for t in
      ["basics", "placement", "consistency", "handover", "release_lanes", "mlr", "errors",
       "checkpoint", "checkpoint_kill"]],
    ("geeps-net", "test", "network", "network", [], {}),
    ("geeps-net/launch", "test", "processes", "processes", [], {"GEEPS_TEST_DEVICE": "cuda"}),
    ("examples/caffe", "test", "gpu_layers", "gpu_layers", [], {}),
    ("examples/caffe", "test", "gpu_standard_layers", "gpu_standard_layers", [], {}),
    ("examples/caffe", "test", "gpu_train", "gpu_train", [], {}),
    ("examples/caffe", "test", "deploy_tools", "deploy_tools", [], {}),
    ("examples/caffe", "test", "data_layers", "data_layers", [], {}),
    ("examples/caffe", "test", "cpu_only_layers", "cpu_only_layers", [], {}),
    ("examples/caffe", "test", "standard_nets", "standard_nets", [], {}),
    ("examples/caffe", "test", "memory_data", "memory_data", [], {}),
    ("examples/caffe", "test", "hdf5_data", "hdf5_data", [], {}),
    # As .ci/cuda.sh: the suite's CUDA test (rows on the GPU, bit for bit as the host).
    ("examples/caffe", "test", "training", "training", ["gpu_device"], {}),
]
# Suites .ci/cuda.sh already runs on the emulated driver: the bundle's emulated
# run (.ci/gpu-check.sh) leaves them to it, a real GPU runs them.
REAL_GPU_ONLY = {"memory_data", "hdf5_data"}
BENCH = ("geeps-cuda", "bench", "gpu_kernels")
BINS = ["caffe-geeps", "geeps-launch", "geeps-bench"]
# Every workspace member's folder exists in the bundle: the tests' compiled-in
# paths go through them (geeps-net/launch/../../examples/data).
MEMBERS = [".", "geeps-core", "geeps-net", "geeps-cuda", "geeps-ffi", "geeps-net/launch",
           "geeps-testkit", "examples/caffe", "geeps-bench", "cuda-emu"]


def artifacts(path):
    for line in pathlib.Path(path).read_text().splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            yield msg


def rel(root, manifest_path):
    d = pathlib.Path(manifest_path).parent.resolve()
    r = os.path.relpath(d, root)
    return "." if r == "." else r


def strip(path):
    subprocess.run(["strip", "--strip-debug", str(path)], check=True)


# glibc's own libraries: the GPU machine's serve (and must: they go with its loader).
GLIBC = ("libc.so", "libm.so", "ld-linux", "libpthread.so", "libdl.so", "librt.so", "libresolv.so")


def carry_tools(out):
    """ip and tc (iproute2) for the network step on a machine without them:
    each with the libraries it links here, glibc's excepted, behind a wrapper
    that starts it through the dynamic loader with those libraries, so that
    nothing is added to the environment of what they run (`ip netns exec`).
    Returns the tools carried."""
    carried = []
    for tool in ("ip", "tc"):
        path = shutil.which(tool) or next((p for p in (f"/usr/sbin/{tool}", f"/sbin/{tool}")
                                           if os.access(p, os.X_OK)), None)
        if not path:
            print(f"gpu-check pack: no {tool} here; the bundle carries no {tool} (the network step needs one "
                  "on the GPU machine)", file=sys.stderr)
            continue
        ldd = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
        loader = next((ln.split()[0] for ln in ldd.splitlines() if ln.strip().startswith("/")), None)
        if not loader:
            print(f"gpu-check pack: ldd does not name {tool}'s loader; not carried", file=sys.stderr)
            continue
        for dest in ("tools/real", "tools/lib", "tools/bin"):
            (out / dest).mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(path), out / "tools/real" / tool)
        for ln in ldd.splitlines():
            parts = ln.split()
            if len(parts) >= 3 and parts[1] == "=>" and parts[2].startswith("/"):
                if not parts[0].startswith(GLIBC):
                    shutil.copy2(os.path.realpath(parts[2]), out / "tools/lib" / parts[0])
        wrapper = out / "tools/bin" / tool
        wrapper.write_text(
            "#!/bin/sh\n"
            f"# {tool} (iproute2) carried by the GPU check's bundle, run with its own libraries.\n"
            'd=$(cd "$(dirname "$0")/.." && pwd)\n'
            f'exec {loader} --library-path "$d/lib" "$d/real/{tool}" "$@"\n')
        wrapper.chmod(0o755)
        carried.append(tool)
    return carried


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--soname", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    root = pathlib.Path(a.root).resolve()
    target = pathlib.Path(a.target).resolve()
    work = pathlib.Path(a.work)
    out = pathlib.Path(a.out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)

    found = {}
    bins = {}
    for msg in [m for j in ("build", "tests", "bench") for m in artifacts(work / f"{j}.json")]:
        t = msg["target"]
        d = rel(root, msg["manifest_path"])
        for kind in t["kind"]:
            key = (d, kind, t["name"])
            if msg["profile"]["test"] or kind == "bench":
                found[key] = msg["executable"]
            elif kind == "bin":
                bins[t["name"]] = msg["executable"]

    rel_bin = pathlib.Path("target/release")
    (out / rel_bin).mkdir(parents=True)
    tests_dir = rel_bin / "gpu-check"
    (out / tests_dir).mkdir()
    for m in MEMBERS:
        (out / m).mkdir(parents=True, exist_ok=True)

    manifest = {"suites": [], "bins": {}}
    shipped = []
    missing = []
    for d, kind, name, suite, args, env in SUITES:
        exe = found.get((d, kind, name))
        if not exe:
            missing.append(f"{d} {kind} {name}")
            continue
        dest = tests_dir / pathlib.Path(exe).name
        shutil.copy2(exe, out / dest)
        shipped.append(dest)
        # libtest's --show-output prints what passing tests wrote, so that a
        # test's "NOT RUN: ..." line (a second GPU missing) reaches the report.
        if suite != "processes":
            args = ["--show-output", *args]
        manifest["suites"].append({"name": suite, "exe": str(dest), "cwd": d, "args": args, "env": env,
                                   "real_gpu_only": suite in REAL_GPU_ONLY})
    exe = found.get(BENCH)
    if exe:
        dest = tests_dir / pathlib.Path(exe).name
        shutil.copy2(exe, out / dest)
        shipped.append(dest)
        manifest["bench_rows"] = str(dest)
    else:
        missing.append(" ".join(BENCH))
    for b in BINS:
        if b not in bins:
            missing.append(f"bin {b}")
            continue
        shutil.copy2(bins[b], out / rel_bin / b)
        shipped.append(rel_bin / b)
        manifest["bins"][b] = str(rel_bin / b)
    if missing:
        sys.exit("gpu-check pack: cargo did not list: " + ", ".join(missing))

    # The C ABI's CUDA test and libgeeps with its SONAME link, found through $ORIGIN/../lib.
    (out / "ffi/bin").mkdir(parents=True)
    (out / "ffi/lib").mkdir(parents=True)
    shutil.copy2(work / "ffi_cuda", out / "ffi/bin/cuda")
    shutil.copy2(target / "release/libgeeps.so", out / "ffi/lib/libgeeps.so")
    os.symlink("libgeeps.so", out / "ffi/lib" / a.soname)
    shipped += [pathlib.Path("ffi/bin/cuda"), pathlib.Path("ffi/lib/libgeeps.so")]
    manifest["ffi_cuda"] = "ffi/bin/cuda"

    # Data, models, the PyTorch LeNet (its --data default is ../../examples/data from it).
    shutil.copytree(root / "examples/data", out / "examples/data")
    shutil.copytree(root / "examples/caffe/models", out / "examples/caffe/models")
    (out / "scripts/gpu-bench").mkdir(parents=True)
    shutil.copy2(root / "scripts/gpu-bench/pytorch_lenet.py", out / "scripts/gpu-bench/pytorch_lenet.py")
    shutil.copy2(root / "scripts/gpu-check", out / "scripts/gpu-check")
    shutil.copytree(root / "scripts/gpu-check.d", out / "scripts/gpu-check.d",
                    ignore=shutil.ignore_patterns("__pycache__"))
    # The network step: the namespace cluster, and iproute2 for a machine without it.
    shutil.copy2(root / "scripts/netns-cluster", out / "scripts/netns-cluster")
    shutil.copytree(root / "scripts/netns-cluster.d", out / "scripts/netns-cluster.d",
                    ignore=shutil.ignore_patterns("__pycache__"))
    manifest["tools"] = carry_tools(out)

    # The tests find their files through paths compiled in: this checkout's
    # root and target dir. `run` puts the bundle there (see run.py).
    manifest["build_root"] = str(root)
    if os.path.relpath(target, root).startswith(".."):
        manifest["build_target"] = str(target)
    for f in shipped:
        strip(out / f)

    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    manifest.update({
        "packed": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "commit": commit + ("+dirty" if dirty else ""),
        "version": subprocess.run([str(root / "scripts/soname"), "--version"], capture_output=True,
                                  text=True).stdout.strip(),
    })
    (out / "gpu-check.json").write_text(json.dumps(manifest, indent=2) + "\n")
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file() and not p.is_symlink())
    print(f"{len(manifest['suites'])} suites, the row-kernel bench, {len(BINS)} bins, the C test; "
          f"compiled-in root {root}; "
          f"{size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
