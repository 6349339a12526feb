add_executable(bench_verify_cost ${CMAKE_SOURCE_DIR}/bench/decode/bench_verify_cost.c)
target_link_libraries(bench_verify_cost PRIVATE dsspec_speculate dsspec_cache dsspec_io dsspec_core)
# Trace replay over the R1 slice: the real reader, expert cache and FP8 GEMVs, routing from a trace.
add_executable(r1_replay ${CMAKE_SOURCE_DIR}/bench/decode/r1_replay.c)
target_link_libraries(r1_replay PRIVATE dsspec_cache dsspec_io dsspec_core PkgConfig::CJSON m)
# What holes in the MTP KV (--mtp auto's skipped KV-only rows) cost in acceptance, per window.
add_executable(mtp_window ${CMAKE_SOURCE_DIR}/bench/decode/mtp_window.c)
target_link_libraries(mtp_window PRIVATE dsspec_speculate dsspec_cache dsspec_io dsspec_core PkgConfig::CJSON m)
