#!/usr/bin/env bash
# `scripts/gpu-check pack` (called by it, not directly):
#   bash scripts/gpu-check.d/pack.sh REPO_ROOT DIR
# Builds the release test binaries with the features of
# `cargo test --release --workspace` (nothing rebuilds after the tests lane),
# the bench of the row kernels and libgeeps, compiles the C ABI's CUDA test,
# then bundle.py lays out DIR/bundle like the repository (stripped binaries,
# the data, the models, the runner) and DIR/gpu-check.tar.xz is the one file
# to carry.
set -euo pipefail

root="$1"
out="$2"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
cd "$root"
export CARGO_TERM_COLOR=never
start=$SECONDS
step() { printf '==> gpu-check pack: %s  [%d s]\n' "$*" $((SECONDS - start)); }

mkdir -p "$out"
work="$out/.work"
rm -rf "$work"
mkdir -p "$work"

step "cargo: release test binaries (the workspace test build), the bins, libgeeps"
# The same selections .ci/cuda.sh and .ci/ffi.sh make: the workspace with its
# lib, bin and test targets resolves features as `cargo test --release
# --workspace` does, so after the tests lane this only lists what is built.
cargo build --release --workspace --lib --bins --tests --message-format=json --quiet >"$work/build.json"
cargo test --release --workspace --no-run --message-format=json --quiet >"$work/tests.json"
# The row-kernel bench (harness = false: built as a test it is the same main).
cargo test --release --workspace --no-run --bench gpu_kernels --message-format=json --quiet >"$work/bench.json"

target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac

step "the C ABI's CUDA test program (geeps-ffi/ctest/cuda.c, as .ci/ffi.sh step 3b, without ASan)"
# Linked with -lgeeps, so it records the SONAME (libgeeps.so.ABI); the bundle
# ships libgeeps.so with that link in lib/, found through $ORIGIN.
gcc -std=c11 -Wall -Wextra -Werror -O1 -Iinclude geeps-ffi/ctest/cuda.c \
  -L"$target/release" -lgeeps -Wl,-rpath,'$ORIGIN/../lib' -o "$work/ffi_cuda"

step "lay out the bundle"
python3 "$root/scripts/gpu-check.d/bundle.py" --root "$root" --target "$target" --work "$work" \
  --soname "$(scripts/soname)" --out "$out/bundle"

step "compress (tar + xz): $out/gpu-check.tar.xz"
rm -f "$out/gpu-check.tar.xz"
tar -C "$out/bundle" -cf - . | xz -T0 -6 >"$out/gpu-check.tar.xz.part"
mv "$out/gpu-check.tar.xz.part" "$out/gpu-check.tar.xz"
rm -rf "$work"

unpacked=$(du -sb "$out/bundle" | cut -f1)
packed=$(stat -c %s "$out/gpu-check.tar.xz")
limit=$((60 * 1024 * 1024))
printf 'bundle: %s (%.1f MiB unpacked); carry %s (%.1f MiB; limit 60 MiB)\n' "$out/bundle" \
  "$(awk -v b="$unpacked" 'BEGIN { print b / 1048576 }')" "$out/gpu-check.tar.xz" "$(awk -v b="$packed" 'BEGIN { print b / 1048576 }')"
if [ "$packed" -gt "$limit" ]; then
  echo "gpu-check pack: $out/gpu-check.tar.xz is $packed bytes, over 60 MiB" >&2
  exit 1
fi
step "done. There: mkdir b && tar -xJf gpu-check.tar.xz -C b && b/scripts/gpu-check run OUTDIR"
