add_executable(bench_attention ${CMAKE_SOURCE_DIR}/bench/attention/bench_attention.c)
target_link_libraries(bench_attention PRIVATE dsspec_core)
add_executable(kv_precision ${CMAKE_SOURCE_DIR}/bench/attention/kv_precision.c)
target_link_libraries(kv_precision PRIVATE dsspec_engine)
