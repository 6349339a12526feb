# The source tree's structural rules (module include edges, private headers, include cycles, call
# circles between the .c files of a folder, function length); see tests/layout/check_layout.c.
add_executable(check_layout ${CMAKE_SOURCE_DIR}/tests/layout/check_layout.c)
add_test(NAME layout COMMAND check_layout ${CMAKE_SOURCE_DIR})
# the checker on small fake trees, each with the violations it must report (tests/layout/selftest)
add_test(NAME layout_selftest COMMAND check_layout --selftest ${CMAKE_SOURCE_DIR}/tests/layout/selftest)
