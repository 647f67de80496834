# Chapter 01's registration (included by chapters/CMakeLists.txt; see
# cmake/DtwChapter.cmake and docs/adding-a-chapter.md).
dtw_add_chapter(01-collectives
  TITLE "Collectives"
  SOURCES dispatch.cpp algo_names.cpp
    broadcast_linear.cpp broadcast_binomial.cpp broadcast_scatter_allgather.cpp
    reduce_linear.cpp reduce_binomial.cpp gather_linear.cpp scatter_linear.cpp
    allgather_ring.cpp allgather_recursive_doubling.cpp
    reduce_scatter_ring.cpp reduce_scatter_recursive_halving.cpp
    allreduce_naive.cpp allreduce_binomial.cpp allreduce_ring.cpp allreduce_rabenseifner.cpp
    allreduce_direct.cpp alltoall_pairwise.cpp barrier_dissemination.cpp
  DEMOS demos.cpp
  # A step's tests run in this order, and dtw check shows the first that
  # fails: the plain ring reduce-scatter before the in-place composite one.
  TESTS broadcast_test.cpp reduce_test.cpp gather_scatter_test.cpp allgather_test.cpp
    reduce_scatter_test.cpp allgather_in_place_test.cpp allreduce_test.cpp alltoall_test.cpp barrier_test.cpp
    gloo_peer_test.cpp collective_arguments_test.cpp context_test.cpp
  STEPS 01.1 01.2 01.3 01.4 01.5 01.6 01.7 01.8 01.9 01.10 01.11 01.12
  # gloo_peer_test.cpp compares with Gloo when it was found (else it skips).
  TEST_LIBS $<$<BOOL:${DTW_HAVE_GLOO}>:gloo>
  BACKENDS threads mpi nccl
  # The slow twin (its sweeps run every world size on processes: about 40 s at
  # np 2 and 95 s at np 4 on two loaded cores, RUN_SERIAL). np 2 and 4 run the
  # whole suite; np 3, the odd count, the tests where a non-power-of-two count
  # changes the algorithm. Tests whose checks share memory between rank
  # threads, and the deadlock detector's, stay on threads.
  MPI_TWIN "-*Deadlock*:*Timeout*:*Hang*:P2pTest.BarrierSeparatesPhases:BarrierTest.NoRankLeavesBeforeAllArrive:CollectiveArgumentsTest.CountThatDiffersIsACollectiveMismatchOnEveryRank"
  MPI_TIMEOUT 600
  MPI_SUBSET "Allreduce*:Allgather*:ReduceScatter*" MPI_SUBSET_NPS 3
  # At least three planted bugs per step (docs/adding-a-chapter.md, "Planted bugs").
  PLANTED_PER_STEP 3)
# The non-blocking collectives (nonblocking.h): in the solution library only,
# which chapters 02+ link; the lab keeps the blocking API. Their sources start
# with "// @solution-only", so tools/gen-labs leaves them out of labs/.
target_sources(dtw_ch01_solution PRIVATE
  ${PROJECT_SOURCE_DIR}/solutions/01-collectives/nonblocking_engine.cpp
  ${PROJECT_SOURCE_DIR}/solutions/01-collectives/nonblocking_ring.cpp)
if(DTW_BUILD_TESTS)
  add_executable(ch01_nonblocking_tests ${PROJECT_SOURCE_DIR}/tests/01-collectives/nonblocking_test.cpp)
  target_include_directories(ch01_nonblocking_tests PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
  target_link_libraries(ch01_nonblocking_tests PRIVATE dtw_ch01_solution GTest::gtest_main)
  dtw_target_warnings(ch01_nonblocking_tests)
  dtw_machinery(ch01_nonblocking_tests)
  gtest_discover_tests(ch01_nonblocking_tests TEST_PREFIX "ch01.solution."
    PROPERTIES LABELS solution TIMEOUT 120 DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60)
  # Its MPI twin (tests/mpi/CMakeLists.txt makes one per entry).
  set_property(GLOBAL APPEND PROPERTY DTW_CHAPTER_MPI_TWINS
    "ch01_nonblocking_tests|-*Deadlock*:*Timeout*:*Dropped*|300||")
endif()
