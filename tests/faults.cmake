# Faults during a run of the real binary (tests/faults/*.sh; coreutils + util-linux, as root): a shard
# truncated or replaced mid-run, the output disk filling up, and memory cgroups (the default budget,
# page cache left charged, pressure, a budget above the limit). Each checks the exit code, the one
# error line, stopped_by, and that every file already written is whole.
foreach(t truncated_shard replaced_shard disk_full cgroup_budget)
  add_test(NAME faults_${t} COMMAND bash ${CMAKE_SOURCE_DIR}/tests/faults/${t}.sh $<TARGET_FILE:dsspec> ${CMAKE_SOURCE_DIR}/models/dsspec-tiny)
  set_tests_properties(faults_${t} PROPERTIES TIMEOUT 300)
endforeach()
# A real EIO from the kernel mid-run (tests/faults/eio_shard.sh): through device-mapper over a loop
# device, and through a FUSE file system (eio_fs, built when libfuse3 is installed) for kernels
# without device-mapper. Where a kernel offers neither, the test says why and is skipped (77).
pkg_check_modules(FUSE3 IMPORTED_TARGET fuse3)
set(EIO_FS "")
if(FUSE3_FOUND)
  add_executable(eio_fs ${CMAKE_SOURCE_DIR}/tests/faults/eio_fs.c)
  target_link_libraries(eio_fs PRIVATE PkgConfig::FUSE3)
  set(EIO_FS $<TARGET_FILE:eio_fs>)
endif()
foreach(b dm fuse)
  add_test(NAME faults_eio_${b} COMMAND bash ${CMAKE_SOURCE_DIR}/tests/faults/eio_shard.sh $<TARGET_FILE:dsspec>
           ${CMAKE_SOURCE_DIR}/models/dsspec-tiny ${b} ${EIO_FS})
  set_tests_properties(faults_eio_${b} PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
endforeach()
