# Faults during a run of the real binary (tests/faults/*.sh; coreutils + util-linux, as root): a shard
# truncated or replaced mid-run, the output disk filling up, and memory cgroups (the default budget,
# page cache left charged, pressure, a budget above the limit). Each checks the exit code, the one
# error line, stopped_by, and that every file already written is whole.
foreach(t truncated_shard replaced_shard disk_full cgroup_budget)
  add_test(NAME faults_${t} COMMAND bash ${CMAKE_SOURCE_DIR}/tests/faults/${t}.sh $<TARGET_FILE:dsspec> ${CMAKE_SOURCE_DIR}/models/dsspec-tiny)
  set_tests_properties(faults_${t} PROPERTIES TIMEOUT 300)
endforeach()
