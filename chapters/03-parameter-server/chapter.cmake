# Chapter 03's registration (included by chapters/CMakeLists.txt; see
# cmake/DtwChapter.cmake and docs/adding-a-chapter.md).
dtw_add_chapter(03-parameter-server
  TITLE "Parameter servers"
  SOURCES ps_options.cpp ps_shards.cpp ps_worker.cpp ps_sync.cpp ps_async.cpp ps_ssp.cpp
    pitfalls.cpp
  DEMOS demos.cpp
  TESTS ps_sync_test.cpp ps_errors_test.cpp ps_async_test.cpp ps_ssp_test.cpp
    ps_shard_test.cpp ps_straggler_test.cpp pitfalls_test.cpp
  STEPS 03.1 03.2 03.3 03.4 03.5
  LIBS dtw::train
  DEPENDS 01
  BACKENDS threads mpi
  MPI_TIMEOUT 300
  BENCH parameter_server_bench.cpp server_link_bench.cpp
  PLANTED_PER_STEP 3)
