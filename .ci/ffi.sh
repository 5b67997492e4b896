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
#   4. install under a temporary prefix and build the trainer again through
#      pkg-config (and through CMake's find_package when cmake is present).
# Needs gcc, g++ and gzip; installs pkg-config with apt when it is missing.
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

step "C error paths under AddressSanitizer"
abs_lib="$(cd "$lib" && pwd)"
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
"$work/cpp_trainer_pc" --data examples/data --workers 2 --epochs 2 --train-images 4000

if command -v cmake >/dev/null; then
  step "build the trainer through CMake find_package(geeps)"
  cmake -S examples/cpp_trainer -B "$work/cmake" -DCMAKE_PREFIX_PATH="$work/prefix" \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$work/cmake" >/dev/null
  "$work/cmake/cpp_trainer" --data examples/data --workers 2 --epochs 2 --train-images 4000
else
  step "cmake not installed: CMake package not exercised"
fi
