# Warnings for dtw's own targets: dtw_target_warnings(<target>).
# Third-party headers come in as SYSTEM includes, so their warnings stay quiet.
function(dtw_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align
      -Woverloaded-virtual -Wno-missing-field-initializers>)
  if(DTW_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
endfunction()
