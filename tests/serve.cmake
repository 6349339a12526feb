# dsspec serve through clients no one here wrote (OpenAI's official npm client, curl, a Prometheus
# text-format parser), the installed binary, and the CLI's llama.cpp-style habits. The fixture
# installs the npm clients; if it fails, every test that needs them fails (never skips).
set(SERVE_DIR ${CMAKE_SOURCE_DIR}/tests/serve)
set(SERVE_NPM ${CMAKE_SOURCE_DIR}/tests/data/serve_npm)

add_test(NAME serve_npm_fetch COMMAND sh ${SERVE_DIR}/fetch.sh)
set_tests_properties(serve_npm_fetch PROPERTIES FIXTURES_SETUP serve_npm TIMEOUT 300)

if(TARGET dsspec)
  # the API key comes from a file, as --api-key-file reads it
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/serve_api_key.txt "test-key-4f1c9a\n")
  add_test(NAME serve_openai_client
           COMMAND sh ${SERVE_DIR}/with_server.sh $<TARGET_FILE:dsspec> "--api-key-file ${CMAKE_CURRENT_BINARY_DIR}/serve_api_key.txt --ctx 4096"
                   node ${SERVE_DIR}/openai_client.js ${SERVE_NPM} $<TARGET_FILE:dsspec> test-key-4f1c9a)
  set_tests_properties(serve_openai_client PROPERTIES FIXTURES_REQUIRED serve_npm TIMEOUT 600)
endif()

if(TARGET dsspec)
  add_test(NAME serve_curl
           COMMAND sh ${SERVE_DIR}/with_server.sh $<TARGET_FILE:dsspec>
                   "--api-key-file ${CMAKE_CURRENT_BINARY_DIR}/serve_api_key.txt --max-body 4K"
                   sh ${SERVE_DIR}/curl.sh test-key-4f1c9a)
  set_tests_properties(serve_curl PROPERTIES TIMEOUT 300)
endif()

if(TARGET dsspec)
  add_test(NAME install_relocated COMMAND sh ${SERVE_DIR}/install.sh ${CMAKE_BINARY_DIR} $<TARGET_FILE:dsspec>)
  set_tests_properties(install_relocated PROPERTIES TIMEOUT 300)
endif()

if(TARGET dsspec)
  add_test(NAME cli_habits COMMAND sh ${SERVE_DIR}/cli_habits.sh $<TARGET_FILE:dsspec>)
  set_tests_properties(cli_habits PROPERTIES TIMEOUT 300)
endif()
