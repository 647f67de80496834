# dtw_add_chapter: one call per chapter, in the chapter's own
# chapters/NN-x/chapter.cmake (chapters/CMakeLists.txt includes every one), builds
# the chapter's lab and solution from the same contract and the same tests.
#
#   dtw_add_chapter(02-data-parallelism
#     TITLE "Data parallelism"
#     SOURCES dp_allreduce.cpp ddp.cpp           # in solutions/NN-x and labs/NN-x
#     DEMOS demos.cpp                            # in solutions/NN-x, solution only:
#                                                #   demos and DTW_REGISTER_STRATEGY
#     TESTS dp_test.cpp                          # in tests/NN-x
#     STEPS "02.1:DpAllreduceTest" "02.2:DdpTest,DdpErrorsTest"
#     LIBS dtw::train                            # more libraries lab and solution link
#     DEPENDS 01                                 # chapters whose SOLUTION they link
#     BACKENDS threads mpi                       # mpi: an MPI twin of the solution tests
#     MPI_TWIN "-*Deadlock*"                     # gtest filter of the twin (default *)
#     MPI_TIMEOUT 300                            # seconds per twin run (default 300)
#     MPI_SUBSET "Ddp*" MPI_SUBSET_NPS 3         # at np 3 run only these (bounds the time)
#     BENCH ddp_bench.cpp)                       # in solutions/NN-x: build/bench/dtw_bench_<topic>
#
# Targets: dtw_chNN_solution, dtw_chNN_lab (static libraries), dtw_chNN_demos
# (object library the dtw program and dtw_bench_train link, so the demos' and
# strategies' static registration survives), chNN_solution_tests and
# chNN_lab_tests (GoogleTest programs), dtw_bench_<topic> with BENCH.
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
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "TITLE;MPI_TWIN;MPI_TIMEOUT;MPI_SUBSET"
    "SOURCES;DEMOS;TESTS;STEPS;LIBS;DEPENDS;BACKENDS;BENCH;MPI_SUBSET_NPS")
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
  if(NOT ARG_BACKENDS)
    set(ARG_BACKENDS threads)
  endif()
  foreach(backend IN LISTS ARG_BACKENDS)
    if(NOT backend MATCHES "^(threads|mpi|nccl)$")
      message(FATAL_ERROR "dtw_add_chapter(${name}): BACKENDS takes threads, mpi and nccl, not '${backend}'")
    endif()
  endforeach()
  # Chapters 02+ build on earlier chapters' solutions, never on a learner's lab.
  set(dep_libs "")
  foreach(dep IN LISTS ARG_DEPENDS)
    if(NOT TARGET dtw_ch${dep}_solution)
      message(FATAL_ERROR "dtw_add_chapter(${name}): DEPENDS ${dep}, but no chapter ${dep} is registered before it")
    endif()
    list(APPEND dep_libs dtw_ch${dep}_solution)
  endforeach()
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
    target_link_libraries(${lib} PUBLIC dtw::core ${ARG_LIBS} ${dep_libs})
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
    if("mpi" IN_LIST ARG_BACKENDS)
      # tests/mpi/CMakeLists.txt (included last) makes the twin: the same
      # sources under mpiexec with 2, 3 and 4 processes.
      if(NOT ARG_MPI_TWIN)
        set(ARG_MPI_TWIN "*")
      endif()
      if(NOT ARG_MPI_TIMEOUT)
        set(ARG_MPI_TIMEOUT 300)
      endif()
      string(REPLACE ";" "," subset_nps "${ARG_MPI_SUBSET_NPS}")
      set_property(GLOBAL APPEND PROPERTY DTW_CHAPTER_MPI_TWINS
        "ch${id}_solution_tests|${ARG_MPI_TWIN}|${ARG_MPI_TIMEOUT}|${ARG_MPI_SUBSET}|${subset_nps}")
    endif()
    if(DTW_LAB_INVARIANT)
      # The untouched lab must fail, quickly, without crashing, naming
      # NotImplemented and every step (tests/invariant/lab_fails_cleanly.sh).
      add_test(NAME ch${id}.invariant.lab_fails_cleanly
        COMMAND bash "${root}/tests/invariant/lab_fails_cleanly.sh" $<TARGET_FILE:ch${id}_lab_tests> ${step_ids})
      set_tests_properties(ch${id}.invariant.lab_fails_cleanly PROPERTIES LABELS solution TIMEOUT 300)
    endif()
  endif()

  # A chapter's own benchmark program, next to the others in build/bench so
  # `dtw bench <topic>` finds it.
  set(bench_name "")
  if(ARG_BENCH AND DTW_BUILD_BENCH)
    _dtw_chapter_files(bench_sources ${name} "${solution_dir}" bench ${ARG_BENCH})
    string(REGEX REPLACE "^[0-9][0-9]-" "" topic "${name}")
    set(bench_name "${topic}")
    add_executable(dtw_bench_${topic} ${bench_sources})
    target_link_libraries(dtw_bench_${topic} PRIVATE dtw_ch${id}_solution benchmark::benchmark
      CLI11::CLI11 fmt::fmt)
    if(demo_sources)
      target_link_libraries(dtw_bench_${topic} PRIVATE dtw_ch${id}_demos)
    endif()
    set_target_properties(dtw_bench_${topic} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/bench")
    dtw_target_warnings(dtw_bench_${topic})
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
  _dtw_json_list(backends_json ${ARG_BACKENDS})
  _dtw_json_list(depends_json ${ARG_DEPENDS})
  _dtw_json_string(bench_json "${bench_name}")
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
  \"backends\": ${backends_json},
  \"depends\": ${depends_json},
  \"bench\": ${bench_json},
  \"steps\": [
    ${steps_joined}
  ]${programs_joined}
}
")
endfunction()
