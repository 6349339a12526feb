# Checkpoint reader (core/checkpoint*.c, core/config.c, core/safetensors.c) and `dsspec inspect`.
add_executable(test_checkpoint ${CMAKE_SOURCE_DIR}/tests/test_checkpoint.c ${CMAKE_SOURCE_DIR}/tests/checkpoint/synth_checkpoint.c)
target_link_libraries(test_checkpoint PRIVATE dsspec_core PkgConfig::CJSON)
target_compile_definitions(test_checkpoint PRIVATE DSSPEC_FIXTURES_DIR="${CMAKE_SOURCE_DIR}/tests/fixtures")
add_test(NAME checkpoint COMMAND test_checkpoint)
