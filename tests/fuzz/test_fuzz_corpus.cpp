// fuzz/corpus/ is exactly what its documented generator writes (make_fuzz_corpus, fuzz/README.md):
// every committed seed, byte for byte, and no other file. When a format or the library's
// initialisation changes, this fails, naming the first file that differs, until the corpus is
// written again with `./build/make_fuzz_corpus fuzz/corpus`.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "core/check.h"
#include "corpus_writer.h"
#include "nn/gpt_checkpoint.h"
#include "nn/safetensors.h"
#include "support/process.h"

namespace {

namespace fs = std::filesystem;

// The regular files under `root`, as paths relative to it ("train_state/valid.safetensors").
std::set<std::string> files_under(const fs::path& root) {
  std::set<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file()) names.insert(fs::relative(e.path(), root).generic_string());
  return names;
}

// Where two byte strings first differ (the shorter one's length if one is a prefix of the other).
size_t first_difference(const std::string& a, const std::string& b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + std::min(a.size(), b.size()), b.begin()).first -
                             a.begin());
}

}  // namespace

TEST_CASE("fuzz/corpus holds exactly the seeds make_fuzz_corpus writes, byte for byte", "[fuzz]") {
  const fs::path committed = fs::path(HEED_SOURCE_DIR) / "fuzz" / "corpus";
  heed::test::ScratchDir out("fuzz-corpus");
  heed::fuzz::write_fuzz_corpus(out.path());
  const std::set<std::string> written = files_under(out.path()), kept = files_under(committed);
  REQUIRE(written.size() > 40);  // the four targets' seeds (48 when this was written)
  const std::string regenerate = "; run `./build/make_fuzz_corpus fuzz/corpus` from the repository's root";
  for (const std::string& name : kept)
    if (!written.count(name)) FAIL("fuzz/corpus/" << name << " is committed but make_fuzz_corpus does not write it");
  for (const std::string& name : written) {
    if (!kept.count(name)) FAIL("fuzz/corpus/" << name << " is written by make_fuzz_corpus but not committed" << regenerate);
    const std::string want = heed::test::read_file(out / name), have = heed::test::read_file((committed / name).string());
    if (have != want)
      FAIL("fuzz/corpus/" << name << " differs from what make_fuzz_corpus writes: " << have.size() << " bytes against "
                          << want.size() << ", first difference at byte " << first_difference(have, want) << regenerate);
  }
  SUCCEED(written.size() << " seeds, each equal to the committed file");
}

TEST_CASE("the safetensors fuzz seeds: the valid ones load, each malformed one is refused by its check", "[fuzz]") {
  // What fuzz/fuzz_safetensors.cpp does with each input: parse, then load as a GPT checkpoint. A
  // seed refused by another check than the one it was made for adds nothing (bad_dtype was once a
  // valid file: its dtype, I64, became readable).
  const fs::path dir = fs::path(HEED_SOURCE_DIR) / "fuzz" / "corpus" / "safetensors";
  auto load = [](const std::string& bytes, bool as_gpt) {
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    if (as_gpt) heed::nn::load_gpt_checkpoint_from_bytes(data, bytes.size(), "seed");
    else heed::nn::parse_safetensors(data, bytes.size(), "seed");
  };
  const std::map<std::string, std::string> refusals = {
      {"bad_truncated", "runs past the end of the file"},
      {"bad_short", "too short for the 8-byte header length"},
      {"bad_header_length", "is absurdly large"},
      {"bad_not_json", "header is not valid JSON"},
      {"bad_array", "header is not a JSON object but an array"},
      {"bad_dtype", "unsupported dtype 'I16'"},
      {"bad_negative_shape", "shape entry 0 (-1) is not a non-negative integer"},
      {"bad_shape_overflow", "the element count overflows int64"},
      {"bad_overlap", "overlap"},
      {"bad_offsets", "end is before begin"},
      {"bad_metadata", "entry 'config' is not a string"},
      {"bad_duplicate_key", "header lists 'a' twice"},
      // Well-formed safetensors, refused as GPT checkpoints:
      {"bad_config", "n_embd 4 is not divisible by n_head 3"},
      {"bad_vocab", "\"vocab\" has 4 characters but config vocab_size is 3"},
      {"bad_missing_tensor", "is missing"},
      {"bad_f64_overflow", "is not finite"},
  };
  // Parsed whole (the check each is for comes after the parse): the GPT-level seeds, and valid_dtypes.
  const std::set<std::string> well_formed = {"valid_dtypes", "bad_config", "bad_vocab", "bad_missing_tensor",
                                             "bad_f64_overflow"};
  std::set<std::string> seen;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().stem().string(), bytes = heed::test::read_file(e.path().string());
    INFO(name);
    if (well_formed.count(name)) CHECK_NOTHROW(load(bytes, false));
    if (name == "valid_dtypes") CHECK_THROWS_WITH(load(bytes, true), Catch::Contains("metadata has no \"config\""));
    else if (name.rfind("valid_gpt", 0) == 0) CHECK_NOTHROW(load(bytes, true));
    else {
      REQUIRE(refusals.count(name));
      CHECK_THROWS_WITH(load(bytes, true), Catch::Contains("seed: ") && Catch::Contains(refusals.at(name)));
    }
    seen.insert(name);
  }
  CHECK(seen.size() == refusals.size() + 5);  // and the five valid seeds
}
