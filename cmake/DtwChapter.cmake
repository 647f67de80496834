# dtw_add_chapter: one call per chapter in chapters/CMakeLists.txt builds the
# chapter's lab and solution from the same contract and the same tests.
#
#   dtw_add_chapter(00-ranks-and-messages
#     TITLE "Ranks and messages"
#     SOURCES ping_pong.cpp token_ring.cpp       # in solutions/NN-x and labs/NN-x
#     DEMOS demos.cpp                            # in solutions/NN-x, solution only
#     TESTS ping_pong_test.cpp token_ring_test.cpp   # in tests/NN-x
#     STEPS "00.1:PingPongTest" "00.2:TokenRingTest,TokenRingErrorsTest")
#
# Targets: dtw_chNN_solution, dtw_chNN_lab (static libraries), dtw_chNN_demos
# (object library the dtw program links, so the demos' static registration
# survives), chNN_solution_tests and chNN_lab_tests (GoogleTest programs).
# CTest labels: `solution` (must pass) and `lab` (fails until the learner is done).
# The chapter's manifest, ${CMAKE_BINARY_DIR}/chapters/NN.json, tells the dtw
# program the title, the steps and where the test programs are.
include_guard(GLOBAL)
include(GoogleTest)

option(DTW_LAB_INVARIANT
  "Check in CTest that every lab fails cleanly with NotImplemented and that labs/ is in sync (turn off once you write the labs)"
  ON)

# Quotes `value` as a JSON string.
function(_dtw_json_string out value)
  string(REPLACE "\\" "\\\\" value "${value}")
  string(REPLACE "\"" "\\\"" value "${value}")
  set(${out} "\"${value}\"" PARENT_SCOPE)
endfunction()

# A JSON array of strings.
function(_dtw_json_list out)
  set(items "")
  foreach(item IN LISTS ARGN)
    _dtw_json_string(quoted "${item}")
    list(APPEND items "${quoted}")
  endforeach()
  list(JOIN items ", " joined)
  set(${out} "[${joined}]" PARENT_SCOPE)
endfunction()

# Lists `files` (relative to `dir`) as absolute paths, failing clearly if one is missing.
function(_dtw_chapter_files out chapter dir kind)
  set(paths "")
  foreach(file IN LISTS ARGN)
    if(NOT EXISTS "${dir}/${file}")
      message(FATAL_ERROR "dtw_add_chapter(${chapter}): ${kind} file '${file}' not found in ${dir}"
        "${_dtw_hint_${kind}}")
    endif()
    list(APPEND paths "${dir}/${file}")
  endforeach()
  set(${out} "${paths}" PARENT_SCOPE)
endfunction()

function(dtw_add_chapter name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "TITLE" "SOURCES;DEMOS;TESTS;STEPS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "dtw_add_chapter(${name}): unexpected arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT name MATCHES "^([0-9][0-9])-[a-z0-9-]+$")
    message(FATAL_ERROR "dtw_add_chapter(${name}): the name must look like NN-lower-case-words, e.g. 00-ranks-and-messages")
  endif()
  set(id "${CMAKE_MATCH_1}")
  foreach(required TITLE SOURCES TESTS STEPS)
    if(NOT ARG_${required})
      message(FATAL_ERROR "dtw_add_chapter(${name}): ${required} is missing")
    endif()
  endforeach()
  get_property(known GLOBAL PROPERTY DTW_CHAPTER_IDS)
  if(id IN_LIST known)
    message(FATAL_ERROR "dtw_add_chapter(${name}): chapter ${id} is registered twice")
  endif()

  set(root "${PROJECT_SOURCE_DIR}")
  set(contract_dir "${root}/chapters/${name}")
  set(solution_dir "${root}/solutions/${name}")
  set(lab_dir "${root}/labs/${name}")
  set(tests_dir "${root}/tests/${name}")
  set(_dtw_hint_lab "\n(labs/ is generated: run tools/gen-labs)")
  _dtw_chapter_files(solution_sources ${name} "${solution_dir}" solution ${ARG_SOURCES})
  _dtw_chapter_files(lab_sources ${name} "${lab_dir}" lab ${ARG_SOURCES})
  _dtw_chapter_files(demo_sources ${name} "${solution_dir}" demo ${ARG_DEMOS})
  _dtw_chapter_files(test_sources ${name} "${tests_dir}" test ${ARG_TESTS})

  # Steps: "NN.k:Suite[,Suite...]"; the step must belong to this chapter.
  set(step_json "")
  set(step_ids "")
  foreach(step IN LISTS ARG_STEPS)
    if(NOT step MATCHES "^(${id}\\.[0-9]+):([A-Za-z_][A-Za-z0-9_]*(,[A-Za-z_][A-Za-z0-9_]*)*)$")
      message(FATAL_ERROR "dtw_add_chapter(${name}): step '${step}' must read \"${id}.K:Suite[,Suite...]\"")
    endif()
    set(step_id "${CMAKE_MATCH_1}")
    string(REPLACE "," ";" suites "${CMAKE_MATCH_2}")
    _dtw_json_list(suites_json ${suites})
    list(APPEND step_json "{\"id\": \"${step_id}\", \"suites\": ${suites_json}}")
    list(APPEND step_ids "${step_id}")
  endforeach()

  # The two libraries: same contract header, same dtw::core, different sources.
  foreach(variant solution lab)
    set(lib dtw_ch${id}_${variant})
    add_library(${lib} STATIC ${${variant}_sources})
    target_include_directories(${lib} PUBLIC "${contract_dir}")
    target_link_libraries(${lib} PUBLIC dtw::core)
    dtw_target_warnings(${lib})
  endforeach()
  # A lab region replaced by DTW_TODO leaves names unused; that is expected, not a defect.
  target_compile_options(dtw_ch${id}_lab PRIVATE
    -Wno-unused-parameter -Wno-unused-variable -Wno-unused-but-set-variable -Wno-unused-function
    $<$<CXX_COMPILER_ID:Clang,AppleClang>:-Wno-unused-private-field>)

  if(demo_sources)
    add_library(dtw_ch${id}_demos OBJECT ${demo_sources})
    target_link_libraries(dtw_ch${id}_demos PUBLIC dtw_ch${id}_solution)
    dtw_target_warnings(dtw_ch${id}_demos)
  endif()

  set(test_programs "")
  if(DTW_BUILD_TESTS)
    foreach(variant solution lab)
      set(exe ch${id}_${variant}_tests)
      add_executable(${exe} ${test_sources})
      target_include_directories(${exe} PRIVATE "${root}/tests/support")
      target_link_libraries(${exe} PRIVATE dtw_ch${id}_${variant} GTest::gtest_main)
      dtw_target_warnings(${exe})
      # PRE_TEST: listing the tests happens when CTest runs, so building never
      # runs chapter code.
      gtest_discover_tests(${exe}
        TEST_PREFIX "ch${id}.${variant}."
        PROPERTIES LABELS ${variant} TIMEOUT 120
        DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60)
      list(APPEND test_programs "\"${variant}_tests\": \"$<TARGET_FILE:${exe}>\"")
    endforeach()
    if(DTW_LAB_INVARIANT)
      # The untouched lab must fail, quickly, without crashing, naming
      # NotImplemented and every step (tests/invariant/lab_fails_cleanly.sh).
      add_test(NAME ch${id}.invariant.lab_fails_cleanly
        COMMAND bash "${root}/tests/invariant/lab_fails_cleanly.sh" $<TARGET_FILE:ch${id}_lab_tests> ${step_ids})
      set_tests_properties(ch${id}.invariant.lab_fails_cleanly PROPERTIES LABELS solution TIMEOUT 300)
    endif()
  endif()

  set_property(GLOBAL APPEND PROPERTY DTW_CHAPTER_IDS ${id})
  set_property(GLOBAL APPEND PROPERTY DTW_CHAPTER_NAMES ${name})
  if(demo_sources)
    set_property(GLOBAL APPEND PROPERTY DTW_CHAPTER_DEMO_TARGETS dtw_ch${id}_demos)
  endif()

  # The manifest the dtw program reads at run time.
  _dtw_json_string(title_json "${ARG_TITLE}")
  _dtw_json_string(root_json "${root}")
  _dtw_json_list(sources_json ${ARG_SOURCES})
  _dtw_json_list(demos_json ${ARG_DEMOS})
  _dtw_json_list(tests_json ${ARG_TESTS})
  list(JOIN step_json ",\n    " steps_joined)
  list(JOIN test_programs ",\n  " programs_joined)
  if(programs_joined)
    set(programs_joined ",\n  ${programs_joined}")
  endif()
  file(GENERATE OUTPUT "${CMAKE_BINARY_DIR}/chapters/${id}.json" CONTENT "{
  \"id\": \"${id}\",
  \"name\": \"${name}\",
  \"title\": ${title_json},
  \"source_dir\": ${root_json},
  \"lab_target\": \"ch${id}_lab_tests\",
  \"sources\": ${sources_json},
  \"demos\": ${demos_json},
  \"tests\": ${tests_json},
  \"steps\": [
    ${steps_joined}
  ]${programs_joined}
}
")
endfunction()
