# Build helpers: one function per kind of target, so warnings, sanitizers and
# the C++ standard are set in one place.

function(ddprun_apply_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
                                           -Wnon-virtual-dtor -Wold-style-cast)
  if(DDPRUN_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# Without vptr: GCC's UBSan runtime probes an object's vtable by writing it
# into a pipe, so in a process with no descriptor left (which ddprund's and
# the agent's tests of running out of descriptors make on purpose) every
# uncached check reports a sound object as having an "invalid vptr", and
# suppressions cannot help (they fail the same way). ASan still catches a
# call through a freed object. -Wmaybe-uninitialized: with ASan, GCC 12 warns
# inside libstdc++'s <regex> (GCC bug 105616); the plain build keeps it.
if(DDPRUN_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize=vptr -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined -Wno-maybe-uninitialized)
  add_link_options(-fsanitize=address,undefined -fno-sanitize=vptr)
endif()

# Each function in a section of its own, so that a linker can order the code
# a launch runs (docs/benchmarks.md, "The command line, the cgroup's answer,
# and what measured nothing"). On its own it changed neither code size nor
# page faults; a launch measured 0.05 to 0.24 ms faster in four paired runs.
function(ddprun_apply_code_layout target)
  target_compile_options(${target} PRIVATE -ffunction-sections)
endfunction()

# ddprun_program(target): a program started on every launch (ddprun) or by
# every test (ddprund). libstdc++ and libgcc are linked statically and a
# shared library only when the program calls it (--as-needed): at each start
# the dynamic loader maps, relocates and resolves the symbols of every shared
# library, which cost ddprun about half of its start-up (docs/benchmarks.md).
# Not under the sanitizers, whose runtimes expect the shared libstdc++.
# Its ~9,000 relative relocations are packed (DT_RELR, binutils 2.38 and
# glibc 2.36): 1.5 KiB for the loader to read at each start instead of 211.
include(CheckLinkerFlag)
check_linker_flag(CXX "LINKER:-z,pack-relative-relocs" DDPRUN_LINKER_PACKS_RELOCS)
function(ddprun_program target)
  ddprun_apply_code_layout(${target})
  if(NOT DDPRUN_SANITIZE)
    target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc LINKER:--as-needed)
  endif()
  if(DDPRUN_LINKER_PACKS_RELOCS)
    target_link_options(${target} PRIVATE LINKER:-z,pack-relative-relocs)
  endif()
endfunction()

# ddprun_add_library(NAME name SRCS ... PUBLIC_DEPS ... PRIVATE_DEPS ...)
# Creates ddprun_<name> with the alias ddprun::<name>, a PUBLIC include/ and a
# PRIVATE src/.
function(ddprun_add_library)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  set(target ddprun_${ARG_NAME})
  add_library(${target} STATIC ${ARG_SRCS})
  add_library(ddprun::${ARG_NAME} ALIAS ${target})
  target_include_directories(${target}
    PUBLIC "${CMAKE_CURRENT_SOURCE_DIR}/include"
    PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}/src")
  target_link_libraries(${target} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  ddprun_apply_warnings(${target})
  ddprun_apply_code_layout(${target})
endfunction()

# ddprun_add_test(NAME name SRCS ... DEPS ... LABELS ... [TIMEOUT seconds] [SERIAL])
# One GoogleTest executable; each test case becomes a ctest test carrying LABELS
# and a ctest timeout (default 120 s), so a hung case fails instead of stalling CI.
# SERIAL: its cases run alone (ctest's RUN_SERIAL), for one heavy enough to
# disturb the timing of tests beside it.
function(ddprun_add_test)
  cmake_parse_arguments(ARG "SERIAL" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gtest_main)
  ddprun_apply_warnings(${ARG_NAME})
  # The agents a test starts keep what they cache (the interpreter probe's
  # answers) in the build tree, never in the home directory of whoever runs
  # the suite.
  set(properties LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
                 ENVIRONMENT "XDG_CACHE_HOME=${DDPRUN_TEST_CACHE_HOME}")
  if(ARG_SERIAL)
    list(APPEND properties RUN_SERIAL TRUE)
  endif()
  gtest_discover_tests(${ARG_NAME} PROPERTIES ${properties} DISCOVERY_TIMEOUT 60)
endfunction()

# CLI11::CLI11. Debian's libcli11-dev ships the header without a CMake
# package in some versions.
macro(ddprun_find_cli11)
  find_package(CLI11 QUIET)
  if(NOT CLI11_FOUND)
    find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
    add_library(CLI11::CLI11 INTERFACE IMPORTED)
    target_include_directories(CLI11::CLI11 INTERFACE "${CLI11_INCLUDE_DIR}")
  endif()
endmacro()
