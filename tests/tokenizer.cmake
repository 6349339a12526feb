# Tokenizer tests. The fixture fetches the real DeepSeek tokenizer.json and the reference library;
# if it fails, every test that needs it fails (never skips).
set(TOK_DIR ${CMAKE_SOURCE_DIR}/tests/tokenizer)
set(TOK_DATA ${CMAKE_SOURCE_DIR}/tests/data/deepseek_v3)

add_test(NAME tokenizer_fetch COMMAND sh ${TOK_DIR}/fetch.sh)
set_tests_properties(tokenizer_fetch PROPERTIES FIXTURES_SETUP tokenizer_data TIMEOUT 300)

add_executable(test_tokenizer ${TOK_DIR}/test_tokenizer.c)
target_link_libraries(test_tokenizer PRIVATE dsspec_tokenizer)

add_test(NAME tokenizer_unit COMMAND test_tokenizer unit ${TOK_DIR}/data)
add_test(NAME tokenizer_bad_input COMMAND test_tokenizer bad ${TOK_DIR}/data/bad)
add_test(NAME tokenizer_mutated_input COMMAND test_tokenizer mutate ${TOK_DIR}/data ${CMAKE_CURRENT_BINARY_DIR} 1500)
add_test(NAME tokenizer_corpus COMMAND test_tokenizer corpus ${TOK_DATA}/r1 ${TOK_DIR}/corpus ${TOK_DIR}/data/corpus_ids)
add_test(NAME tokenizer_cases COMMAND test_tokenizer cases ${TOK_DATA}/r1 ${TOK_DIR}/data/cases_r1.bin)
add_test(NAME tokenizer_cases_v3 COMMAND test_tokenizer cases ${TOK_DATA} ${TOK_DIR}/data/cases_v3.bin)
add_test(NAME tokenizer_chat COMMAND test_tokenizer chat ${TOK_DATA}/r1 ${TOK_DIR}/data/chat)
add_test(NAME tokenizer_fuzz COMMAND sh ${TOK_DIR}/fuzz.sh $<TARGET_FILE:test_tokenizer> ${TOK_DATA}/r1 ${CMAKE_CURRENT_BINARY_DIR})
# the same on a variant whose added tokens use lstrip/rstrip/single_word (derived by fetch.sh)
add_test(NAME tokenizer_fuzz_flags COMMAND sh ${TOK_DIR}/fuzz.sh $<TARGET_FILE:test_tokenizer> ${TOK_DATA}/flags ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(tokenizer_corpus tokenizer_cases tokenizer_cases_v3 tokenizer_chat tokenizer_fuzz tokenizer_fuzz_flags
                     PROPERTIES FIXTURES_REQUIRED tokenizer_data)
if(TARGET dsspec)
  add_test(NAME tokenizer_cli COMMAND sh ${TOK_DIR}/cli.sh $<TARGET_FILE:dsspec> ${TOK_DATA}/r1 ${TOK_DIR}/data)
  set_tests_properties(tokenizer_cli PROPERTIES FIXTURES_REQUIRED tokenizer_data)
endif()

# tokenizer/unicode_delta.c (categories newer than PCRE2's tables) regenerated from the reference
add_executable(pcre2_categories ${TOK_DIR}/unicode/pcre2_categories.c)
target_link_libraries(pcre2_categories PRIVATE PkgConfig::PCRE2)
add_test(NAME tokenizer_unicode_delta COMMAND sh ${TOK_DIR}/unicode/check_delta.sh $<TARGET_FILE:pcre2_categories> ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(tokenizer_unicode_delta PROPERTIES FIXTURES_REQUIRED tokenizer_data)
