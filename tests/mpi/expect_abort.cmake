# Runs COMMAND (a ;-list) and passes only if it exits non-zero AND its output
# matches every regular expression in EXPECT (a ;-list).
#   cmake -DCOMMAND=... -DEXPECT=... -P expect_abort.cmake
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 60)
set(all "${out}${err}")
message("${all}")
if(rc EQUAL 0)
  message(FATAL_ERROR "expected a non-zero exit, got 0")
endif()
foreach(pattern IN LISTS EXPECT)
  if(NOT all MATCHES "${pattern}")
    message(FATAL_ERROR "output does not match '${pattern}'")
  endif()
endforeach()
message("ok: exit ${rc}, every expected line printed")
