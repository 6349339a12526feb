# Coverage-guided fuzzing (tests/fuzz/README.md). Every harness tests/fuzz/fuzz_NAME.c is built
# twice:
#   fuzz_replay_NAME  (every build): replays tests/fuzz/seeds/NAME and tests/fuzz/regressions/NAME,
#                     the inputs of every crash the fuzzer found, as ctest fuzz_regressions_NAME;
#   fuzz_NAME         (-DDSSPEC_FUZZ=ON with clang): the libFuzzer binary; ctest fuzz_NAME (label
#                     "fuzz") searches for DSSPEC_FUZZ_SECONDS from the seeds and its dictionary.
set(FUZZ_DIR ${CMAKE_SOURCE_DIR}/tests/fuzz)
set(DSSPEC_FUZZ_SECONDS 30 CACHE STRING "seconds each fuzz_NAME ctest searches")
set(CLI_FUZZ_SOURCES ${CMAKE_SOURCE_DIR}/cli/flags.c ${CMAKE_SOURCE_DIR}/cli/runner.c ${CMAKE_SOURCE_DIR}/cli/run_output.c
    ${CMAKE_SOURCE_DIR}/cli/run_conflicts.c ${CMAKE_SOURCE_DIR}/cli/progress.c)

add_library(fuzz_util STATIC ${FUZZ_DIR}/fuzz_util.c ${CMAKE_SOURCE_DIR}/tests/checkpoint/synth_checkpoint.c)
target_link_libraries(fuzz_util PUBLIC dsspec_core)
target_compile_definitions(fuzz_util PUBLIC DSSPEC_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_library(fuzz_tokenizer STATIC ${FUZZ_DIR}/fuzz_tokenizer.c)
target_link_libraries(fuzz_tokenizer PUBLIC fuzz_util dsspec_tokenizer)

# NAME -> extra sources and libraries
set(FUZZ_HARNESSES config safetensors index checkpoint tokenizer_load tokenizer_config encode decode chat trace report flags session)
set(FUZZ_LIBS_config dsspec_core)
set(FUZZ_LIBS_safetensors dsspec_core)
set(FUZZ_LIBS_index dsspec_core)
set(FUZZ_LIBS_checkpoint dsspec_core)
set(FUZZ_LIBS_tokenizer_load dsspec_tokenizer)
set(FUZZ_LIBS_tokenizer_config dsspec_tokenizer)
set(FUZZ_LIBS_encode fuzz_tokenizer)
set(FUZZ_LIBS_decode fuzz_tokenizer)
set(FUZZ_LIBS_chat fuzz_tokenizer)
set(FUZZ_LIBS_trace dsspec_cache)
set(FUZZ_LIBS_report dsspec_engine)
set(FUZZ_SRCS_report ${CMAKE_SOURCE_DIR}/cli/report.c ${CMAKE_SOURCE_DIR}/cli/report_format.c
    ${CMAKE_SOURCE_DIR}/cli/report_html.c ${CMAKE_SOURCE_DIR}/cli/report_series.c ${CMAKE_SOURCE_DIR}/cli/flags.c)
set(FUZZ_LIBS_flags dsspec_engine)
set(FUZZ_SRCS_flags ${CLI_FUZZ_SOURCES})
set(FUZZ_LIBS_session dsspec_engine)
# The index seed is the synthetic checkpoint's whole index (132 KB); the CLI harnesses print usage
# errors on every run, so their stdout and stderr are closed (libFuzzer keeps its own copy).
set(FUZZ_MAXLEN_index 262144)
set(FUZZ_FDMASK_report 3)
set(FUZZ_FDMASK_flags 3)

if(DSSPEC_FUZZ)
  add_custom_target(fuzz_harnesses)
endif()
foreach(h ${FUZZ_HARNESSES})
  set(inputs ${FUZZ_DIR}/seeds/${h})
  if(EXISTS ${FUZZ_DIR}/regressions/${h})
    list(APPEND inputs ${FUZZ_DIR}/regressions/${h})
  endif()
  add_executable(fuzz_replay_${h} ${FUZZ_DIR}/fuzz_${h}.c ${FUZZ_DIR}/replay_main.c ${FUZZ_SRCS_${h}})
  target_link_libraries(fuzz_replay_${h} PRIVATE fuzz_util ${FUZZ_LIBS_${h}})
  add_test(NAME fuzz_regressions_${h} COMMAND fuzz_replay_${h} ${inputs})
  if(DSSPEC_FUZZ)
    add_executable(fuzz_${h} EXCLUDE_FROM_ALL ${FUZZ_DIR}/fuzz_${h}.c ${FUZZ_SRCS_${h}})
    target_link_libraries(fuzz_${h} PRIVATE fuzz_util ${FUZZ_LIBS_${h}})
    target_link_options(fuzz_${h} PRIVATE -fsanitize=fuzzer)
    add_dependencies(fuzz_harnesses fuzz_${h})
    # New inputs go to a scratch corpus in the build tree; the seeds stay read-only. A crash
    # writes crash-* into the build tree and fails the test.
    set(corpus ${CMAKE_CURRENT_BINARY_DIR}/fuzz_corpus/${h})
    set(maxlen 65536)
    if(FUZZ_MAXLEN_${h})
      set(maxlen ${FUZZ_MAXLEN_${h}})
    endif()
    set(fdmask 0)
    if(FUZZ_FDMASK_${h})
      set(fdmask ${FUZZ_FDMASK_${h}})
    endif()
    file(MAKE_DIRECTORY ${corpus})
    add_test(NAME fuzz_${h} COMMAND fuzz_${h} -max_total_time=${DSSPEC_FUZZ_SECONDS} -timeout=20 -rss_limit_mb=2048
             -max_len=${maxlen} -close_fd_mask=${fdmask} -dict=${FUZZ_DIR}/dicts/${h}.dict
             -artifact_prefix=${CMAKE_CURRENT_BINARY_DIR}/fuzz_crash_${h}- ${corpus} ${inputs})
    set_tests_properties(fuzz_${h} PROPERTIES LABELS fuzz TIMEOUT 600)
  endif()
endforeach()
