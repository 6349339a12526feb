# Engine tests: the forward pass, MTP and decode loop against transformers' references, the router on
# hand-worked cases, speculation invariants, and the CLI contracts.
add_library(engine_test_util STATIC ${CMAKE_SOURCE_DIR}/tests/engine/engine_test.c)
target_link_libraries(engine_test_util PUBLIC dsspec_core PkgConfig::CJSON)

add_executable(test_reference ${CMAKE_SOURCE_DIR}/tests/engine/test_reference.c)
target_link_libraries(test_reference PRIVATE engine_test_util dsspec_engine)
add_test(NAME engine_reference COMMAND test_reference
         ${CMAKE_SOURCE_DIR}/tests/fixtures/tiny_r1 ${CMAKE_SOURCE_DIR}/tests/fixtures/tiny_b)

# Long positions (2500, 39x YaRN's original context) in a test of its own, so that it runs beside
# the others.
add_test(NAME engine_reference_long COMMAND test_reference ${CMAKE_SOURCE_DIR}/tests/fixtures/tiny_long)

# The router lookahead's ranked guesses against the numpy float64 model (make_lookahead_ref.py).
add_executable(test_lookahead ${CMAKE_SOURCE_DIR}/tests/engine/test_lookahead.c)
target_link_libraries(test_lookahead PRIVATE dsspec_engine PkgConfig::CJSON)
add_test(NAME engine_lookahead COMMAND test_lookahead ${CMAKE_SOURCE_DIR}/tests/fixtures/tiny_r1
         ${CMAKE_SOURCE_DIR}/tests/fixtures/tiny_b)

add_executable(test_cli ${CMAKE_SOURCE_DIR}/tests/engine/test_cli.c)
target_link_libraries(test_cli PRIVATE engine_test_util)
add_test(NAME engine_cli COMMAND test_cli $<TARGET_FILE:dsspec> ${CMAKE_SOURCE_DIR}/models/dsspec-tiny
         ${CMAKE_SOURCE_DIR}/tests/fixtures/tiny_r1 ${CMAKE_SOURCE_DIR}/tests/fixtures/tiny_b)

add_executable(test_embedded ${CMAKE_SOURCE_DIR}/tests/engine/test_embedded.c)
target_link_libraries(test_embedded PRIVATE engine_test_util dsspec_engine)
add_test(NAME engine_embedded_model COMMAND test_embedded ${CMAKE_SOURCE_DIR}/models/dsspec-tiny
         ${CMAKE_SOURCE_DIR}/tools/embedded/heldout_ids.json ${CMAKE_SOURCE_DIR}/tools/embedded)

# Experts run together on the pool or one by one: the same logits, bit for bit.
add_executable(test_expert_groups ${CMAKE_SOURCE_DIR}/tests/engine/test_expert_groups.c)
target_link_libraries(test_expert_groups PRIVATE engine_test_util dsspec_engine)
add_test(NAME engine_expert_groups COMMAND test_expert_groups ${CMAKE_SOURCE_DIR}/models/dsspec-tiny
         ${CMAKE_SOURCE_DIR}/tools/embedded/heldout_ids.json)

# Sessions: SIGKILLed runs resume to exactly the uninterrupted output; damaged files; refusals.
add_executable(test_session ${CMAKE_SOURCE_DIR}/tests/engine/test_session.c)
add_test(NAME engine_session COMMAND test_session $<TARGET_FILE:dsspec> ${CMAKE_SOURCE_DIR}/models/dsspec-tiny
         ${CMAKE_SOURCE_DIR}/tests/fixtures/tiny_r1)

# Job files: batch results equal separate runs; kill -9 and a torn line, then restart.
add_executable(test_batch ${CMAKE_SOURCE_DIR}/tests/engine/test_batch.c)
target_link_libraries(test_batch PRIVATE PkgConfig::CJSON)
add_test(NAME engine_batch COMMAND test_batch $<TARGET_FILE:dsspec> ${CMAKE_SOURCE_DIR}/models/dsspec-tiny)

# The morning report's pages in headless chromium (installed by tools/test.sh).
add_test(NAME engine_report_html COMMAND bash ${CMAKE_SOURCE_DIR}/tests/engine/test_report.sh $<TARGET_FILE:dsspec>
         ${CMAKE_SOURCE_DIR}/models/dsspec-tiny)

# Sessions keep --mtp auto's MTP rows (holes, rows written after their boundary): restored as written.
add_executable(test_session_mtp ${CMAKE_SOURCE_DIR}/tests/engine/test_session_mtp.c)
target_link_libraries(test_session_mtp PRIVATE dsspec_engine)
add_test(NAME engine_session_mtp COMMAND test_session_mtp ${CMAKE_SOURCE_DIR}/models/dsspec-tiny)
