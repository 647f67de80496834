# Chapter 05's registration (included by chapters/CMakeLists.txt; see
# cmake/DtwChapter.cmake and docs/adding-a-chapter.md).
dtw_add_chapter(05-pipeline-parallelism
  TITLE "Pipeline parallelism"
  SOURCES stage_split.cpp schedules.cpp executor.cpp step_sync.cpp interleaved.cpp
    check_schedule.cpp strategies.cpp
  DEMOS demos.cpp
  TESTS stage_split_test.cpp schedule_test.cpp pipeline_test.cpp interleaved_test.cpp
    checkpoint_test.cpp check_schedule_test.cpp
  STEPS 05.1 05.2 05.3 05.4 05.5 05.6
  LIBS dtw::train
  DEPENDS 01
  BACKENDS threads mpi
  MPI_TWIN "-*Deadlock*"
  MPI_TIMEOUT 300)
