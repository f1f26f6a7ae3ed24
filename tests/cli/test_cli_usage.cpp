// The command line's usage contract: help works, unknown subcommands and flags are usage errors.
#include <catch2/catch.hpp>

#include "support/process.h"

using namespace heed::test;

TEST_CASE("heed --help lists every subcommand and exits 0", "[cli]") {
  ProcessResult r = run_heed({"--help"});
  REQUIRE(r.signal == 0);
  REQUIRE(r.exit_code == 0);
  for (const char* cmd : {"train", "bench", "sample", "eval", "plot", "seq2seq", "attention"})
    CHECK(r.out.find(cmd) != std::string::npos);
}

TEST_CASE("unknown subcommands and flags are usage errors (exit 2, one line)", "[cli]") {
  require_clean_error(run_heed({"frobnicate"}), 2, {"frobnicate"});
  require_clean_error(run_heed({"train", "--no-such-flag"}), 2, {"--no-such-flag"});
  // (plain `heed` prints the help: test_cli_train.cpp) options without a subcommand are an error
  require_clean_error(run_heed({"--memory-limit", "4G"}), 2, {"ubcommand"});
  require_clean_error(run_heed({"train", "--batch-size", "twelve"}), 2, {"--batch-size"});
}
