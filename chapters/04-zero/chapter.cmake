# Chapter 04's registration (included by chapters/CMakeLists.txt; see
# cmake/DtwChapter.cmake and docs/adding-a-chapter.md).
dtw_add_chapter(04-zero
  TITLE "ZeRO and FSDP"
  SOURCES sharding.cpp zero_run.cpp zero1.cpp zero2.cpp zero3.cpp zero3_prefetch.cpp
    checkpoint.cpp checkpoint_io.cpp pitfalls.cpp
  DEMOS demos.cpp
  TESTS zero_options_test.cpp zero1_test.cpp zero2_test.cpp zero3_test.cpp checkpoint_test.cpp
  STEPS "04.1:Zero1Test,ShardingTest,ZeroOptionsTest" "04.2:Zero2Test,Zero2PitfallTest"
        "04.3:Zero3Test,Zero3PitfallTest" "04.5:CheckpointTest"
  LIBS dtw::train
  DEPENDS 01
  BACKENDS threads mpi
  MPI_TIMEOUT 300)
