# Finds LibTorch (Debian's libtorch-dev, or a PyTorch wheel's share/cmake) and a
# Python interpreter that can import torch. Sets DDPRUN_HAVE_TORCH,
# DDPRUN_TORCH_HAS_CUDA (LibTorch was built with CUDA and ships c10d's NCCL
# process group: train then trains on GPUs), DDPRUN_TORCH_HAS_GLOO (Gloo's
# headers are there: train can train on the CPU) and DDPRUN_TORCH_PYTHON.

set(DDPRUN_HAVE_TORCH OFF)
set(DDPRUN_TORCH_HAS_CUDA OFF)
set(DDPRUN_TORCH_HAS_GLOO OFF)
if(NOT DDPRUN_WITH_TORCH STREQUAL "OFF")
  if(DDPRUN_WITH_TORCH STREQUAL "ON")
    find_package(Torch REQUIRED)
  else()
    find_package(Torch QUIET)
  endif()
  if(Torch_FOUND)
    set(DDPRUN_HAVE_TORCH ON)
    # LibTorch's own target carries flags (-D_GLIBCXX_USE_CXX11_ABI, ...); we
    # wrap it so our targets get its headers as SYSTEM and never its warnings.
    add_library(ddprun_torch INTERFACE)
    target_link_libraries(ddprun_torch INTERFACE ${TORCH_LIBRARIES})
    target_include_directories(ddprun_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
    # c10d's Gloo header needs Gloo's own, which Debian's libgloo-dev has
    # (beside LibTorch's in /usr/include) and a PyTorch wheel does not.
    # Not cached (NO_CACHE): a build directory configured again against
    # another LibTorch must not keep the last one's answer.
    find_path(DDPRUN_GLOO_HEADER gloo/algorithm.h PATHS ${TORCH_INCLUDE_DIRS} NO_DEFAULT_PATH
              NO_CACHE)
    if(DDPRUN_GLOO_HEADER)
      set(DDPRUN_TORCH_HAS_GLOO ON)
      target_compile_definitions(ddprun_torch INTERFACE USE_C10D_GLOO)
    endif()
    add_library(ddprun::torch ALIAS ddprun_torch)
    # Debian's libtorch-dev ships c10d's NCCL header but no CUDA libraries.
    find_path(DDPRUN_NCCL_GROUP_HEADER torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp
              PATHS ${TORCH_INCLUDE_DIRS} NO_DEFAULT_PATH NO_CACHE)
    # That header includes nccl.h: without NCCL's headers the CPU seam is built.
    # LibTorch's own NCCL first: a PyTorch wheel's is in the NCCL wheel beside
    # torch/ (site-packages/nvidia/nccl/include, or nvidia/cu13/include), and
    # another version's header (a system libnccl-dev) would give c10d's
    # inline code structs of another size.
    file(GLOB _ddprun_wheel_includes "${TORCH_INSTALL_PREFIX}/../nvidia/*/include")
    find_path(DDPRUN_NCCL_HEADER nccl.h PATHS ${TORCH_INCLUDE_DIRS} ${_ddprun_wheel_includes}
              NO_DEFAULT_PATH NO_CACHE)
    if(NOT DDPRUN_NCCL_HEADER)
      find_path(DDPRUN_NCCL_HEADER nccl.h PATHS ${CUDA_INCLUDE_DIRS}
                ${CUDA_TOOLKIT_ROOT_DIR}/include NO_CACHE)
    endif()
    if(TORCH_CUDA_LIBRARIES AND DDPRUN_NCCL_GROUP_HEADER AND DDPRUN_NCCL_HEADER)
      set(DDPRUN_TORCH_HAS_CUDA ON)
      target_compile_definitions(ddprun_torch INTERFACE USE_C10D_NCCL)
      target_include_directories(ddprun_torch SYSTEM INTERFACE "${DDPRUN_NCCL_HEADER}")
    endif()
    message(STATUS "ddprun: LibTorch found (CUDA: ${DDPRUN_TORCH_HAS_CUDA}, Gloo: "
                   "${DDPRUN_TORCH_HAS_GLOO})")
    # Neither would make a train that refuses every run: libtorch-dev does
    # not pull in libgloo-dev.
    if(NOT DDPRUN_TORCH_HAS_CUDA AND NOT DDPRUN_TORCH_HAS_GLOO)
      message(FATAL_ERROR "ddprun: LibTorch at ${TORCH_INSTALL_PREFIX} has no CUDA, and Gloo's "
                          "headers (gloo/algorithm.h) are not beside its own: install "
                          "libgloo-dev, or configure with -DDDPRUN_WITH_TORCH=OFF")
    endif()
  else()
    message(STATUS "ddprun: LibTorch not found; worker, compat tests and store_bench are skipped")
  endif()
endif()

# The first python3 on PATH may not have torch; pick the one that does.
set(DDPRUN_TORCH_PYTHON "" CACHE FILEPATH "A Python interpreter that can import torch")
if(NOT DDPRUN_TORCH_PYTHON)
  foreach(candidate /usr/bin/python3 python3)
    find_program(_py NAMES ${candidate} NO_CACHE)
    if(_py)
      execute_process(COMMAND ${_py} -c "import torch" RESULT_VARIABLE _rc
                      OUTPUT_QUIET ERROR_QUIET)
      if(_rc EQUAL 0)
        set(DDPRUN_TORCH_PYTHON ${_py} CACHE FILEPATH "" FORCE)
        break()
      endif()
    endif()
    unset(_py)
  endforeach()
endif()
if(DDPRUN_TORCH_PYTHON)
  message(STATUS "ddprun: Python with torch: ${DDPRUN_TORCH_PYTHON}")
else()
  message(STATUS "ddprun: no Python with torch found; Python compat tests will skip")
endif()
