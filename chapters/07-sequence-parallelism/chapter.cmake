# Chapter 07's registration (included by chapters/CMakeLists.txt; see
# cmake/DtwChapter.cmake and docs/adding-a-chapter.md).
dtw_add_chapter(07-sequence-parallelism
  TITLE "Sequence parallelism"
  SOURCES token_runs.cpp blocks.cpp online_softmax.cpp gathered.cpp ulysses.cpp
    ring_attention.cpp sp_train.cpp
  DEMOS demos.cpp
  TESTS token_runs_test.cpp gathered_test.cpp merge_test.cpp ulysses_test.cpp ring_test.cpp sp_train_test.cpp
  STEPS 07.1 07.2 07.3 07.4
  LIBS dtw::train
  DEPENDS 01
  BACKENDS threads mpi
  # The twin runs every test at np 2, 3 and 4 (a few seconds each); the
  # training run on 8 ranks stays on threads (under np <= 4 it would run on
  # threads in every process: the same test, np times).
  MPI_TWIN "-*OnEightRanks"
  BENCH sequence_parallelism_bench.cpp)
# The pitfalls live in demos.cpp (solution only: their broken variants are
# near-complete solutions of the steps and stay out of labs/), so they are
# checked through the dtw program: each must be caught with the message that
# names what is wrong.
foreach(pitfall
    "causal-ring-imbalance|causal ring imbalance: query-key pairs per rank 272 784 1296 1808: rank 3 does"
    "merge-without-lse|out differs from full attention at .*merged without the log-sum-exp"
    "ring-backward-first-kv|dq differs from full attention at .*the forward equals full attention, but the backward reused the first hop's K/V"
    "ulysses-transposed-reshape|batch 2 \\(batch 1 was right\\).*swaps batch rows and heads")
  string(REPLACE "|" ";" parts "${pitfall}")
  list(GET parts 0 pitfall_name)
  list(GET parts 1 pitfall_message)
  add_test(NAME ch07.pitfall.${pitfall_name}
           COMMAND dtw run pitfall ${pitfall_name} --ranks 4)
  set_tests_properties(ch07.pitfall.${pitfall_name} PROPERTIES
    LABELS solution TIMEOUT 60
    PASS_REGULAR_EXPRESSION "Pitfall caught, as intended.*${pitfall_message}")
endforeach()
