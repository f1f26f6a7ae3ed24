// The seed corpora of the fuzz targets, fuzz/corpus/<target>/ (fuzz/README.md lists the seeds):
// written by this one function, which both the make_fuzz_corpus tool (fuzz/make_corpus.cpp) and
// the test that keeps the committed files equal to its output (tests/fuzz/test_fuzz_corpus.cpp) call.
#pragma once

#include <string>

namespace heed::fuzz {

/// The targets whose seeds write_fuzz_corpus writes, one directory each under its root.
inline constexpr const char* kFuzzCorpusTargets[] = {"safetensors", "train_state", "seq2seq_checkpoint",
                                                    "seq2seq_state"};

/// Writes every seed file under `root` (root/<target>/<seed>.safetensors), creating the directories
/// and overwriting files of the same names; other files are left alone. Deterministic: the same
/// bytes on every run, build and CPU (no value goes through OpenBLAS). Throws heed::Error when a
/// file cannot be written.
void write_fuzz_corpus(const std::string& root);

}  // namespace heed::fuzz
