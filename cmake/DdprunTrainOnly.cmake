# DDPRUN_TRAIN_ONLY: train and the libraries of proto/ it links
# (ddprun::env_contract, ddprun::visible_gpus, ddprun::cli_args), nothing
# else: no tests, benchmarks or packages. LibTorch is required. Included from the top-level
# CMakeLists.txt, which returns right after.
find_package(nlohmann_json 3.10 REQUIRED)
ddprun_find_cli11()
set(DDPRUN_WITH_TORCH ON)
include(DdprunTorch)
set(DDPRUN_BUILD_TESTS OFF)
add_subdirectory(proto)
add_subdirectory(worker)
message(STATUS "ddprun: DDPRUN_TRAIN_ONLY: building train alone (CUDA: ${DDPRUN_TORCH_HAS_CUDA})")
