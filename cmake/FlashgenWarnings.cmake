# flashgen_target_defaults(target): warnings as errors and, with FLASHGEN_SANITIZE,
# AddressSanitizer + UBSan for our own code.
function(flashgen_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra)
  # GCC 12 and 13 at -O3 report a false -Wrestrict inside libstdc++'s std::string (GCC bug 105329).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 14)
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  if(FLASHGEN_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(FLASHGEN_SANITIZE)
    # GCC 12's flow analysis under ASan reports false maybe-uninitialized warnings in libstdc++ (std::regex).
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
                           -fno-sanitize-recover=undefined -Wno-maybe-uninitialized)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()
