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
  MPI_TIMEOUT 300)
