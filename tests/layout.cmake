# The source tree's structural rules (module include edges, private headers, include cycles, call
# circles between the .c files of a folder, function length); see tests/layout/check_layout.c.
add_executable(check_layout ${CMAKE_SOURCE_DIR}/tests/layout/check_layout.c)
add_test(NAME layout COMMAND check_layout ${CMAKE_SOURCE_DIR})

# The checker on small fake trees, each with the violations it must report (tests/layout/selftest).
# The functions whose only point is their length are written here, at configure time, into a copy
# of the trees: committed, they would be dozens of near-identical files of "x += i;" lines.
set(LAYOUT_CASES ${CMAKE_BINARY_DIR}/layout_selftest)
file(REMOVE_RECURSE ${LAYOUT_CASES})
file(COPY ${CMAKE_SOURCE_DIR}/tests/layout/selftest/ DESTINATION ${LAYOUT_CASES})

# Appends to FILE a function SIGNATURE whose body spans BODY lines between its braces
# (BODY - 1 statements and the return), so the checker counts BODY + 2 lines.
function(layout_long_function file signature body)
  math(EXPR last "${body} - 2")
  set(text "${signature}\n{\n")
  foreach(i RANGE 0 ${last})
    string(APPEND text "    x += ${i};\n")
  endforeach()
  string(APPEND text "    return x;\n}\n")
  file(APPEND ${LAYOUT_CASES}/${file} "${text}")
endfunction()

file(WRITE ${LAYOUT_CASES}/clean/core/kernels_avx2.c "/* the SIMD kernels may be long */\n")
layout_long_function(clean/core/kernels_avx2.c "int dot_rows(int x)" 118)
layout_long_function(clean/core/just80.c "int at_the_limit(int x)" 78)
layout_long_function(clean/core/kernels_driver.h "static inline int driver(int x)" 98)
layout_long_function(long_function/core/inline.h "static inline int long_inline(int x)" 88)
layout_long_function(long_function/core/long.c "int fits(int x)" 78)
layout_long_function(long_function/core/long.c "static int too_long(int x)" 79)
layout_long_function(long_function/core/kernels_avx512.c "int kernel(int x)" 198)
layout_long_function(long_function/core/kernels.c "int not_a_simd_kernel(int x)" 83)
layout_long_function(long_function/io/kernels_avx2_helpers.h "static inline int not_exempt(int x)" 80)

add_test(NAME layout_selftest COMMAND check_layout --selftest ${LAYOUT_CASES})
