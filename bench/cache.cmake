# Cache benches: synthetic R1 trace generator and hit-rate curves of every policy next to OPT.
add_executable(cache_gen_trace ${CMAKE_SOURCE_DIR}/bench/cache/gen_trace.c ${CMAKE_SOURCE_DIR}/bench/cache/synth_trace.c)
target_link_libraries(cache_gen_trace PRIVATE PkgConfig::CJSON m)
add_executable(bench_cache_curve ${CMAKE_SOURCE_DIR}/bench/cache/bench_cache_curve.c ${CMAKE_SOURCE_DIR}/bench/cache/synth_trace.c)
target_compile_definitions(bench_cache_curve PRIVATE DSSPEC_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
target_link_libraries(bench_cache_curve PRIVATE dsspec_cache m)
# Candidate policies (prototypes) beside the live LFU and OPT on the same traces.
add_executable(bench_policy_lab ${CMAKE_SOURCE_DIR}/bench/cache/bench_policy_lab.c)
target_link_libraries(bench_policy_lab PRIVATE dsspec_cache m)
# Router-lookahead prefetch replayed on a trace through the live policy code, guesses modelled.
add_executable(bench_prefetch_sim ${CMAKE_SOURCE_DIR}/bench/cache/bench_prefetch_sim.c)
target_link_libraries(bench_prefetch_sim PRIVATE dsspec_cache PkgConfig::CJSON)
