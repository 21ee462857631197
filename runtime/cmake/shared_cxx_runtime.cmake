# forge_link_shared_cxx_runtime(TARGET): link TARGET against the very
# libstdc++.so.6 that torch loads, whatever the compiler's default.
#
# forge's runtime is loaded into Python beside torch. A toolchain that links
# libstdc++ statically (a GCC passing -static-libstdc++, or one whose library
# folder holds only libstdc++.a, as on our H200 machines) gives each library its
# own copy of the iostream and locale state; mixed with torch's shared one,
# writing a number to a stream fails or crashes (on the H200: every eager call
# into libforge.so). Naming torch's libstdc++.so.6 by its full path among the
# target's own link libraries resolves every C++ runtime symbol before the
# static archive the driver appends, so that adds nothing.
# Include it after FORGE_TORCH_PREFIX (the caller's torch) is set: torch's
# libstdc++ is asked once per configure (ldd takes milliseconds), so a changed
# torch is never linked against a stale answer. GCC only: Clang and its
# -static-libstdc++ are not handled.
set(FORGE_TORCH_LIBSTDCXX "")
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  execute_process(COMMAND ldd "${FORGE_TORCH_PREFIX}/lib/libc10.so"
                  OUTPUT_VARIABLE _forge_deps ERROR_QUIET RESULT_VARIABLE _forge_rc)
  # Two ifs: ${CMAKE_MATCH_1} is expanded before the if it stands in runs.
  if(_forge_rc EQUAL 0 AND _forge_deps MATCHES "libstdc\\+\\+\\.so\\.6 => (/[^ \t\n]+)")
    if(EXISTS "${CMAKE_MATCH_1}")
      set(FORGE_TORCH_LIBSTDCXX "${CMAKE_MATCH_1}")
    endif()
  endif()
  if(NOT FORGE_TORCH_LIBSTDCXX)
    message(STATUS "forge: torch's libstdc++.so.6 not found by ldd; linking -lstdc++ dynamically")
  endif()
endif()

function(forge_link_shared_cxx_runtime target)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    return()
  endif()
  if(FORGE_TORCH_LIBSTDCXX)
    target_link_libraries(${target} PRIVATE "${FORGE_TORCH_LIBSTDCXX}")
  else()
    target_link_libraries(${target} PRIVATE "-Wl,--push-state,--no-as-needed,-Bdynamic,-lstdc++,--pop-state")
  endif()
endfunction()
