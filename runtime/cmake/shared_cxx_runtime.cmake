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
# Uses FORGE_TORCH_PREFIX (the caller's torch); asked afresh at each configure
# (ldd takes milliseconds), so a changed torch is never linked against a stale
# answer. GCC only: Clang and its -static-libstdc++ are not handled.
function(forge_link_shared_cxx_runtime target)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    return()
  endif()
  set(libstdcxx "")
  execute_process(COMMAND ldd "${FORGE_TORCH_PREFIX}/lib/libc10.so"
                  OUTPUT_VARIABLE deps ERROR_QUIET RESULT_VARIABLE rc)
  # Two ifs: ${CMAKE_MATCH_1} is expanded before the if it stands in runs.
  if(rc EQUAL 0 AND deps MATCHES "libstdc\\+\\+\\.so\\.6 => (/[^ \t\n]+)")
    if(EXISTS "${CMAKE_MATCH_1}")
      set(libstdcxx "${CMAKE_MATCH_1}")
    endif()
  endif()
  if(libstdcxx)
    target_link_libraries(${target} PRIVATE "${libstdcxx}")
  else()
    message(STATUS "forge: torch's libstdc++.so.6 not found by ldd; linking -lstdc++ dynamically")
    target_link_libraries(${target} PRIVATE "-Wl,--push-state,--no-as-needed,-Bdynamic,-lstdc++,--pop-state")
  endif()
endfunction()
