# core/'s own units: the attention kernels against a float64 softmax, the router on hand-worked cases.
add_executable(test_attention ${CMAKE_SOURCE_DIR}/tests/core/test_attention.c)
target_link_libraries(test_attention PRIVATE engine_test_util dsspec_core)
add_test(NAME core_attention COMMAND test_attention)

add_executable(test_router ${CMAKE_SOURCE_DIR}/tests/core/test_router.c)
target_link_libraries(test_router PRIVATE engine_test_util dsspec_core)
add_test(NAME core_router COMMAND test_router)

