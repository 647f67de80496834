# Chapter 08's registration (included by chapters/CMakeLists.txt; see
# cmake/DtwChapter.cmake and docs/adding-a-chapter.md).
dtw_add_chapter(08-hybrid-parallelism
  TITLE "Hybrid parallelism"
  SOURCES layout.cpp hybrid_plan.cpp hybrid_step.cpp hybrid.cpp planner.cpp
  DEMOS demos.cpp
  TESTS layout_test.cpp plan_test.cpp end_of_step_test.cpp hybrid_test.cpp planner_test.cpp
    traffic_test.cpp
  STEPS 08.1 08.2 08.3 08.4 08.5
  LIBS dtw::train
  DEPENDS 01 05 06
  BACKENDS threads mpi
  # The twin's worlds are processes only where the test's world is np: the
  # layouts of 2, 3 and 4 ranks, and the checks that refuse bad ones. (A
  # test of 8 ranks would run on threads in every process: the same test,
  # np times.)
  MPI_TWIN "HybridTest.LayoutsOfTwoThreeAndFourRanks*:LayoutCheckTest.*:HybridArgumentsTest.*"
  MPI_TIMEOUT 300
  BENCH hybrid_bench.cpp)
# The pitfalls live in demos.cpp (solution only: their broken variants are
# near-complete solutions of 08.1 and 08.4 and stay out of labs/), so they
# are checked through the dtw program: each must be caught with the message
# that names what is wrong -- the ranks a group holds and should hold, the
# tied table's element that differs from the reference, the split cycle.
foreach(pitfall
    "mesh-wrong-axis-order|rank [0-9]+'s tp group is ranks [0-9]+ [0-9]+, should be [0-9]+ [0-9]+: the grid was built pp .+ tp .+ dp"
    "tied-embedding-not-summed|after 1 steps: wte\\[[0-9]+\\].*expected .*, got .*tied embedding not summed"
    "groups-created-out-of-order|deadlock: a cycle of blocking calls has closed.*cycle: rank .*in split, waiting")
  string(REPLACE "|" ";" parts "${pitfall}")
  list(GET parts 0 pitfall_name)
  list(GET parts 1 pitfall_message)
  add_test(NAME ch08.pitfall.${pitfall_name}
           COMMAND dtw run pitfall ${pitfall_name} --ranks 8)
  set_tests_properties(ch08.pitfall.${pitfall_name} PROPERTIES
    LABELS solution TIMEOUT 60
    PASS_REGULAR_EXPRESSION "Pitfall caught, as intended.*${pitfall_message}")
endforeach()
