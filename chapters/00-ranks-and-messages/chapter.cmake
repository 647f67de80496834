# Chapter 00's registration (included by chapters/CMakeLists.txt; see
# cmake/DtwChapter.cmake and docs/adding-a-chapter.md).
dtw_add_chapter(00-ranks-and-messages
  TITLE "Ranks and messages"
  SOURCES ping_pong.cpp token_ring.cpp neighbor_exchange.cpp
  DEMOS demos.cpp
  TESTS ping_pong_test.cpp token_ring_test.cpp neighbor_exchange_test.cpp
  STEPS 00.1 00.2 00.3
  BACKENDS threads mpi nccl
  # Under MPI a true hang is the watchdog's job: the deadlock-detector tests
  # stay on threads, and so do tests whose checks share memory between rank threads.
  MPI_TWIN "-*Deadlock*:*Timeout*:*Hang*"
  MPI_TIMEOUT 300
  # At least three planted bugs per step (docs/adding-a-chapter.md, "Planted bugs").
  PLANTED_PER_STEP 3)
