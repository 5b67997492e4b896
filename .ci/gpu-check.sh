#!/usr/bin/env bash
# The GPU check's bundle, proven here without a GPU (lane gpu-check, after the
# tests lane: the build is reused, nothing recompiles):
#   1. scripts/gpu-check pack: the bundle and the one file to carry, at most
#      60 MiB;
#   2. bad input: `run` outside a bundle, `run` without OUTDIR, fail clearly;
#   3. the carried file unpacked in a fresh folder and its runner run there
#      under the emulated driver (scripts/with-cuda-emu, native kernels,
#      --quick: LeNet 100 iterations), no nvidia-smi, no compute-sanitizer;
#   4. the report: every required step passed, the sanitizer and PyTorch
#      steps NOT RUN (never passed), the timings marked not meaningful; the
#      network step (sync across 4 namespace hosts, one run each way with
#      the bundle's ip and tc where this machine has none) passed as root.
#   bash .ci/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
start=$SECONDS
step() { printf '\n==> gpu-check: %s  [%d s]\n' "$*" $((SECONDS - start)); }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
packed="${CARGO_TARGET_DIR:-target}/gpu-check"

step "pack"
# The bundle carries iproute2's ip and tc for the network step.
if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
  apt-get install -y -qq iproute2 >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq iproute2 >/dev/null; }
fi
scripts/gpu-check pack "$packed"
size=$(stat -c %s "$packed/gpu-check.tar.xz")
echo "gpu-check.tar.xz: $size bytes ($((size / 1048576)) MiB; limit 60 MiB); unpacked: $(du -sh "$packed/bundle" | cut -f1)"
[ "$size" -le $((60 * 1048576)) ] || { echo "the bundle is over 60 MiB" >&2; exit 1; }

step "bad input fails clearly"
expect_fail() {
  local want="$1"
  shift
  if "$@" >"$work/bad.out" 2>&1; then
    echo "expected a failure: $*" >&2
    exit 1
  fi
  grep -q "$want" "$work/bad.out" || { echo "no '$want' in:" >&2; cat "$work/bad.out" >&2; exit 1; }
  echo "ok: $* -> $(head -1 "$work/bad.out")"
}
expect_fail "is not a bundle" scripts/gpu-check run "$work/out"
expect_fail "missing OUTDIR" "$packed/bundle/scripts/gpu-check" run
expect_fail "unknown command" scripts/gpu-check carry
expect_fail "exists and is not a folder" "$packed/bundle/scripts/gpu-check" run "$packed/gpu-check.tar.xz"

step "unpack the carried file in a fresh folder"
mkdir "$work/b"
tar -xJf "$packed/gpu-check.tar.xz" -C "$work/b"

step "run under the emulated driver (native kernels, --quick)"
status=0
GEEPS_GPU_CHECK_TOOLS=bundle GEEPS_CUDA_EMU_KERNELS=native scripts/with-cuda-emu "$work/b/scripts/gpu-check" run "$work/out" --quick || status=$?
cat "$work/out/report.md"
mkdir -p "$packed/last-emulated"
cp "$work/out/report.md" "$work/out/report.json" "$packed/last-emulated/"

step "the report"
python3 - "$work/out/report.json" "$status" <<'EOF'
import json, os, sys
rep = json.load(open(sys.argv[1]))
status = int(sys.argv[2])
bad = []
for s in rep["steps"]:
    if s["group"] == "sanitizer" or s["name"].startswith("figures: LeNet images/s"):
        if s["status"] != "not run":
            bad.append(f"{s['name']}: {s['status']} (must be NOT RUN here: nothing to run it with)")
    elif s["group"] == "left to .ci/cuda.sh":
        if s["status"] != "not run":
            bad.append(f"{s['name']}: {s['status']} (must be NOT RUN here: .ci/cuda.sh runs it)")
    elif s["name"].startswith("figures: sync across 4 namespace hosts") and os.geteuid() != 0:
        if s["status"] != "not run":
            bad.append(f"{s['name']}: {s['status']} (must be NOT RUN without root)")
    elif s["status"] != "passed":
        bad.append(f"{s['name']}: {s['status']}: {s['note']}")
names = " ".join(s["name"] for s in rep["steps"])
for need in ["suite device_contract", "suite processes", "suite gpu_train", "C ABI", "on GPU 0 against the CPU",
             "2 worker processes", "memcheck", "racecheck", "row gather", "stall bench", "PyTorch",
             "namespace hosts"]:
    if need not in names:
        bad.append(f"no step '{need}' in the report")
if rep["timings_meaningful"] or rep["device"]["nvidia-smi"] is not None:
    bad.append("the report does not say that timings are not meaningful under the emulator")
if (status != 0) != (rep["result"] == "failed"):
    bad.append(f"exit status {status} but result {rep['result']}")
if bad:
    sys.exit("gpu-check report:\n  " + "\n  ".join(bad))
c = rep["counts"]
print(f"report ok: {c['passed']} passed, {c['not run']} not run (sanitizer, PyTorch, suites .ci/cuda.sh runs), {c['failed']} failed, "
      f"run in {rep['seconds']:.0f} s")
EOF

step "done in $((SECONDS - start)) s"
