# flashgen_target_defaults(target): warnings as errors and, with FLASHGEN_SANITIZE,
# AddressSanitizer + UBSan for our own code.
function(flashgen_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror)
  if(FLASHGEN_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()
