add_executable(bench_attention ${CMAKE_SOURCE_DIR}/bench/attention/bench_attention.c)
target_link_libraries(bench_attention PRIVATE dsspec_core)
