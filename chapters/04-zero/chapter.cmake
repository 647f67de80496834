# Chapter 04's registration (included by chapters/CMakeLists.txt; see
# cmake/DtwChapter.cmake and docs/adding-a-chapter.md).
dtw_add_chapter(04-zero
  TITLE "ZeRO and FSDP"
  SOURCES sharding.cpp zero_run.cpp zero_access.cpp zero1.cpp zero2.cpp zero3.cpp zero3_prefetch.cpp
    checkpoint.cpp checkpoint_io.cpp pitfalls.cpp
  DEMOS demos.cpp
  TESTS zero_options_test.cpp zero1_test.cpp zero2_test.cpp zero3_test.cpp prefetch_test.cpp
    checkpoint_test.cpp
  STEPS 04.1 04.2 04.3 04.4 04.5
  LIBS dtw::train
  DEPENDS 01
  BACKENDS threads mpi
  # np 2 and 4 run every test; np 3, the odd count, the reference sweeps and
  # the checkpoints (about 25 s per count on two loaded cores).
  MPI_SUBSET "*MatchesTheReference*:CheckpointTest.*" MPI_SUBSET_NPS 3
  MPI_TIMEOUT 300
  BENCH zero_bench.cpp
  PLANTED_PER_STEP 3)
# dtw bench zero draws chapter 02's DDP beside the stages when it is built.
foreach(program dtw_bench_zero dtw_lab_bench_zero)
  if(TARGET ${program} AND TARGET dtw_ch02_demos)
    target_link_libraries(${program} PRIVATE dtw_ch02_demos dtw_ch02_solution)
  endif()
endforeach()
