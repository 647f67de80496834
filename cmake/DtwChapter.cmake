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
#     STEPS 02.1 02.2                            # in the order of the chapter text
#     LIBS dtw::train                            # more libraries lab and solution link
#     TEST_LIBS gloo                             # more libraries the tests link
#     DEPENDS 01                                 # chapters whose SOLUTION they link
#     BACKENDS threads mpi                       # mpi: an MPI twin of the solution tests
#     MPI_TWIN "-*Deadlock*"                     # gtest filter of the twin (default *)
#     MPI_TIMEOUT 300                            # seconds per twin run (default 300)
#     MPI_SUBSET "Ddp*" MPI_SUBSET_NPS 3         # at np 3 run only these (bounds the time)
#     BENCH ddp_bench.cpp plots_bench.cpp        # in solutions/NN-x, one or more files:
#                                                #   build/bench/dtw_bench_<topic>
#     PLANTED_PER_STEP 3)                        # the fewest planted bugs a step may
#                                                #   have (default 3)
#
# Each test suite declares the steps it runs the code of with DTW_TEST_STEPS
# (tests/support/dtw_test_steps.h); tests/NN-x/planted_bugs holds the planted
# bugs, at least PLANTED_PER_STEP per step (docs/adding-a-chapter.md).
#
# Targets: dtw_chNN_solution, dtw_chNN_lab (static libraries), dtw_chNN_demos
# (object library the dtw program and dtw_bench_train link, so the demos' and
# strategies' static registration survives), dtw_chNN_lab_run (the demos with
# the lab, for `dtw run DEMO --lab`), dtw_bench_<topic> with BENCH,
# chNN_solution_tests and chNN_lab_tests (GoogleTest programs). The solution
# test program runs a copy of the solution with a probe at each @lab region,
# which checks every DTW_TEST_STEPS. chNN_planted_NN.K_n_tests is the lab test
# program built from the solution with the n-th planted bug of step NN.K.
# CTest labels: `solution` (must pass), `lab` (fails until the learner is done),
# `check` (dtw check's own output on each planted bug; part of `solution` too).
# The chapter's manifest, ${PROJECT_BINARY_DIR}/chapters/NN.json, tells the dtw
# program the title, the steps and where the programs are.
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

# The support every chapter's test programs share (made once).
function(_dtw_test_support)
  if(TARGET dtw_test_probe)
    return()
  endif()
  set(support "${PROJECT_SOURCE_DIR}/tests/support")
  # The probe runtime that the probed solution calls (dtw_step_probe.h).
  add_library(dtw_test_probe STATIC "${support}/dtw_step_probe.cpp")
  target_include_directories(dtw_test_probe PUBLIC "${support}")
  dtw_target_warnings(dtw_test_probe)
  dtw_machinery(dtw_test_probe)
  # main() of every chapter's test programs, compiled once; each program adds
  # the two constants that say which chapter it tests (see _dtw_test_main).
  add_library(dtw_test_main OBJECT "${support}/dtw_test_main.cpp")
  target_include_directories(dtw_test_main PRIVATE "${support}")
  target_link_libraries(dtw_test_main PRIVATE GTest::gtest)
  dtw_target_warnings(dtw_test_main)
  dtw_machinery(dtw_test_main)
  # The headers every test file includes -- GoogleTest, GoogleMock, dtw_test.h
  # and <dtw/dtw.h> -- are half of a test file's compile time (3.3 of 6.4 s
  # for tests/core/p2p_test.cpp). Precompiled once here, and reused by every
  # test program (tests/) and every chapter's test objects, which compile with
  # the same flags; a file with other flags would only parse them as usual.
  add_library(dtw_test_pch OBJECT "${support}/dtw_test_pch.cpp")
  target_include_directories(dtw_test_pch PRIVATE "${support}" "${PROJECT_SOURCE_DIR}/model/include")
  target_link_libraries(dtw_test_pch PRIVATE dtw::core GTest::gmock GTest::gtest)
  if(CMAKE_CXX_FLAGS MATCHES "-fsanitize=thread")
    target_compile_definitions(dtw_test_pch PRIVATE DTW_TSAN=1)  # as tests/CMakeLists.txt defines it
  endif()
  target_precompile_headers(dtw_test_pch PRIVATE <gtest/gtest.h> <gmock/gmock.h> <dtw/dtw.h>
    "${support}/dtw_test.h")
  dtw_target_warnings(dtw_test_pch)
  dtw_machinery(dtw_test_pch)
endfunction()

# An object library with what main() (tests/support/dtw_test_main.cpp) needs
# to know about chapter `id`'s test programs: its steps, in the text's order,
# and whether probes are expected (1 for the solution program). A generated
# file of two constants, so the main itself is compiled once for all chapters.
function(_dtw_test_main target steps expect_probes)
  list(JOIN steps " " steps_text)
  if(expect_probes)
    set(probes true)
  else()
    set(probes false)
  endif()
  set(file "${CMAKE_CURRENT_BINARY_DIR}/${target}.cpp")
  file(CONFIGURE OUTPUT "${file}" CONTENT "// Generated by cmake/DtwChapter.cmake: which chapter this test program tests.
namespace dtw::testing {
extern const char* const kChapterSteps;
extern const bool kExpectProbes;
const char* const kChapterSteps = \"@steps_text@\";
const bool kExpectProbes = @probes@;
}  // namespace dtw::testing
" @ONLY)
  add_library(${target} OBJECT "${file}")
endfunction()

# The steps named by the chapter text's step table (rows "| NN.K | ..."), in order.
function(_dtw_text_steps out readme id)
  set(steps "")
  if(EXISTS "${readme}")
    file(STRINGS "${readme}" rows REGEX "^\\| *${id}\\.[0-9]+ *\\|")
    foreach(row IN LISTS rows)
      string(REGEX MATCH "${id}\\.[0-9]+" step "${row}")
      if(NOT step IN_LIST steps)
        list(APPEND steps "${step}")
      endif()
    endforeach()
  endif()
  set(${out} "${steps}" PARENT_SCOPE)
endfunction()

# A test program of chapter `id` (called from dtw_add_chapter, whose variables
# it sees): the chapter's test objects and `main` against library `lib`.
function(_dtw_chapter_program exe main lib)
  add_executable(${exe} $<TARGET_OBJECTS:ch${id}_test_objects> $<TARGET_OBJECTS:${main}>
    $<TARGET_OBJECTS:dtw_test_main>)
  target_link_libraries(${exe} PRIVATE ${lib} dtw::core GTest::gtest ${ARG_TEST_LIBS})
  dtw_target_warnings(${exe})
  # What an MPI twin (tests/mpi) links instead: the same test objects (not
  # compiled again) with the plain solution and MPI's main.
  set_target_properties(${exe} PROPERTIES DTW_TWIN_OBJECTS "$<TARGET_OBJECTS:ch${id}_test_objects>"
    DTW_TWIN_LIBS "dtw_ch${id}_solution;dtw::core;GTest::gtest;${ARG_TEST_LIBS}"
    DTW_TWIN_INCLUDES "${PROJECT_SOURCE_DIR}/tests/support;${contract_dir}")
endfunction()

# An object library compiling `sources` of chapter `id` against its contract
# (and the libraries the chapter links: LIBS, DEPENDS).
function(_dtw_chapter_objects target)
  add_library(${target} OBJECT ${ARGN})
  target_include_directories(${target} PUBLIC "${contract_dir}")
  target_link_libraries(${target} PUBLIC dtw::core ${ARG_LIBS} ${dep_libs})
  dtw_target_warnings(${target})
endfunction()

function(dtw_add_chapter name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "TITLE;MPI_TWIN;MPI_TIMEOUT;MPI_SUBSET;PLANTED_PER_STEP"
    "SOURCES;DEMOS;TESTS;STEPS;LIBS;TEST_LIBS;DEPENDS;BACKENDS;BENCH;MPI_SUBSET_NPS")
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
  # A source whose first line starts with "// @given" is not the learner's
  # and would give the lesson away if copied (a pitfall's broken variant of
  # a loop the learner writes): tools/gen-labs leaves it out of labs/, and
  # the lab library compiles it from solutions/.
  set(lab_files "")
  set(given_sources "")
  foreach(file IN LISTS ARG_SOURCES)
    set(first "")
    if(EXISTS "${solution_dir}/${file}")
      file(STRINGS "${solution_dir}/${file}" first LIMIT_COUNT 1)
    endif()
    if(first MATCHES "^// @given")
      list(APPEND given_sources "${solution_dir}/${file}")
    else()
      list(APPEND lab_files "${file}")
    endif()
  endforeach()
  _dtw_chapter_files(lab_sources ${name} "${lab_dir}" lab ${lab_files})
  list(APPEND lab_sources ${given_sources})
  _dtw_chapter_files(demo_sources ${name} "${solution_dir}" demo ${ARG_DEMOS})
  _dtw_chapter_files(test_sources ${name} "${tests_dir}" test ${ARG_TESTS})

  # Steps: ids in the text's order, the same order as the text's step table.
  set(step_ids "")
  foreach(step IN LISTS ARG_STEPS)
    if(step MATCHES ":")
      message(FATAL_ERROR "dtw_add_chapter(${name}): STEPS lists step ids only, in the order of "
        "the chapter text (\"${id}.1\" \"${id}.2\" ...); each test suite declares its steps with "
        "DTW_TEST_STEPS in its test file (docs/adding-a-chapter.md). Got '${step}'.")
    endif()
    if(NOT step MATCHES "^${id}\\.[1-9][0-9]*$")
      message(FATAL_ERROR "dtw_add_chapter(${name}): step '${step}' must read \"${id}.K\"")
    endif()
    if(step IN_LIST step_ids)
      message(FATAL_ERROR "dtw_add_chapter(${name}): step ${step} is listed twice")
    endif()
    list(APPEND step_ids "${step}")
  endforeach()
  _dtw_text_steps(text_steps "${contract_dir}/README.md" ${id})
  if(NOT EXISTS "${contract_dir}/README.md")
    # A chapter whose text is not written yet: nothing to check the order against.
    message(STATUS "dtw_add_chapter(${name}): no chapters/${name}/README.md yet; STEPS give the order")
  elseif(NOT text_steps STREQUAL step_ids)
    string(REPLACE ";" " " want "${step_ids}")
    string(REPLACE ";" " " have "${text_steps}")
    message(FATAL_ERROR "dtw_add_chapter(${name}): STEPS (${want}) must be the steps of the "
      "chapter text's step table (rows \"| ${id}.K | ...\" in chapters/${name}/README.md), in "
      "its order; the table has: ${have}")
  endif()

  # Where the regions are: every step needs one, in a SOURCES file (the probe
  # and planted-bug builds compile those files only). Re-run CMake when a
  # solution file changes, so the list stays right.
  set(region_files "")
  set(region_steps "")
  file(GLOB_RECURSE solution_files "${solution_dir}/*")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${solution_files}
    "${contract_dir}/README.md")
  foreach(file IN LISTS solution_files)
    file(STRINGS "${file}" markers REGEX "^[ \t]*// @lab [0-9][0-9]\\.[0-9]+:")
    if(NOT markers)
      continue()
    endif()
    if(NOT file IN_LIST solution_sources)
      file(RELATIVE_PATH rel "${root}" "${file}")
      message(FATAL_ERROR "dtw_add_chapter(${name}): ${rel} has @lab regions but is not in "
        "SOURCES; put regions only in the .cpp files the chapter compiles")
    endif()
    list(APPEND region_files "${file}")
    foreach(marker IN LISTS markers)
      string(REGEX MATCH "[0-9][0-9]\\.[0-9]+" step "${marker}")
      if(NOT step IN_LIST step_ids)
        message(FATAL_ERROR "dtw_add_chapter(${name}): ${file} has a region of step ${step}, "
          "which is not in STEPS")
      endif()
      list(APPEND region_steps "${step}")
    endforeach()
  endforeach()
  foreach(step IN LISTS step_ids)
    if(NOT step IN_LIST region_steps)
      message(FATAL_ERROR "dtw_add_chapter(${name}): step ${step} has no // @lab region in "
        "solutions/${name}")
    endif()
  endforeach()

  # The solution's objects: the files without regions in one object library,
  # each file with regions in its own, so that the probed and the planted-bug
  # libraries below compile only the files they change and share the rest.
  set(plain_sources "${solution_sources}")
  if(region_files)
    list(REMOVE_ITEM plain_sources ${region_files})
  endif()
  set(plain_objects "")
  if(plain_sources)
    _dtw_chapter_objects(dtw_ch${id}_plain_objects ${plain_sources})
    set(plain_objects $<TARGET_OBJECTS:dtw_ch${id}_plain_objects>)
  endif()
  set(region_objects "")  # entries "FILE=OBJECTS"
  set(all_region_objects "")
  foreach(file IN LISTS region_files)
    file(RELATIVE_PATH rel "${solution_dir}" "${file}")
    string(MAKE_C_IDENTIFIER "${rel}" stem)
    _dtw_chapter_objects(dtw_ch${id}_region_${stem} "${file}")
    list(APPEND region_objects "${file}=$<TARGET_OBJECTS:dtw_ch${id}_region_${stem}>")
    list(APPEND all_region_objects $<TARGET_OBJECTS:dtw_ch${id}_region_${stem}>)
  endforeach()

  # The two libraries: same contract header, same dtw::core, different sources.
  add_library(dtw_ch${id}_solution STATIC ${plain_objects} ${all_region_objects})
  add_library(dtw_ch${id}_lab STATIC ${lab_sources})
  # The solution library is what dtw installs and exports as dtw::chNN (and
  # what add_subdirectory users link by that alias); its contract headers are
  # installed to include/dtw/chapters/NN-x, so `#include "collectives.h"`
  # works both ways.
  add_library(dtw::ch${id} ALIAS dtw_ch${id}_solution)
  set_target_properties(dtw_ch${id}_solution PROPERTIES EXPORT_NAME ch${id})
  foreach(variant solution lab)
    set(lib dtw_ch${id}_${variant})
    target_include_directories(${lib} PUBLIC "$<BUILD_INTERFACE:${contract_dir}>"
      "$<INSTALL_INTERFACE:include/dtw/chapters/${name}>")
    target_link_libraries(${lib} PUBLIC dtw::core ${ARG_LIBS} ${dep_libs})
    dtw_target_warnings(${lib})
  endforeach()
  # A lab region replaced by DTW_TODO leaves names unused; that is expected, not a defect.
  set(lab_warnings
    -Wno-unused-parameter -Wno-unused-variable -Wno-unused-but-set-variable -Wno-unused-function
    $<$<CXX_COMPILER_ID:Clang,AppleClang>:-Wno-unused-private-field>)
  target_compile_options(dtw_ch${id}_lab PRIVATE ${lab_warnings})

  # Without the dtw program (dtw used as a subproject), the lab and the demos
  # are not part of the default build.
  if(NOT DTW_BUILD_TOOLS)
    set_target_properties(dtw_ch${id}_lab PROPERTIES EXCLUDE_FROM_ALL ON)
  endif()
  if(demo_sources)
    add_library(dtw_ch${id}_demos OBJECT ${demo_sources})
    if(NOT DTW_BUILD_TOOLS)
      set_target_properties(dtw_ch${id}_demos PROPERTIES EXCLUDE_FROM_ALL ON)
    endif()
    target_link_libraries(dtw_ch${id}_demos PUBLIC dtw_ch${id}_solution)
    dtw_target_warnings(dtw_ch${id}_demos)
    # The same demos with the learner's library: `dtw run DEMO --lab` hands
    # over to this program (tools/dtw/lab_run_main.cpp; dtw_cli_run and
    # dtw_lab_run_main are made in tools/dtw, after the chapters).
  endif()
  if(demo_sources AND DTW_BUILD_TOOLS)
    # Compiled once against the lab: for the lab-run program and the lab's
    # benchmark (dtw_lab_bench_<topic>, below).
    add_library(dtw_ch${id}_lab_demos OBJECT ${demo_sources})
    target_link_libraries(dtw_ch${id}_lab_demos PUBLIC dtw_ch${id}_lab)
    dtw_target_warnings(dtw_ch${id}_lab_demos)
    # main() is tools/dtw's dtw_lab_run_main, compiled once for every chapter.
    add_executable(dtw_ch${id}_lab_run $<TARGET_OBJECTS:dtw_lab_run_main>)
    target_link_libraries(dtw_ch${id}_lab_run PRIVATE dtw_ch${id}_lab_demos dtw_ch${id}_lab dtw_cli_run)
    dtw_target_warnings(dtw_ch${id}_lab_run)
  endif()

  set(test_programs "")
  set(planted_json "")
  if(DTW_BUILD_TESTS)
    _dtw_test_support()
    set(support "${root}/tests/support")
    set(gen_labs "${root}/tools/gen-labs")
    set(work "${CMAKE_CURRENT_BINARY_DIR}/ch${id}")
    # The probed solution: each region file with a probe in place of each
    # marker line (tools/gen-labs --probe-file), the other objects shared.
    set(probed_sources "")
    foreach(file IN LISTS region_files)
      get_filename_component(base "${file}" NAME)
      set(out "${work}/probed/${base}")
      add_custom_command(OUTPUT "${out}"
        COMMAND "${gen_labs}" --probe-file "${file}" "${out}"
        DEPENDS "${file}" "${gen_labs}"
        COMMENT "Probing solutions/${name}/${base}" VERBATIM)
      list(APPEND probed_sources "${out}")
    endforeach()
    add_library(dtw_ch${id}_probed STATIC ${probed_sources} ${plain_objects})
    # Quote includes of the generated copies resolve in solutions/NN-x.
    target_include_directories(dtw_ch${id}_probed PRIVATE "${solution_dir}")
    target_include_directories(dtw_ch${id}_probed PUBLIC "${contract_dir}")
    target_compile_options(dtw_ch${id}_probed PRIVATE "SHELL:-include ${support}/dtw_step_probe.h")
    target_link_libraries(dtw_ch${id}_probed PUBLIC dtw::core ${ARG_LIBS} ${dep_libs} dtw_test_probe)
    dtw_target_warnings(dtw_ch${id}_probed)

    # The tests, compiled once for every program of the chapter.
    add_library(ch${id}_test_objects OBJECT ${test_sources})
    target_include_directories(ch${id}_test_objects PUBLIC "${support}" "${contract_dir}")
    target_link_libraries(ch${id}_test_objects PUBLIC dtw::core ${ARG_LIBS} ${dep_libs} GTest::gtest
      ${ARG_TEST_LIBS})
    dtw_target_warnings(ch${id}_test_objects)
    dtw_machinery(ch${id}_test_objects)
    target_precompile_headers(ch${id}_test_objects REUSE_FROM dtw_test_pch)
    _dtw_test_main(ch${id}_main_solution "${step_ids}" 1)
    _dtw_test_main(ch${id}_main_lab "${step_ids}" 0)

    _dtw_chapter_program(ch${id}_solution_tests ch${id}_main_solution dtw_ch${id}_probed)
    _dtw_chapter_program(ch${id}_lab_tests ch${id}_main_lab dtw_ch${id}_lab)
    foreach(variant solution lab)
      # PRE_TEST: listing the tests happens when CTest runs, so building never
      # runs chapter code.
      gtest_discover_tests(ch${id}_${variant}_tests
        TEST_PREFIX "ch${id}.${variant}."
        PROPERTIES LABELS ${variant} TIMEOUT 120
        DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60)
      list(APPEND test_programs
        "\"${variant}_tests\": \"$<TARGET_FILE:ch${id}_${variant}_tests>\"")
    endforeach()

    # Planted bugs: for each step, the solution with one realistic bug in that
    # step's region, built as a lab test program; the CTest test
    # chNN.check.planted_NN.K_n (the n-th bug of step NN.K, in the file's
    # order) runs `dtw check` on it and checks that the report names the
    # step, shows the context and the hint. Every step needs at least
    # PLANTED_PER_STEP bugs (docs/adding-a-chapter.md, "Planted bugs").
    if(NOT DEFINED ARG_PLANTED_PER_STEP)
      set(ARG_PLANTED_PER_STEP 3)
    endif()
    # A planted file's compile is mostly parsing the chapter's headers: they
    # are precompiled once per chapter, with the planted libraries' own flags,
    # and reused by every one of them (half the time of each, or better).
    file(GLOB contract_headers "${contract_dir}/*.h")
    set(pch_source "${work}/planted_pch.cpp")
    file(CONFIGURE OUTPUT "${pch_source}" CONTENT "// Generated: carries the planted bugs' precompiled headers.\n")
    add_library(dtw_ch${id}_planted_pch OBJECT "${pch_source}")
    target_include_directories(dtw_ch${id}_planted_pch PRIVATE "${solution_dir}")
    target_include_directories(dtw_ch${id}_planted_pch PUBLIC "${contract_dir}")
    target_link_libraries(dtw_ch${id}_planted_pch PUBLIC dtw::core ${ARG_LIBS} ${dep_libs})
    dtw_target_warnings(dtw_ch${id}_planted_pch)
    dtw_machinery(dtw_ch${id}_planted_pch)
    target_compile_options(dtw_ch${id}_planted_pch PRIVATE ${lab_warnings})
    target_precompile_headers(dtw_ch${id}_planted_pch PRIVATE <dtw/dtw.h> ${contract_headers})
    set(bug_file "${tests_dir}/planted_bugs")
    if(NOT EXISTS "${bug_file}")
      message(FATAL_ERROR "dtw_add_chapter(${name}): tests/${name}/planted_bugs is missing: it "
        "holds the planted bugs of every step (docs/adding-a-chapter.md)")
    endif()
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${bug_file}")
    file(STRINGS "${bug_file}" bug_lines REGEX "^bug ")
    set(bug_steps "")
    foreach(bug_line IN LISTS bug_lines)
      if(NOT bug_line MATCHES "^bug +(${id}\\.[0-9]+) +([^ ]+) *$")
        message(FATAL_ERROR "dtw_add_chapter(${name}): planted_bugs: '${bug_line}' must read "
          "'bug ${id}.K FILE'")
      endif()
      set(step "${CMAKE_MATCH_1}")
      set(base "${CMAKE_MATCH_2}")
      if(NOT step IN_LIST step_ids)
        message(FATAL_ERROR "dtw_add_chapter(${name}): planted_bugs: step ${step} is not a step "
          "of the chapter")
      endif()
      # n: this bug's number among its step's bugs.
      list(APPEND bug_steps "${step}")
      set(n 0)
      foreach(s IN LISTS bug_steps)
        if(s STREQUAL step)
          math(EXPR n "${n} + 1")
        endif()
      endforeach()
      set(bug "${step}_${n}")
      set(planted_file "${work}/planted/${bug}/${base}")
      add_custom_command(OUTPUT "${planted_file}"
        COMMAND "${gen_labs}" --plant "${bug_file}" "${step}" "${planted_file}" ${n}
        DEPENDS "${bug_file}" "${solution_dir}/${base}" "${gen_labs}"
        COMMENT "Planting bug ${n} of step ${step} in solutions/${name}/${base}" VERBATIM)
      set(objects "${plain_objects}")
      foreach(entry IN LISTS region_objects)
        string(FIND "${entry}" "=" eq)
        string(SUBSTRING "${entry}" 0 ${eq} entry_file)
        math(EXPR eq "${eq} + 1")
        string(SUBSTRING "${entry}" ${eq} -1 object)
        if(NOT entry_file STREQUAL "${solution_dir}/${base}")
          list(APPEND objects "${object}")
        endif()
      endforeach()
      set(planted_lib dtw_ch${id}_planted_${bug})
      add_library(${planted_lib} STATIC "${planted_file}" ${objects})
      target_include_directories(${planted_lib} PRIVATE "${solution_dir}")
      target_include_directories(${planted_lib} PUBLIC "${contract_dir}")
      target_link_libraries(${planted_lib} PUBLIC dtw::core ${ARG_LIBS} ${dep_libs})
      dtw_target_warnings(${planted_lib})
      dtw_machinery(${planted_lib})
      # Buggy learner code, compiled as the lab is.
      target_compile_options(${planted_lib} PRIVATE ${lab_warnings})
      target_precompile_headers(${planted_lib} REUSE_FROM dtw_ch${id}_planted_pch)
      _dtw_chapter_program(ch${id}_planted_${bug}_tests ch${id}_main_lab ${planted_lib})
      list(APPEND planted_json
        "\"${step}#${n}\": \"$<TARGET_FILE:ch${id}_planted_${bug}_tests>\"")
      add_test(NAME ch${id}.check.planted_${bug}
        COMMAND bash "${root}/tests/invariant/check_names_the_step.sh" $<TARGET_FILE:dtw>
          ${id} ${step} $<TARGET_FILE:ch${id}_planted_${bug}_tests> "${bug_file}" ${n})
      set_tests_properties(ch${id}.check.planted_${bug} PROPERTIES
        LABELS "solution;check" TIMEOUT 300)
    endforeach()
    foreach(step IN LISTS step_ids)
      set(n 0)
      foreach(s IN LISTS bug_steps)
        if(s STREQUAL step)
          math(EXPR n "${n} + 1")
        endif()
      endforeach()
      if(n LESS ARG_PLANTED_PER_STEP)
        message(FATAL_ERROR "dtw_add_chapter(${name}): tests/${name}/planted_bugs has ${n} "
          "bug(s) for step ${step}; every step needs at least ${ARG_PLANTED_PER_STEP}")
      endif()
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
    # The report's code is compiled once; it is linked twice: with the
    # solution (dtw_bench_<topic>) and with the learner's lab
    # (dtw_lab_bench_<topic>, `dtw bench <topic> --lab`). A one-line source
    # per program tells bench_main whose code the rows time, which it prints
    # first; a lab step not written yet stops the report at its step.
    add_library(dtw_bench_${topic}_objects OBJECT ${bench_sources})
    target_include_directories(dtw_bench_${topic}_objects PRIVATE "${solution_dir}")
    target_link_libraries(dtw_bench_${topic}_objects PUBLIC dtw::core ${ARG_LIBS} ${dep_libs}
      benchmark::benchmark dtw_cli_support CLI11::CLI11 fmt::fmt)
    target_include_directories(dtw_bench_${topic}_objects PUBLIC "${contract_dir}")
    dtw_target_warnings(dtw_bench_${topic}_objects)
    foreach(variant solution lab)
      set(program dtw_bench_${topic})
      set(who "chapter ${id}'s solution (solutions/${name}; --lab: yours)")
      if(variant STREQUAL "lab")
        set(program dtw_lab_bench_${topic})
        set(who "your chapter ${id} lab (labs/${name})")
      endif()
      set(code_file "${PROJECT_BINARY_DIR}/bench/code/${program}.cpp")
      file(CONFIGURE OUTPUT "${code_file}" CONTENT "// Generated by dtw_add_chapter: whose code ${program} times.
#include \"bench_main.h\"
namespace {
const bool kRowsCode = (dtw::cli::set_rows_code(\"${who}\"), true);
}  // namespace
")
      add_executable(${program} "${code_file}")
      target_link_libraries(${program} PRIVATE dtw_bench_${topic}_objects dtw_ch${id}_${variant})
      if(variant STREQUAL "solution")
        if(demo_sources)
          target_link_libraries(${program} PRIVATE dtw_ch${id}_demos)
        endif()
      elseif(NOT DTW_BUILD_TOOLS)
        set_target_properties(${program} PROPERTIES EXCLUDE_FROM_ALL ON)  # as the lab itself
      elseif(demo_sources)
        target_link_libraries(${program} PRIVATE dtw_ch${id}_lab_demos)
      endif()
      set_target_properties(${program} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/bench")
      dtw_target_warnings(${program})
    endforeach()
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
  _dtw_json_list(steps_json ${step_ids})
  _dtw_json_list(backends_json ${ARG_BACKENDS})
  _dtw_json_list(depends_json ${ARG_DEPENDS})
  _dtw_json_string(bench_json "${bench_name}")
  list(JOIN test_programs ",\n  " programs_joined)
  if(programs_joined)
    set(programs_joined ",\n  ${programs_joined}")
  endif()
  list(JOIN planted_json ", " planted_joined)
  set(lab_run "")
  if(demo_sources AND DTW_BUILD_TOOLS)
    set(lab_run ",\n  \"lab_run\": \"$<TARGET_FILE:dtw_ch${id}_lab_run>\"")
  endif()
  file(GENERATE OUTPUT "${PROJECT_BINARY_DIR}/chapters/${id}.json" CONTENT "{
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
  \"steps\": ${steps_json},
  \"planted\": {${planted_joined}}${lab_run}${programs_joined}
}
")
endfunction()
