#!/usr/bin/env bash
# Installs libgeeps for C and C++ programs under PREFIX:
#   PREFIX/include/geeps.h, PREFIX/include/geeps.hpp (C++ RAII wrapper)
#   PREFIX/lib/libgeeps.so, PREFIX/lib/libgeeps.a
#   PREFIX/lib/pkgconfig/geeps.pc             (pkg-config --cflags --libs geeps)
#   PREFIX/lib/cmake/geeps/geepsConfig.cmake   (find_package(geeps) -> geeps::geeps, geeps::geeps_static)
# Builds the library first (cargo build --release -p geeps-ffi: only what
# libgeeps needs; its features resolve differently from a whole-workspace
# build, so after `cargo test --release --workspace` build with
# `cargo build --release --workspace --lib --bins --tests` and pass
# GEEPS_NO_BUILD=1, as .ci/ffi.sh does). Honours CARGO_TARGET_DIR.
# Usage: scripts/install.sh PREFIX
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 PREFIX" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$1"
prefix="$(cd "$1" && pwd)"
templates="$root/scripts/geeps-install"
cd "$root"
if [ "${GEEPS_NO_BUILD:-0}" != 1 ]; then
  cargo build --release -p geeps-ffi
fi
lib="${CARGO_TARGET_DIR:-target}/release"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)"
[ -n "$version" ] || { echo "install.sh: no version in Cargo.toml" >&2; exit 1; }

install -d "$prefix/include" "$prefix/lib/pkgconfig" "$prefix/lib/cmake/geeps"
install -m 644 include/geeps.h include/geeps.hpp "$prefix/include/"
install -m 755 "$lib/libgeeps.so" "$prefix/lib/"
install -m 644 "$lib/libgeeps.a" "$prefix/lib/"
for f in geeps.pc geepsConfig.cmake geepsConfigVersion.cmake; do
  case "$f" in
    *.pc) dest="$prefix/lib/pkgconfig/$f" ;;
    *) dest="$prefix/lib/cmake/geeps/$f" ;;
  esac
  sed "s/@VERSION@/$version/g" "$templates/$f.in" > "$dest"
  chmod 644 "$dest"
done
echo "geeps $version installed under $prefix"
