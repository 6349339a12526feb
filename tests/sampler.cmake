# The sampler's filters (temperature, top-k, top-p, min-p) and MTP's acceptance rule under them,
# against hand-computed distributions.
add_executable(test_sampler ${CMAKE_SOURCE_DIR}/tests/sampler/test_sampler.c)
target_link_libraries(test_sampler PRIVATE dsspec_speculate dsspec_core m)
add_test(NAME sampler_filters COMMAND test_sampler)
