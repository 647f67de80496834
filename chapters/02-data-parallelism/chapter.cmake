# Chapter 02's registration (included by chapters/CMakeLists.txt; see
# cmake/DtwChapter.cmake and docs/adding-a-chapter.md).
dtw_add_chapter(02-data-parallelism
  TITLE "Data parallelism"
  SOURCES shards.cpp replicas.cpp dp_server.cpp dp_allreduce.cpp buckets.cpp
    ddp_bucketed.cpp ddp_accumulate.cpp pitfalls.cpp
  DEMOS demos.cpp
  TESTS dp_server_test.cpp dp_allreduce_test.cpp replica_check_test.cpp buckets_test.cpp
    ddp_bucketed_test.cpp ddp_accumulate_test.cpp uneven_shards_test.cpp pitfalls_test.cpp
  STEPS "02.1:DpServerTest"
        "02.2:DpAllreduceTest,ReplicaCheckTest,SkipBroadcastPitfallTest"
        "02.3:BucketsTest,DdpBucketedTest"
        "02.4:MicroBatchShardsTest,DdpAccumulateTest,AccumulationPitfallTest"
        "02.5:ShardWeightTest,UnevenShardsTest,AverageByWorldSizePitfallTest"
  LIBS dtw::train
  DEPENDS 01
  BACKENDS threads mpi
  MPI_TIMEOUT 300)
