# Chapter 07's registration (included by chapters/CMakeLists.txt; see
# cmake/DtwChapter.cmake and docs/adding-a-chapter.md).
dtw_add_chapter(07-sequence-parallelism
  TITLE "Sequence parallelism"
  SOURCES token_runs.cpp blocks.cpp online_softmax.cpp gathered.cpp ulysses.cpp
    ring_attention.cpp sp_train.cpp
  DEMOS demos.cpp
  TESTS token_runs_test.cpp merge_test.cpp ulysses_test.cpp ring_test.cpp sp_train_test.cpp
  STEPS 07.1 07.2 07.3 07.4
  LIBS dtw::train
  DEPENDS 01
  BACKENDS threads mpi)
