add_executable(test_kernels ${CMAKE_CURRENT_LIST_DIR}/test_kernels.c)
target_link_libraries(test_kernels PRIVATE dsspec_core m)
add_test(NAME kernels COMMAND test_kernels)

add_executable(test_threadpool ${CMAKE_CURRENT_LIST_DIR}/test_threadpool.c)
target_link_libraries(test_threadpool PRIVATE dsspec_core)
add_test(NAME threadpool COMMAND test_threadpool)

add_executable(test_kernel_scratch ${CMAKE_CURRENT_LIST_DIR}/test_kernel_scratch.c)
target_link_libraries(test_kernel_scratch PRIVATE dsspec_core)
add_test(NAME kernel_scratch COMMAND test_kernel_scratch)
# The capped child's big allocation must come back NULL under ASan too, not end the process.
set_tests_properties(kernel_scratch PROPERTIES ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1")
