# Chapter 05's registration (included by chapters/CMakeLists.txt; see
# cmake/DtwChapter.cmake and docs/adding-a-chapter.md).
dtw_add_chapter(05-pipeline-parallelism
  TITLE "Pipeline parallelism"
  SOURCES stage_split.cpp schedules.cpp executor.cpp executor_passes.cpp step_sync.cpp interleaved.cpp
    check_schedule.cpp strategies.cpp bubble.cpp
  DEMOS demos.cpp
  TESTS stage_split_test.cpp schedule_test.cpp pipeline_test.cpp interleaved_test.cpp
    checkpoint_test.cpp check_schedule_test.cpp composition_test.cpp bubble_test.cpp
  STEPS 05.1 05.2 05.3 05.4 05.5 05.6 05.7
  LIBS dtw::train
  DEPENDS 01
  BACKENDS threads mpi
  # The twin skips what only the threads backend can show (the deadlock
  # detector's report) and the bubble sweeps (their p = 8 runs would run on
  # threads in every process: the same test, np times). At np 3 it runs the
  # training tests only, to bound its time.
  MPI_TWIN "-*Deadlock*:*Bubble*"
  MPI_SUBSET "ExecutorTest.*:PipelineTest.*:InterleavedTest.Matches*:CheckpointTest.Recomputing*"
  MPI_SUBSET_NPS 3
  MPI_TIMEOUT 300
  # Three planted bugs per step (docs/adding-a-chapter.md, "Planted bugs").
  PLANTED_PER_STEP 3)
