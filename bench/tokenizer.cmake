# Tokenizer benchmark (never run by ctest): bench/tokenizer/run.sh $<TARGET_FILE:bench_tokenizer>
add_executable(bench_tokenizer ${CMAKE_SOURCE_DIR}/bench/tokenizer/bench_tokenizer.c)
target_link_libraries(bench_tokenizer PRIVATE dsspec_tokenizer)
