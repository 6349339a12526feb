# Checkpoint reader (core/checkpoint*.c, core/config.c, core/safetensors.c) and `dsspec inspect`.
# The test runs the dsspec binary for the CLI cases; it is given its path (no build dependency, so a
# half-written module elsewhere cannot stop this test from building; a missing binary fails it).
add_executable(test_checkpoint ${CMAKE_SOURCE_DIR}/tests/test_checkpoint.c ${CMAKE_SOURCE_DIR}/tests/checkpoint/bad_inputs.c
               ${CMAKE_SOURCE_DIR}/tests/checkpoint/header_unit.c
               ${CMAKE_SOURCE_DIR}/tests/checkpoint/ckpt_test_util.c ${CMAKE_SOURCE_DIR}/tests/checkpoint/synth_checkpoint.c)
target_link_libraries(test_checkpoint PRIVATE dsspec_core PkgConfig::CJSON)
target_compile_definitions(test_checkpoint PRIVATE DSSPEC_FIXTURES_DIR="${CMAKE_SOURCE_DIR}/tests/fixtures")
add_test(NAME checkpoint COMMAND test_checkpoint $<TARGET_FILE:dsspec>)
