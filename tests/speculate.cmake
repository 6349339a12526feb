# The decode loop's invariants below the public API: a 2-row batch equals two 1-row passes bit for
# bit, a rejected draft leaves no trace, MTP on/auto equal off, and the acceptance rule keeps the
# target distribution (chi-square).
add_executable(test_speculate ${CMAKE_SOURCE_DIR}/tests/speculate/test_speculate.c)
target_link_libraries(test_speculate PRIVATE engine_test_util dsspec_speculate dsspec_core)
add_test(NAME speculate_invariants COMMAND test_speculate ${CMAKE_SOURCE_DIR}/models/dsspec-tiny
         ${CMAKE_SOURCE_DIR}/tests/fixtures/tiny_r1 ${CMAKE_SOURCE_DIR}/tests/fixtures/tiny_b)


# --mtp auto's try schedule on hand-worked step sequences.
add_executable(test_explore ${CMAKE_SOURCE_DIR}/tests/speculate/test_explore.c)
target_link_libraries(test_explore PRIVATE dsspec_speculate)
add_test(NAME speculate_explore COMMAND test_explore)
