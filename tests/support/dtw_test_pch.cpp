// The translation unit that builds the precompiled test headers (dtw_test_pch
// in cmake/DtwChapter.cmake); it has no code of its own.
