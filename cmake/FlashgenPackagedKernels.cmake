# The kernel set the Python wheel ships as flashgen/kernels (docs/cache.md, "Kernels shipped
# with the package"): the wheel's own CLI warms it while the wheel is built, once per NVRTC of
# FLASHGEN_PACKAGED_NVRTC, into one directory per NVRTC release (`cache warm --package`). An
# installation then serves these variants at its first call without compiling, and without
# any NVRTC where the driver can load the set. Built only for the wheel (pyproject.toml's
# build targets); an ordinary build never compiles it.
# The set: `cache warm` option strings, one warm each (a CMake list). Every variant of the
# common head dims on every arch, forward, backward and decode; and on Hopper, in bf16 and fp16,
# the window and softcap variants (Mistral's windows, Gemma 2's softcap with or without them);
# the deterministic variants of the common head dims, which no substitute may stand in for
# (their first and later calls must be bitwise equal); and the common variants over packed
# sequences (varlen: cu_seqlens; the lengths stand for the longest sequence, 1 for batches of
# short ones) and the decode over a contiguous or paged KV cache (dense or packed queries, up
# to 16 query rows per KV head), which no substitute serves either.
# Other head dims with these options run on the set's next class at their first calls while
# their own kernels compile (docs/cache.md, "Substitute kernels while a variant compiles").
set(FLASHGEN_PACKAGED_KERNELS
    "--head-dims 64,128,256 --dtypes bf16,fp16 --causal both --passes fwd,bwd --seqlens 1,1k,4k,16k --archs sm_80,sm_86,sm_89,sm_90a"
    "--head-dims 64,128,256 --dtypes bf16,fp16 --causal both --window both --softcap both --passes fwd,bwd --seqlens 1k,4k,16k --archs sm_90a"
    "--head-dims 64,128,256 --dtypes bf16,fp16 --causal both --deterministic on --passes bwd --seqlens 1k,4k,16k --archs sm_80,sm_86,sm_89,sm_90a"
    "--head-dims 64,128,256 --dtypes bf16,fp16 --causal both --varlen on --passes fwd,bwd --seqlens 1,1k,4k,16k --archs sm_80,sm_86,sm_89,sm_90a"
    "--head-dims 64,128,256 --dtypes bf16,fp16 --causal both --varlen both --kv-cache contiguous,paged --passes fwd --seqlens 1 --archs sm_80,sm_86,sm_89,sm_90a"
    CACHE STRING "`flashgen cache warm` options of the kernel set the wheel ships, one warm per list item (OFF: none)")
set(FLASHGEN_PACKAGED_NVRTC "${CUDA_nvrtc_LIBRARY}"
    CACHE STRING "libnvrtc files (;-separated) whose kernels the wheel ships, newest CUDA first (default: the toolkit's)")

set(packaged_dir ${PROJECT_BINARY_DIR}/packaged-kernels)
set(warm_commands)
if(FLASHGEN_PACKAGED_KERNELS)
  foreach(nvrtc IN LISTS FLASHGEN_PACKAGED_NVRTC)
    if(NOT EXISTS "${nvrtc}")
      message(WARNING "FLASHGEN_PACKAGED_NVRTC: ${nvrtc} is not a file: the wheel ships no kernels of it")
      continue()
    endif()
    foreach(set_options IN LISTS FLASHGEN_PACKAGED_KERNELS)
      separate_arguments(warm_options UNIX_COMMAND "${set_options}")
      list(APPEND warm_commands COMMAND ${CMAKE_COMMAND} -E env FLASHGEN_NVRTC=${nvrtc} FLASHGEN_LOG_LEVEL=warning
           $<TARGET_FILE:flashgen_cli_wheel> cache warm --package ${packaged_dir} ${warm_options})
    endforeach()
  endforeach()
endif()
add_custom_command(OUTPUT ${packaged_dir}.stamp
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${packaged_dir}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${packaged_dir}
  ${warm_commands}
  COMMAND ${CMAKE_COMMAND} -E touch ${packaged_dir}.stamp
  DEPENDS flashgen_cli_wheel
  COMMENT "Warming the kernels the wheel ships"
  VERBATIM USES_TERMINAL)
add_custom_target(flashgen_packaged_kernels DEPENDS ${packaged_dir}.stamp)
# The entries only: not the locks and temporaries of the warming.
install(DIRECTORY ${packaged_dir}/ DESTINATION flashgen/kernels COMPONENT python_wheel EXCLUDE_FROM_ALL
        PATTERN .locks EXCLUDE PATTERN .tmp EXCLUDE)
