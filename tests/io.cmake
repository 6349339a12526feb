# Expert I/O (io/): both backends, faults, fallback. The test writes its shards under the build
# directory (a real disk) because O_DIRECT may be refused on tmpfs.
add_executable(test_io ${CMAKE_CURRENT_SOURCE_DIR}/test_io.c)
target_link_libraries(test_io PRIVATE dsspec_io dsspec_core)
add_test(NAME io COMMAND test_io ${CMAKE_CURRENT_BINARY_DIR})

# Every routed expert of the R1-format fixtures, through both backends, against checkpoint_read.
add_executable(test_io_fixtures ${CMAKE_CURRENT_SOURCE_DIR}/test_io_fixtures.c)
target_link_libraries(test_io_fixtures PRIVATE dsspec_io dsspec_core)
add_test(NAME io_fixtures COMMAND test_io_fixtures ${CMAKE_SOURCE_DIR}/tests/fixtures/tiny_r1
         ${CMAKE_SOURCE_DIR}/tests/fixtures/tiny_b)
