// make_fuzz_corpus DIR: writes the seed corpora of the fuzz targets under DIR (fuzz/corpus_writer.h).
// Run from the repository's root as `./build/make_fuzz_corpus fuzz/corpus` when a format or a seed
// changes (fuzz/README.md); tests/fuzz/test_fuzz_corpus.cpp fails until the committed files are
// its output again.
#include <cstdio>
#include <exception>

#include "corpus_writer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_fuzz_corpus DIR\n");
    return 2;
  }
  try {
    heed::fuzz::write_fuzz_corpus(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_fuzz_corpus: error: %s\n", e.what());
    return 1;
  }
  std::printf("wrote the corpora to %s\n", argv[1]);
  return 0;
}
