# forge_link_shared_cxx_runtime(TARGET): link the C++ runtime as the shared
# libstdc++.so.6, whatever the compiler's default.
#
# forge's runtime is loaded into Python beside torch, which uses the shared
# libstdc++. A toolchain that links libstdc++ statically (a GCC wrapper passing
# -static-libstdc++, as on our H200 machines) gives each library its own copy of
# the iostream and locale state; mixed with the shared one, writing a number to
# a stream fails or crashes (on the H200: every eager call into libforge.so).
# Naming the shared library among the target's own link libraries resolves
# everything before the static archive the driver appends, so it adds nothing.
function(forge_link_shared_cxx_runtime target)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_link_libraries(${target} PRIVATE "-Wl,--push-state,--no-as-needed,-Bdynamic,-lstdc++,--pop-state")
  endif()
endfunction()
