#!/usr/bin/env bash
# CI for the C ABI (called by .ci/run after the workspace tests):
#   1. build libgeeps and geeps-launch with the workspace's test flags, so
#      that after `cargo test --release --workspace` only libgeeps is linked;
#      check that include/geeps.h is what cbindgen generates (the header
#      test of geeps-ffi, which the workspace tests run as well);
#   2. the C error-path test and the C++ wrapper test under AddressSanitizer
#      + UBSan (shared library), network clusters on loopback included;
#   3. the C++ trainer compiled against geeps.h and the static library:
#      2 workers on 2 threads, then 2 processes under geeps-launch; both
#      must train (the loss falls);
#   3b. the CUDA device from C, under the emulated driver
#      (scripts/with-cuda-emu): the C test of an instance on a GPU (device
#      pointers, the copy helpers) under AddressSanitizer, and the trainer
#      with --gpu 0: 1 worker gives the host device's losses bit for bit, 2
#      workers train; without a driver, --gpu 0 stops with one message;
#   4. install under a temporary prefix (versioned libgeeps.so.X.Y.Z with
#      SONAME libgeeps.so.ABI (scripts/soname) and its links, stripped, debug info apart) and
#      build the trainer again through pkg-config, shared (geeps) and static
#      (geeps-static: the program must not need libgeeps.so), and through
#      CMake's find_package when cmake is present.
# Needs gcc, g++, gzip and binutils (readelf, objcopy, strip); installs
# pkg-config with apt when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> ffi: %s\n' "$*"; }

lib="${CARGO_TARGET_DIR:-target}/release"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Selecting packages (-p) or features would resolve features differently
# from the workspace test build and rebuild most dependencies; all workspace
# members with their lib, bin and test targets resolve exactly as
# `cargo test --release --workspace` does.
step "build libgeeps and geeps-launch (reusing the workspace test build)"
cargo build --release --workspace --lib --bins --tests
step "include/geeps.h is the generated header"
cargo test --release --workspace --test header

step "libgeeps.so carries its SONAME"
soname="$(scripts/soname)"
readelf -d "$lib/libgeeps.so" | tee "$work/dynamic.txt" | grep SONAME
grep -qF "Library soname: [$soname]" "$work/dynamic.txt" || { echo "libgeeps.so's SONAME is not $soname" >&2; exit 1; }

step "C error paths under AddressSanitizer"
# Programs linked with -lgeeps record the SONAME, libgeeps.so.ABI; cargo
# leaves only libgeeps.so, so the run-time path points at a directory with
# the link the installed layout has (scripts/install.sh makes it there).
abs_lib="$work/lib"
mkdir -p "$abs_lib"
ln -sfn "$(cd "$lib" && pwd)/libgeeps.so" "$abs_lib/$soname"
gcc -std=c11 -Wall -Wextra -Werror -g -O1 -fsanitize=address,undefined -fno-omit-frame-pointer \
  -fno-sanitize-recover=all -Iinclude geeps-ffi/ctest/error_paths.c \
  -L"$lib" -lgeeps -Wl,-rpath,"$abs_lib" -o "$work/error_paths"
ASAN_OPTIONS=detect_leaks=1 "$work/error_paths"

step "C++ wrapper (include/geeps.hpp) under AddressSanitizer"
g++ -std=c++17 -Wall -Wextra -Werror -g -O1 -fsanitize=address,undefined -fno-omit-frame-pointer \
  -fno-sanitize-recover=all -Iinclude geeps-ffi/ctest/raii.cpp \
  -L"$lib" -lgeeps -Wl,-rpath,"$abs_lib" -o "$work/raii"
ASAN_OPTIONS=detect_leaks=1 "$work/raii"

step "C++ trainer (static libgeeps, 2 workers on threads)"
g++ -std=c++17 -O2 -Wall -Wextra -Werror -Iinclude examples/cpp_trainer/trainer.cpp \
  "$lib/libgeeps.a" -lpthread -ldl -lm -lrt -lutil -o "$work/cpp_trainer"
"$work/cpp_trainer" --data examples/data --workers 2 --epochs 3

step "C test of an instance on a CUDA device, under the emulated driver"
gcc -std=c11 -Wall -Wextra -Werror -g -O1 -fsanitize=address,undefined -fno-omit-frame-pointer \
  -fno-sanitize-recover=all -Iinclude geeps-ffi/ctest/cuda.c \
  -L"$lib" -lgeeps -Wl,-rpath,"$abs_lib" -o "$work/cuda"
ASAN_OPTIONS=detect_leaks=1 scripts/with-cuda-emu "$work/cuda"

step "C++ trainer on the CUDA device (--gpu 0, emulated): the host device's losses bit for bit"
# The trainer computes on the CPU and stages each buffer through
# geeps_buffer_copy_to_host / _from_host; the emulator faults on any host
# access to a device pointer. One worker: the updates meet in one order, so
# every printed loss (%.9g, exact for a float) must be the same.
"$work/cpp_trainer" --data examples/data --workers 1 --epochs 2 | tee "$work/host1.log"
scripts/with-cuda-emu "$work/cpp_trainer" --data examples/data --workers 1 --epochs 2 --gpu 0 | tee "$work/gpu1.log"
grep -q ', on CUDA device 0 of ' "$work/gpu1.log"
grep -E '^(epoch|final)' "$work/host1.log" >"$work/host1.loss"
grep -E '^(epoch|final)' "$work/gpu1.log" >"$work/gpu1.loss"
test -s "$work/host1.loss"
diff "$work/host1.loss" "$work/gpu1.loss"

step "C++ trainer, 2 workers on the CUDA device (--gpu 0, emulated)"
# Exits non-zero unless the loss fell. Two workers are not reproducible bit
# for bit, not even on the host device: their updates are added in arrival
# order (float addition is not associative), and a BSP read may already see
# the other worker's update of the current clock. Host runs differ by up to
# a few 1e-3 of the loss; compare with one to 1e-2.
scripts/with-cuda-emu "$work/cpp_trainer" --data examples/data --workers 2 --epochs 2 --gpu 0 | tee "$work/gpu2.log"
"$work/cpp_trainer" --data examples/data --workers 2 --epochs 2 >"$work/host2.log"
awk '/^epoch/ { loss[FILENAME == ARGV[1], $2] = $5; n[FILENAME == ARGV[1]]++ }
     END {
       if (n[0] != 2 || n[1] != 2) { print "expected 2 epochs in each run"; exit 1 }
       for (e = 1; e <= 2; e++) {
         d = loss[0, e] - loss[1, e]; if (d < 0) d = -d
         printf "epoch %d: host %s, gpu %s\n", e, loss[0, e], loss[1, e]
         if (d > 1e-2 * loss[0, e]) { print "the losses differ"; exit 1 }
       }
     }' "$work/gpu2.log" "$work/host2.log"

step "--gpu 0 without a CUDA driver: one clear message, no fallback to the host"
# No emulator on the library path; no GPU visible should a real driver be
# installed.
if CUDA_VISIBLE_DEVICES= "$work/cpp_trainer" --data examples/data --workers 2 --epochs 1 --gpu 0 \
  >"$work/nogpu.out" 2>"$work/nogpu.err"; then
  echo "cpp_trainer --gpu 0 ran without a CUDA driver" >&2
  exit 1
fi
cat "$work/nogpu.err"
test "$(wc -l <"$work/nogpu.err")" -eq 1
grep -q '^cpp_trainer: --gpu 0: GEEPS_STATUS_DEVICE: ' "$work/nogpu.err"
if grep -q '^epoch' "$work/nogpu.out"; then
  echo "cpp_trainer --gpu 0 trained without a CUDA driver" >&2
  exit 1
fi

step "C++ trainer, 2 processes on loopback (geeps-launch -n 2 -- cpp_trainer --net)"
# Rank 0 exits non-zero unless the loss fell; geeps-launch fails if any rank
# does, and stops the others.
"$lib/geeps-launch" -n 2 -- "$work/cpp_trainer" --net --data examples/data --epochs 3 | tee "$work/net.log"
grep -q '^\[0\] final: train loss' "$work/net.log"
grep -q '^\[1\] geeps worker 1:' "$work/net.log"

step "install, then build the trainer through pkg-config"
if ! command -v pkg-config >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq pkgconf) >/dev/null
fi
GEEPS_NO_BUILD=1 scripts/install.sh "$work/prefix"
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
test "$(pkg-config --modversion geeps)" = "$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)"
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
g++ -std=c++17 -O2 examples/cpp_trainer/trainer.cpp $(pkg-config --cflags --libs geeps) \
  -Wl,-rpath,"$work/prefix/lib" -o "$work/cpp_trainer_pc"
# Linked through the SONAME, so a compatible release replaces it.
readelf -d "$work/cpp_trainer_pc" | grep -F "Shared library: [$soname]" >/dev/null
"$work/cpp_trainer_pc" --data examples/data --workers 2 --epochs 2 --train-images 4000
# The installed libraries are stripped; the debug info is a separate file.
test -L "$work/prefix/lib/libgeeps.so" && test -L "$work/prefix/lib/$soname"
real="$(readlink -f "$work/prefix/lib/libgeeps.so")"
test -f "$work/prefix/lib/debug/$(basename "$real").debug"
if readelf -S "$real" | grep '\.debug_' >/dev/null; then
  echo "$real still has debug sections" >&2
  exit 1
fi
ls -l "$lib/libgeeps.so" "$real" "$lib/libgeeps.a" "$work/prefix/lib/libgeeps.a"

step "build the trainer through pkg-config's static library (geeps-static)"
# shellcheck disable=SC2046
g++ -std=c++17 -O2 examples/cpp_trainer/trainer.cpp $(pkg-config --cflags --libs geeps-static) \
  -o "$work/cpp_trainer_static"
readelf -d "$work/cpp_trainer_static" | tee "$work/static_dynamic.txt" | grep NEEDED
if grep -q 'libgeeps' "$work/static_dynamic.txt"; then
  echo "the static link needs libgeeps.so" >&2
  exit 1
fi
# Without the library directory on any search path: it must not be needed.
"$work/cpp_trainer_static" --data examples/data --workers 2 --epochs 2 --train-images 2000

if command -v cmake >/dev/null; then
  step "build the trainer through CMake find_package(geeps)"
  cmake -S examples/cpp_trainer -B "$work/cmake" -DCMAKE_PREFIX_PATH="$work/prefix" \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$work/cmake" >/dev/null
  "$work/cmake/cpp_trainer" --data examples/data --workers 2 --epochs 2 --train-images 4000
else
  step "cmake not installed: CMake package not exercised"
fi
