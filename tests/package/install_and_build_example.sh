#!/bin/sh
# Installs the build into a staging prefix, checks that nothing installed names a path of
# this machine (the CUDA toolkit, the source or build tree, the prefix itself), moves the
# prefix elsewhere, then builds and runs examples/embed_cpp and compiler_consumer/
# (flashgen::compiler) against the moved copy as outside projects would (find_package),
# and checks flashgen.pc.
# Usage: install_and_build_example.sh CMAKE BUILD_DIR SOURCE_DIR SCRATCH_DIR CUDA_ROOT GENERATOR [MAKE_PROGRAM]
# Compilers and flags come from $CC, $CXX, $CFLAGS and $CXXFLAGS, as for any CMake project.
set -eu
cmake=$1 build=$2 source=$3 scratch=$4 cuda_root=$5 generator=$6 make_program=${7:-}
installed=$scratch/installed

rm -rf "$scratch"
"$cmake" --install "$build" --prefix "$installed"

# Relocatable: the CMake package and flashgen.pc name no directory of this machine (CUDA is
# dlopen'ed at run time, so no CUDA path belongs there).
for file in "$installed"/lib/cmake/flashgen/*.cmake "$installed"/lib/pkgconfig/flashgen.pc; do
  for path in /usr/local/cuda "$cuda_root" "$build" "$source" "$installed"; do
    if grep -n -F "$path" "$file"; then
      echo "$file names $path: the installed package is not relocatable" >&2
      exit 1
    fi
  done
done
stage=$scratch/moved
mv "$installed" "$stage"

# configure_and_build SOURCE BINARY: an outside CMake project that finds the staged package.
configure_and_build() {
  binary=$2
  set -- -S "$1" -B "$binary" -G "$generator" -DCMAKE_PREFIX_PATH="$stage" -DCMAKE_BUILD_TYPE=Release
  [ -n "$make_program" ] && set -- "$@" -DCMAKE_MAKE_PROGRAM="$make_program"
  "$cmake" "$@"
  "$cmake" --build "$binary"
}

configure_and_build "$source/examples/embed_cpp" "$scratch/example"
"$scratch/example/embed_cpp"
"$scratch/example/embed_cpp_static"
configure_and_build "$source/tests/package/compiler_consumer" "$scratch/compiler_consumer"
"$scratch/compiler_consumer/print_kernel_source"
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
