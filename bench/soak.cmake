add_executable(bench_soak ${CMAKE_SOURCE_DIR}/bench/soak/soak.c)
target_link_libraries(bench_soak PRIVATE dsspec_engine)
if(NOT DSSPEC_SANITIZE)
  target_link_libraries(bench_soak PRIVATE PkgConfig::JEMALLOC)  # as the dsspec binary
endif()
