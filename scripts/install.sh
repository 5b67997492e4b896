#!/usr/bin/env bash
# Installs libgeeps for C and C++ programs under PREFIX, laid out as a
# distribution package would ship it:
#   PREFIX/include/geeps.h, PREFIX/include/geeps.hpp (C++ RAII wrapper)
#   PREFIX/lib/libgeeps.so.VERSION               the shared library (SONAME libgeeps.so.ABI), stripped
#   PREFIX/lib/libgeeps.so.ABI -> libgeeps.so.VERSION  what programs load (their NEEDED entry)
#   PREFIX/lib/libgeeps.so -> libgeeps.so.ABI    what -lgeeps links against
#   PREFIX/lib/libgeeps.a                        the static library, debug info stripped
#   PREFIX/lib/debug/libgeeps.so.VERSION.debug   the shared library's debug info (gnu-debuglink), and
#   PREFIX/lib/debug/.build-id/xx/yyyy.debug     the same by build id (gdb: set debug-file-directory PREFIX/lib/debug)
#   PREFIX/lib/pkgconfig/geeps.pc                pkg-config --cflags --libs geeps (shared)
#   PREFIX/lib/pkgconfig/geeps-static.pc         pkg-config --libs geeps-static (libgeeps.a + what it needs)
#   PREFIX/lib/cmake/geeps/geepsConfig.cmake     find_package(geeps) -> geeps::geeps, geeps::geeps_static
# VERSION is the workspace version in Cargo.toml (MAJOR.MINOR.PATCH); ABI is
# the part of it that changes when the C ABI breaks (0.2.1 -> 0.2, 1.4.0 ->
# 1: scripts/soname, geeps-ffi/build.rs).
# Builds the library first (cargo build --release -p geeps-ffi: only what
# libgeeps needs; its features resolve differently from a whole-workspace
# build, so after `cargo test --release --workspace` build with
# `cargo build --release --workspace --lib --bins --tests` and pass
# GEEPS_NO_BUILD=1, as .ci/ffi.sh does). Honours CARGO_TARGET_DIR.
# GEEPS_NO_STRIP=1 installs the libraries as built (with their debug info).
# Needs objcopy and strip (binutils) unless GEEPS_NO_STRIP=1.
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
soname="$(scripts/soname)"
real="libgeeps.so.$version"
strip_libs=1
if [ "${GEEPS_NO_STRIP:-0}" = 1 ]; then
  strip_libs=0
elif ! command -v objcopy >/dev/null || ! command -v strip >/dev/null; then
  echo "install.sh: objcopy and strip (binutils) are needed to split the debug info; install them or set GEEPS_NO_STRIP=1" >&2
  exit 1
fi
# The SONAME the library was linked with must be the one the links name.
if command -v readelf >/dev/null; then
  built_soname="$(readelf -d "$lib/libgeeps.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')"
  if [ "$built_soname" != "$soname" ]; then
    echo "install.sh: $lib/libgeeps.so has SONAME '${built_soname:-none}', expected $soname (geeps-ffi/build.rs); rebuild it" >&2
    exit 1
  fi
fi

install -d "$prefix/include" "$prefix/lib/pkgconfig" "$prefix/lib/cmake/geeps"
install -m 644 include/geeps.h include/geeps.hpp "$prefix/include/"

# Shared library: the versioned file, then the two links. Replacing the
# links (ln -sfn) and the file leaves programs that already run untouched.
rm -f "$prefix/lib/libgeeps.so" "$prefix/lib/$soname"
install -m 755 "$lib/libgeeps.so" "$prefix/lib/$real"
ln -sfn "$real" "$prefix/lib/$soname"
ln -sfn "$soname" "$prefix/lib/libgeeps.so"
install -m 644 "$lib/libgeeps.a" "$prefix/lib/libgeeps.a"

if [ "$strip_libs" = 1 ]; then
  # The debug info goes to a separate file that the library names by its
  # gnu-debuglink (file name + CRC) and that gdb also finds by build id.
  install -d "$prefix/lib/debug"
  debug="$prefix/lib/debug/$real.debug"
  objcopy --only-keep-debug "$prefix/lib/$real" "$debug"
  chmod 644 "$debug"
  objcopy --strip-unneeded --remove-section=.gnu_debuglink --add-gnu-debuglink="$debug" "$prefix/lib/$real"
  build_id="$(readelf -n "$prefix/lib/$real" 2>/dev/null | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p' | head -n1 || true)"
  if [ -n "$build_id" ] && [ "${#build_id}" -gt 2 ]; then
    install -d "$prefix/lib/debug/.build-id/${build_id:0:2}"
    ln -sfn "../../$real.debug" "$prefix/lib/debug/.build-id/${build_id:0:2}/${build_id:2}.debug"
  fi
  # A static archive keeps its symbols (the linker needs them) and drops
  # the debug info, as distributions ship them.
  strip --strip-debug "$prefix/lib/libgeeps.a"
fi

for f in geeps.pc geeps-static.pc geepsConfig.cmake geepsConfigVersion.cmake; do
  case "$f" in
    *.pc) dest="$prefix/lib/pkgconfig/$f" ;;
    *) dest="$prefix/lib/cmake/geeps/$f" ;;
  esac
  sed -e "s/@VERSION@/$version/g" -e "s/@SONAME@/$soname/g" "$templates/$f.in" > "$dest"
  chmod 644 "$dest"
done
echo "geeps $version installed under $prefix ($real, SONAME $soname)"
