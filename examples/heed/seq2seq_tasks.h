// Character-level sequence-to-sequence tasks generated on the fly, for `heed seq2seq`:
//   copy     random digit strings of length 1-10, target = source (The Annotated Transformer's
//            first example, with variable lengths so padding masks matter);
//   reverse  1-20 random lowercase letters, target = the string reversed;
//   dates    a date between 1970-01-01 and 2069-12-31 written in one of 14 human formats
//            ("22 November 2026", "Nov 22, 2026", "sunday 22/11/26", ...), target ISO "2026-11-22".
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/random.h"

namespace heed::cli {

struct Example {
  std::string source, target;
};

/// The task names: "copy", "reverse", "dates".
const std::vector<std::string>& seq2seq_task_names();
/// Throws UsageError-style heed::Error for an unknown task.
void check_task(const std::string& task);

/// One random example of `task`.
Example make_example(const std::string& task, Generator& gen);

/// The date formats of the dates task (for tests): writes day/month/year in format `f`.
int dates_format_count();
std::string format_date(int year, int month, int day, int f);
/// Day of week, 0 = Monday .. 6 = Sunday (proleptic Gregorian).
int weekday(int year, int month, int day);
int days_in_month(int year, int month);

/// A token vocabulary shared by source and target: 0 = padding, 1 = begin, 2 = end, then the
/// printable ASCII characters 32..126.
struct Seq2SeqVocab {
  static constexpr int32_t pad = 0, bos = 1, eos = 2;
  static constexpr int32_t size = 3 + 95;
  static int32_t id(char c);         ///< throws for a character outside printable ASCII
  static char chr(int32_t id);       ///< '?' for special ids
};

/// How many distinct sources of `length` characters the task can produce (INFINITY: too many to
/// matter, as for dates).
double source_count(const std::string& task, size_t length);

/// The held-out set takes at most this share of the sources of any one length (and of all).
inline constexpr double kMaxHeldOutShare = 0.5;

/// How many distinct sources the task has in all (copy: 1.1e10; reverse: about 2.1e28; dates:
/// 36525 days x 14 formats).
double total_source_count(const std::string& task);
/// The most held-out examples `task` can give: kMaxHeldOutShare of its sources, length by length.
double max_held_out(const std::string& task);

/// A held-out test set of `n` distinct examples (at most kMaxHeldOutShare of the sources of each
/// length), and a training sampler that never returns a source string of the test set. Throws
/// heed::Error if `n` exceeds max_held_out(task); honours a stop signal while drawing.
struct Seq2SeqData {
  Seq2SeqData(const std::string& task, int64_t n_test, uint64_t seed);
  Example train_example();  ///< a fresh random example whose source is not in the test set
  std::string task;
  std::vector<Example> test;
  std::unordered_set<std::string> test_sources;
  Generator gen;
};

}  // namespace heed::cli
