#!/bin/sh
# Installs the build into a staging prefix, then builds and runs examples/embed_cpp
# against it as an outside project would (find_package), and checks flashgen.pc.
# Usage: install_and_build_example.sh CMAKE BUILD_DIR SOURCE_DIR SCRATCH_DIR GENERATOR [MAKE_PROGRAM]
# Compilers and flags come from $CC, $CXX, $CFLAGS and $CXXFLAGS, as for any CMake project.
set -eu
cmake=$1 build=$2 source=$3 scratch=$4 generator=$5 make_program=${6:-}
stage=$scratch/stage

rm -rf "$scratch"
"$cmake" --install "$build" --prefix "$stage"

set -- -S "$source/examples/embed_cpp" -B "$scratch/example" -G "$generator" \
  -DCMAKE_PREFIX_PATH="$stage" -DCMAKE_BUILD_TYPE=Release
[ -n "$make_program" ] && set -- "$@" -DCMAKE_MAKE_PROGRAM="$make_program"
"$cmake" "$@"
"$cmake" --build "$scratch/example"
"$scratch/example/embed_cpp"
"$scratch/example/embed_cpp_static"
"$stage/bin/flashgen" --help >/dev/null

if command -v pkg-config >/dev/null; then
  libs=$(PKG_CONFIG_PATH="$stage/lib/pkgconfig" pkg-config --libs flashgen)
  cflags=$(PKG_CONFIG_PATH="$stage/lib/pkgconfig" pkg-config --cflags flashgen)
  echo "pkg-config: $cflags $libs"
  case "$libs" in *-lflashgen*) ;; *) echo "pkg-config --libs lacks -lflashgen: $libs" >&2; exit 1 ;; esac
  [ -f "$(echo "$cflags" | sed 's/^-I//; s/ *$//')/flashgen/flashgen.hpp" ] ||
    { echo "pkg-config --cflags does not point at the installed headers: $cflags" >&2; exit 1; }
  # A C program built from flashgen.pc alone.
  printf '#include <flashgen/flashgen.h>\n#include <stdio.h>\nint main(void) { puts(flashgen_version()); return 0; }\n' |
    ${CC:-cc} ${CFLAGS:-} -x c - $cflags $libs -o "$scratch/version_c"
  LD_LIBRARY_PATH="$stage/lib" "$scratch/version_c"
fi
