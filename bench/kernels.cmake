add_executable(bench_gemv ${CMAKE_CURRENT_LIST_DIR}/bench_gemv.c)
target_link_libraries(bench_gemv PRIVATE dsspec_core)
