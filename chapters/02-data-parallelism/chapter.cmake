# Chapter 02's registration (included by chapters/CMakeLists.txt; see
# cmake/DtwChapter.cmake and docs/adding-a-chapter.md).
dtw_add_chapter(02-data-parallelism
  TITLE "Data parallelism"
  SOURCES shards.cpp replicas.cpp dp_server.cpp dp_allreduce.cpp buckets.cpp
    ddp_bucketed.cpp ddp_accumulate.cpp pitfalls.cpp
  DEMOS demos.cpp
  TESTS dp_server_test.cpp dp_allreduce_test.cpp replica_check_test.cpp buckets_test.cpp
    bucket_reducer_test.cpp
    ddp_bucketed_test.cpp ddp_accumulate_test.cpp uneven_shards_test.cpp pitfalls_test.cpp
  STEPS 02.1 02.2 02.3 02.4 02.5
  LIBS dtw::train
  DEPENDS 01
  BACKENDS threads mpi
  BENCH data_parallelism_bench.cpp server_link_bench.cpp bucket_sweep_bench.cpp
  # The twin runs what processes change: the strategies and the replica
  # check (2, 3 and 4 processes; at 3 only the matches, the check and the
  # allreduce count). Pure functions of the plan (buckets, micro-batch and
  # shard splits), the 5-rank world, which runs on threads under np <= 4
  # anyway, and the server's pull test (its workers share a flag) stay on the
  # threads run.
  MPI_TWIN "-DpServerPullTest.*:BucketsTest.*:BucketArgumentsTest.*:MicroBatchShardsTest.*:MicroBatchArgumentsTest.*:ShardWeightTest.*:ShardArgumentsTest.*:UnevenShardsTest.EveryStrategy*"
  MPI_TIMEOUT 300
  MPI_SUBSET "*MatchesTheReference*:ReplicaCheckTest.*:ReplicaFingerprintTest.*:SameRunCheckTest.*:DdpBucketedTest.StartsOne*" MPI_SUBSET_NPS 3
  # At least three planted bugs per step (docs/adding-a-chapter.md, "Planted bugs").
  PLANTED_PER_STEP 3)
