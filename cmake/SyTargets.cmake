# Target helpers in the spirit of Abseil's absl_cc_library: one library per src/ folder,
# named sy_<lib> with alias sy::<lib>; one gtest binary per library; fuzz targets that are
# libFuzzer binaries under clang (SY_LIBFUZZER) and corpus-replay tests otherwise; benchmark
# binaries that ctest smoke-runs once.

# Warnings for our own code only; third-party headers come in as SYSTEM.
add_library(sy_warnings INTERFACE)
add_library(sy::warnings ALIAS sy_warnings)
target_compile_options(sy_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wimplicit-fallthrough
  $<$<BOOL:${SY_WERROR}>:-Werror>
  $<$<CXX_COMPILER_ID:Clang>:-Wthread-safety>)

# sy_optimize_sources(a.cc b.cc ...): under SY_OPTIMIZE_KERNELS (the asan preset), these
# sources of the current directory compile at -O2 in a Debug build: units whose loops the
# tests run for minutes (the CPU kernels, the grammar matcher), where -O0 under the
# sanitizers costs ~10x. The sanitizers' checks are inserted before optimisation and stay
# in. A header precompiled at -O0 does not load into an -O2 unit, so they parse their own.
function(sy_optimize_sources)
  if(SY_OPTIMIZE_KERNELS)
    set_source_files_properties(${ARGN} DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
                                PROPERTIES COMPILE_OPTIONS -O2 SKIP_PRECOMPILE_HEADERS ON)
  endif()
endfunction()

# Precompiled headers (cmake/precompiled_headers.h, and any further headers given) for the
# targets of many units, under SY_PRECOMPILE_HEADERS: libraries, test binaries and the
# switchyard binary.
function(sy_precompile_headers target)
  if(SY_PRECOMPILE_HEADERS)
    target_precompile_headers(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:${PROJECT_SOURCE_DIR}/cmake/precompiled_headers.h> ${ARGN})
  endif()
endfunction()

# Under SY_UNITY_BUILD (the sanitizer presets, which CI builds from nothing), the target's
# units compile in batches of 8, each batch one translation unit: every header is parsed
# once per batch instead of once per unit (sy_net: 59 -> 36 CPU-s under ASan). Units with
# options of their own (sy_optimize_sources) and the CPU kernels (src/runtime/CMakeLists.txt)
# still compile alone. A batch shares one namespace scope, so two units of a library must
# not define the same name at namespace scope, anonymous namespaces included. Tests stay one
# unit per file.
function(sy_unity_build target)
  if(SY_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()

# sy_cc_library(NAME text PUBLIC_DEPS sy::base PRIVATE_DEPS x): every .cc under the
# calling folder (subfolders included) makes up the library.
function(sy_cc_library)
  cmake_parse_arguments(SY "" "NAME" "PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  add_library(sy_${SY_NAME} STATIC ${srcs})
  add_library(sy::${SY_NAME} ALIAS sy_${SY_NAME})
  target_include_directories(sy_${SY_NAME} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(sy_${SY_NAME} PUBLIC ${SY_PUBLIC_DEPS} PRIVATE ${SY_PRIVATE_DEPS} sy::warnings)
  sy_precompile_headers(sy_${SY_NAME})
  sy_unity_build(sy_${SY_NAME})
endfunction()

# sy_cc_test(LIB base DEPS extra [LABEL concurrency]) -> binary sy_<lib>_tests from
# tests/unit/<lib>/*_test.cc, its tests labelled LABEL (default unit). One label only:
# gtest_discover_tests writes a list of labels out as separate arguments. A binary labelled
# concurrency (its tests start threads: the tsan preset runs those) is also a dependency of
# sy_concurrency_tests, which tests/CMakeLists.txt defines first, so that the tsan preset
# builds only those.
function(sy_cc_test)
  cmake_parse_arguments(SY "" "LIB;LABEL" "DEPS" ${ARGN})
  set(name sy_${SY_LIB}_tests)
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/unit/${SY_LIB}/*.cc)
  add_executable(${name} ${srcs})
  target_link_libraries(${name} PRIVATE sy::${SY_LIB} ${SY_DEPS} GTest::gtest GTest::gmock
                        GTest::gtest_main sy::warnings)
  target_compile_definitions(${name} PRIVATE
    SY_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  # Every unit includes gtest.h, parsed in ~1.5 s under ASan: 178 units, 4 CPU-minutes.
  sy_precompile_headers(${name} <gtest/gtest.h> <gmock/gmock.h>)
  if(NOT SY_LABEL)
    set(SY_LABEL unit)
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST
    PROPERTIES LABELS "${SY_LABEL}" ENVIRONMENT "SY_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  if(SY_LABEL STREQUAL "concurrency")
    add_dependencies(sy_concurrency_tests ${name})
  endif()
endfunction()

# sy_cc_fuzz(NAME tokenizer_json SRC x_fuzz.cc DEPS sy::text)
# The source defines LLVMFuzzerTestOneInput. Under SY_LIBFUZZER it links with libFuzzer
# (everything is compiled with its coverage instrumentation: see CMakeLists.txt); otherwise
# it links a replay main(). Either way ctest replays tests/fuzz/<NAME>_corpus once.
function(sy_cc_fuzz)
  cmake_parse_arguments(SY "" "NAME;SRC" "DEPS" ${ARGN})
  set(target sy_fuzz_${SY_NAME})
  if(SY_LIBFUZZER)
    add_executable(${target} ${SY_SRC})
    target_link_options(${target} PRIVATE -fsanitize=fuzzer)
  else()
    add_executable(${target} ${SY_SRC} ${PROJECT_SOURCE_DIR}/tests/fuzz/replay_main.cc)
  endif()
  target_link_libraries(${target} PRIVATE ${SY_DEPS} sy::warnings)
  set(corpus ${PROJECT_SOURCE_DIR}/tests/fuzz/${SY_NAME}_corpus)
  if(SY_LIBFUZZER)
    # -runs=0 makes libFuzzer replay the corpus and exit instead of fuzzing.
    add_test(NAME fuzz_replay.${SY_NAME} COMMAND ${target} -runs=0 ${corpus})
  else()
    add_test(NAME fuzz_replay.${SY_NAME} COMMAND ${target} ${corpus})
  endif()
  set_tests_properties(fuzz_replay.${SY_NAME} PROPERTIES LABELS "fuzz")
endfunction()

# sy_cc_benchmark(NAME text_tokenizer SRC x_benchmark.cc DEPS sy::text [SMOKE_FILTER regex])
# -> binary sy_bench_<NAME>, and a ctest bench_smoke.<NAME> (label bench) that runs each of
# its benchmarks for one iteration, or only those SMOKE_FILTER matches (Google Benchmark's
# --benchmark_filter) where running every size would take minutes under the sanitizers.
function(sy_cc_benchmark)
  cmake_parse_arguments(SY "" "NAME;SRC;SMOKE_FILTER" "DEPS" ${ARGN})
  set(target sy_bench_${SY_NAME})
  add_executable(${target} ${SY_SRC})
  target_link_libraries(${target} PRIVATE ${SY_DEPS} benchmark::benchmark sy::warnings)
  if(SY_BUILD_TESTS)
    set(args --benchmark_min_time=0)
    if(SY_SMOKE_FILTER)
      list(APPEND args --benchmark_filter=${SY_SMOKE_FILTER})
    endif()
    add_test(NAME bench_smoke.${SY_NAME} COMMAND ${target} ${args})
    set_tests_properties(bench_smoke.${SY_NAME} PROPERTIES LABELS "bench")
  endif()
endfunction()
