add_executable(bench_checkpoint ${CMAKE_CURRENT_LIST_DIR}/bench_checkpoint.c ${CMAKE_SOURCE_DIR}/tests/checkpoint/ckpt_test_util.c
               ${CMAKE_SOURCE_DIR}/tests/checkpoint/synth_checkpoint.c)
target_link_libraries(bench_checkpoint PRIVATE dsspec_core PkgConfig::CJSON)
