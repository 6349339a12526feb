add_executable(bench_verify_cost ${CMAKE_SOURCE_DIR}/bench/decode/bench_verify_cost.c)
target_link_libraries(bench_verify_cost PRIVATE dsspec_speculate dsspec_cache dsspec_io dsspec_core)
