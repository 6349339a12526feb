# Expert cache (cache/) and the cache-sim CLI.
foreach(t test_cache_policy test_cache_opt)
  add_executable(${t} ${CMAKE_SOURCE_DIR}/tests/${t}.c)
  target_link_libraries(${t} PRIVATE dsspec_cache)
  add_test(NAME ${t} COMMAND ${t})
endforeach()
# The trace loader on plain and gzip-compressed files (the test writes them with zlib).
add_executable(test_cache_trace ${CMAKE_SOURCE_DIR}/tests/test_cache_trace.c)
target_link_libraries(test_cache_trace PRIVATE dsspec_cache PkgConfig::ZLIB)
add_test(NAME test_cache_trace COMMAND test_cache_trace)
# The recorded-lookahead reader against a file worked out by hand.
add_executable(test_guess_trace ${CMAKE_SOURCE_DIR}/tests/test_guess_trace.c)
target_link_libraries(test_guess_trace PRIVATE dsspec_cache PkgConfig::ZLIB)
add_test(NAME test_guess_trace COMMAND test_guess_trace)
# The live cache over the real reader, reads reordered; its synthetic shard goes under the build
# directory (a real disk) because O_DIRECT may be refused on tmpfs.
add_executable(test_cache_live ${CMAKE_SOURCE_DIR}/tests/test_cache_live.c)
target_link_libraries(test_cache_live PRIVATE dsspec_cache)
add_test(NAME test_cache_live COMMAND test_cache_live ${CMAKE_CURRENT_BINARY_DIR})
# The CLI test runs the real binary.
if(TARGET dsspec)
  add_executable(test_cache_sim_cli ${CMAKE_SOURCE_DIR}/tests/test_cache_sim_cli.c)
  target_link_libraries(test_cache_sim_cli PRIVATE PkgConfig::CJSON)
  add_test(NAME test_cache_sim_cli COMMAND test_cache_sim_cli $<TARGET_FILE:dsspec>)
endif()
# The cache over the real reader on the R1-format fixtures, against checkpoint_read.
add_executable(test_cache_reader ${CMAKE_SOURCE_DIR}/tests/test_cache_reader.c)
target_link_libraries(test_cache_reader PRIVATE dsspec_cache dsspec_io dsspec_core)
add_test(NAME test_cache_reader COMMAND test_cache_reader ${CMAKE_SOURCE_DIR}/tests/fixtures/tiny_r1
         ${CMAKE_SOURCE_DIR}/tests/fixtures/tiny_b)
# The policy lab's prototypes against a hand-worked sequence (its numbers decide what ships).
add_test(NAME bench_policy_lab_selftest COMMAND bench_policy_lab --selftest)
