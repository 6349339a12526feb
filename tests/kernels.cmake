add_executable(test_kernels ${CMAKE_CURRENT_LIST_DIR}/test_kernels.c)
target_link_libraries(test_kernels PRIVATE dsspec_core m)
add_test(NAME kernels COMMAND test_kernels)

add_executable(test_threadpool ${CMAKE_CURRENT_LIST_DIR}/test_threadpool.c)
target_link_libraries(test_threadpool PRIVATE dsspec_core)
add_test(NAME threadpool COMMAND test_threadpool)
