# Finds the torch that runs the user's model, for the runtime projects
# (runtime/capture, runtime/worker): both include this file at top level,
# configured with -DCMAKE_PREFIX_PATH=$(python -c 'import torch;print(torch.utils.cmake_prefix_path)').
#
# In:  FORGE_TORCH_BY_HAND  AUTO (default when unset): link the torch libraries
#          by hand, without find_package(Torch), when torch is a CUDA build and
#          no CUDA toolkit is found (find_package(Torch) of a CUDA build stops
#          with a fatal error then); ON: always by hand; OFF: never.
#      FORGE_TORCH_FIND_CUDATOOLKIT  ON: find_package(CUDAToolkit) before
#          torch when torch is a CUDA build (the worker's CUDA device code links
#          CUDA::cudart; found first, the toolkit's own include folders come
#          before the ones torch adds).
# Out: the INTERFACE target forge_torch; FORGE_TORCH_PREFIX (torch's install
#      folder), FORGE_TORCH_IS_CUDA (libtorch_cuda.so is there),
#      FORGE_TORCH_BY_HAND (ON/OFF), Torch_VERSION.
# By hand, libtorch.so still pulls in libtorch_cuda.so itself, so the CUDA
# kernels are registered either way; only code of our own that needs CUDA
# headers must be left out.
find_file(FORGE_TORCH_CONFIG TorchConfig.cmake PATH_SUFFIXES Torch share/cmake/Torch
          NO_CACHE REQUIRED)
get_filename_component(FORGE_TORCH_PREFIX "${FORGE_TORCH_CONFIG}/../../../.." ABSOLUTE)
set(FORGE_TORCH_IS_CUDA OFF)
if(EXISTS "${FORGE_TORCH_PREFIX}/lib/libtorch_cuda.so")
  set(FORGE_TORCH_IS_CUDA ON)
endif()

if(FORGE_TORCH_IS_CUDA AND NOT DEFINED CUDA_TOOLKIT_ROOT_DIR)
  # Torch's FindCUDA derives the toolkit root from the first nvcc on PATH, which
  # is wrong when that nvcc is a wrapper script (/usr/local/bin/nvcc -> ...).
  foreach(root "$ENV{CUDA_HOME}" "$ENV{CUDA_PATH}" /usr/local/cuda)
    if(root AND EXISTS "${root}/bin/nvcc" AND EXISTS "${root}/include/cuda_runtime_api.h")
      set(CUDA_TOOLKIT_ROOT_DIR "${root}" CACHE PATH "CUDA toolkit root")
      set(CUDAToolkit_ROOT "${root}")
      break()
    endif()
  endforeach()
endif()

if(FORGE_TORCH_IS_CUDA AND FORGE_TORCH_FIND_CUDATOOLKIT)
  find_package(CUDAToolkit QUIET)
endif()

if(NOT DEFINED FORGE_TORCH_BY_HAND OR FORGE_TORCH_BY_HAND STREQUAL "AUTO")
  set(FORGE_TORCH_BY_HAND OFF)
  if(FORGE_TORCH_IS_CUDA)
    # Ask find_package(Torch)'s question first, with torch's own FindCUDA (the
    # cached answer is reused by torch).
    set(_forge_saved_module_path "${CMAKE_MODULE_PATH}")
    list(APPEND CMAKE_MODULE_PATH "${FORGE_TORCH_PREFIX}/share/cmake/Caffe2"
                                  "${FORGE_TORCH_PREFIX}/share/cmake/Caffe2/Modules_CUDA_fix")
    find_package(CUDA QUIET)
    set(CMAKE_MODULE_PATH "${_forge_saved_module_path}")
    if(NOT CUDA_FOUND)
      message(STATUS "forge: torch is a CUDA build but no CUDA toolkit was found: "
                     "torch linked by hand, no CUDA code of ours")
      set(FORGE_TORCH_BY_HAND ON)
    endif()
  endif()
endif()

add_library(forge_torch INTERFACE)
if(FORGE_TORCH_BY_HAND)
  # The pieces of TorchConfig.cmake we need, without its CUDA requirements.
  foreach(lib torch torch_cpu c10)
    find_library(FORGE_LIB_${lib} ${lib} PATHS "${FORGE_TORCH_PREFIX}/lib" NO_DEFAULT_PATH REQUIRED)
  endforeach()
  target_include_directories(forge_torch SYSTEM INTERFACE
    "${FORGE_TORCH_PREFIX}/include"
    "${FORGE_TORCH_PREFIX}/include/torch/csrc/api/include")
  target_link_libraries(forge_torch INTERFACE
    "${FORGE_LIB_torch}" "${FORGE_LIB_torch_cpu}" "${FORGE_LIB_c10}")
  target_compile_options(forge_torch INTERFACE -D_GLIBCXX_USE_CXX11_ABI=1)
else()
  find_package(Torch REQUIRED)
  # We need no CUDA library torch does not load itself; a partial toolkit (no
  # nvrtc, say) leaves NOTFOUND entries here that would break the link.
  list(FILTER TORCH_LIBRARIES EXCLUDE REGEX "-NOTFOUND$")
  target_link_libraries(forge_torch INTERFACE ${TORCH_LIBRARIES})
endif()
if(NOT Torch_VERSION AND EXISTS "${FORGE_TORCH_PREFIX}/share/cmake/Torch/TorchConfigVersion.cmake")
  include("${FORGE_TORCH_PREFIX}/share/cmake/Torch/TorchConfigVersion.cmake")
  set(Torch_VERSION "${PACKAGE_VERSION}")
endif()
