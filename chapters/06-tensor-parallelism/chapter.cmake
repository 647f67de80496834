# Chapter 06's registration (included by chapters/CMakeLists.txt; see
# cmake/DtwChapter.cmake and docs/adding-a-chapter.md).
dtw_add_chapter(06-tensor-parallelism
  TITLE "Tensor parallelism (Megatron)"
  SOURCES conjugates.cpp parallel_linear.cpp parallel_mlp.cpp parallel_attention.cpp
    vocab_parallel.cpp sequence_parallel.cpp tp_strategy.cpp formulas.cpp
  DEMOS demos.cpp
  TESTS layers_test.cpp vocab_test.cpp sequence_test.cpp strategy_test.cpp cost_test.cpp
    pitfalls_test.cpp
  STEPS 06.1 06.2 06.3 06.4 06.5 06.6
  LIBS dtw::train
  DEPENDS 01
  BACKENDS threads mpi
  MPI_TIMEOUT 300
  MPI_SUBSET "*MatchesTheReference*:CostTest.*" MPI_SUBSET_NPS 3
  BENCH tp_fabric_bench.cpp)
# The benchmark draws chapter 02's DDP beside tensor parallelism when it is built.
foreach(program dtw_bench_tensor-parallelism dtw_lab_bench_tensor-parallelism)
  if(TARGET ${program} AND TARGET dtw_ch02_demos)
    target_link_libraries(${program} PRIVATE dtw_ch02_demos dtw_ch02_solution)
  endif()
endforeach()
