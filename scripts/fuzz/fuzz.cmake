# SPDX-License-Identifier: BSD-2-Clause
# The libFuzzer targets (-DTHROTTLE_FUZZ=ON, with clang++): the core built
# with coverage for libFuzzer, ASan and UBSan, and one executable per
# *.cpp of this folder (scripts/fuzz/), named after its file. hiredis is
# Debian's static archive, as in the module: built by gcc, without coverage,
# but its allocations and copies go through ASan's interceptors.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "THROTTLE_FUZZ needs clang++ "
                      "(-DCMAKE_CXX_COMPILER=clang++)")
endif()

set(THROTTLE_FUZZ_SANITIZERS -fsanitize=address,undefined
    -fno-sanitize-recover=all -fno-omit-frame-pointer)
target_compile_options(throttle_core PRIVATE -fsanitize=fuzzer-no-link
                       ${THROTTLE_FUZZ_SANITIZERS})

file(GLOB THROTTLE_FUZZ_SOURCES CONFIGURE_DEPENDS
     ${CMAKE_CURRENT_LIST_DIR}/*.cpp)
foreach(source ${THROTTLE_FUZZ_SOURCES})
  get_filename_component(name ${source} NAME_WE)
  add_executable(${name} ${source})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer
                         ${THROTTLE_FUZZ_SANITIZERS})
  target_link_options(${name} PRIVATE -fsanitize=fuzzer
                      ${THROTTLE_FUZZ_SANITIZERS})
  target_link_libraries(${name} PRIVATE throttle_core)
endforeach()
