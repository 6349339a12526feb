# Expert I/O at R1 scale: the slice generator and the reader benchmark (run by bench/io/io_vs_fio.sh).
add_executable(make_r1_slice ${CMAKE_CURRENT_SOURCE_DIR}/io/make_r1_slice.c)
add_executable(bench_expert_io ${CMAKE_CURRENT_SOURCE_DIR}/io/bench_expert_io.c)
target_link_libraries(bench_expert_io PRIVATE dsspec_io dsspec_core)
