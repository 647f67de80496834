# Chapter 08's registration (included by chapters/CMakeLists.txt; see
# cmake/DtwChapter.cmake and docs/adding-a-chapter.md).
dtw_add_chapter(08-hybrid-parallelism
  TITLE "Hybrid parallelism"
  SOURCES layout.cpp hybrid_plan.cpp hybrid_step.cpp hybrid.cpp planner.cpp
  DEMOS demos.cpp
  TESTS layout_test.cpp plan_test.cpp end_of_step_test.cpp hybrid_test.cpp planner_test.cpp
  STEPS 08.1 08.2 08.3 08.4 08.5
  LIBS dtw::train
  DEPENDS 01 05 06
  BACKENDS threads mpi
  # The twin's worlds are processes only where the test's world is np: the
  # layouts of 2, 3 and 4 ranks, and the checks that refuse bad ones. (A
  # test of 8 ranks would run on threads in every process: the same test,
  # np times.)
  MPI_TWIN "HybridTest.LayoutsOfTwoThreeAndFourRanks*:LayoutCheckTest.*:HybridArgumentsTest.*"
  MPI_TIMEOUT 300)
