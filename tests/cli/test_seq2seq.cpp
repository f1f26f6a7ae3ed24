// `heed seq2seq`: the task generators (round trips; every date format parsed back by an independent
// parser, weekdays checked against std::chrono), the held-out set's disjointness from training,
// padding masks in batched encoding and greedy decoding, and a short run that drives the loss down.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/heed.h"
#include "nn/transformer.h"
#include "seq2seq.h"
#include "seq2seq_checkpoint.h"
#include "seq2seq_tasks.h"
#include "support/process.h"

using namespace heed;
using namespace heed::cli;
using namespace heed::test;

namespace {

namespace chr = std::chrono;

struct Ymd {
  int y = 0, m = 0, d = 0;
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// An independent reader of human-written dates: the words are month names, weekday names (full
// or three letters, any case), "the" and "of"; the numbers are day, month, year in that order
// (day and year when the month is a word; one run of 8 digits is yyyymmdd), a day may carry its
// English ordinal suffix, and a two-digit year yy means 19yy from 70 on, else 20yy. A weekday, if
// written, must be the date's. Returns false for anything else.
bool parse_human_date(const std::string& s, Ymd& out, std::string& why, bool* weekday_shown = nullptr) {
  static const char* months[] = {"january", "february", "march",     "april",   "may",      "june",
                                 "july",    "august",   "september", "october", "november", "december"};
  static const char* days[] = {"sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"};
  int month = 0, wday = -1;
  std::vector<std::string> numbers;
  std::vector<std::string> suffixes;  // the letters right after each number ("" if none)
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (std::isdigit(c)) {
      size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      numbers.push_back(s.substr(i, j - i));
      size_t k = j;
      while (k < s.size() && std::isalpha(static_cast<unsigned char>(s[k]))) ++k;
      suffixes.push_back(s.substr(j, k - j));
      i = k;
    } else if (std::isalpha(c)) {
      size_t j = i;
      while (j < s.size() && std::isalpha(static_cast<unsigned char>(s[j]))) ++j;
      const std::string w = lower(s.substr(i, j - i));
      i = j;
      if (w == "the" || w == "of") continue;
      bool known = false;
      for (int m = 0; m < 12; ++m)
        if (w == months[m] || w == std::string(months[m]).substr(0, 3)) {
          if (month) return why = "two month names", false;
          month = m + 1, known = true;
        }
      for (int d = 0; d < 7; ++d)
        if (w == days[d] || w == std::string(days[d]).substr(0, 3)) {
          if (wday >= 0) return why = "two weekday names", false;
          wday = d, known = true;
        }
      if (!known) return why = "unknown word '" + w + "'", false;
    } else if (c == ' ' || c == ',' || c == '/' || c == '.' || c == '-') {
      ++i;
    } else {
      return why = std::string("unexpected character '") + s[i] + "'", false;
    }
  }
  auto year_of = [&](const std::string& n, int& y) {
    if (n.size() == 4) return y = std::stoi(n), true;
    if (n.size() == 2) return y = std::stoi(n) >= 70 ? 1900 + std::stoi(n) : 2000 + std::stoi(n), true;
    return false;
  };
  int y = 0, m = 0, d = 0;
  if (numbers.size() == 1 && numbers[0].size() == 8 && !month) {
    y = std::stoi(numbers[0].substr(0, 4)), m = std::stoi(numbers[0].substr(4, 2)), d = std::stoi(numbers[0].substr(6, 2));
  } else if (month && numbers.size() == 2) {
    m = month, d = std::stoi(numbers[0]);
    if (numbers[0].size() > 2 || !year_of(numbers[1], y)) return why = "bad day or year", false;
  } else if (!month && numbers.size() == 3) {
    d = std::stoi(numbers[0]), m = std::stoi(numbers[1]);
    if (numbers[0].size() > 2 || numbers[1].size() > 2 || !year_of(numbers[2], y)) return why = "bad numbers", false;
  } else {
    return why = "cannot tell day, month and year apart", false;
  }
  for (size_t k = 0; k < suffixes.size(); ++k) {
    if (suffixes[k].empty()) continue;
    const int n = std::stoi(numbers[k]);
    if (n != d || k != 0) return why = "a suffix on a number that is not the day", false;
    const char* want = (n % 100 >= 11 && n % 100 <= 13) ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
    if (suffixes[k] != want) return why = "wrong ordinal suffix '" + suffixes[k] + "'", false;
  }
  const chr::year_month_day ymd{chr::year{y}, chr::month{static_cast<unsigned>(m)}, chr::day{static_cast<unsigned>(d)}};
  if (!ymd.ok()) return why = "no such day", false;
  if (wday >= 0 && chr::weekday{chr::sys_days{ymd}}.c_encoding() != static_cast<unsigned>(wday))
    return why = "wrong weekday", false;
  out = {y, m, d};
  if (weekday_shown) *weekday_shown = wday >= 0;
  return true;
}

std::string iso(int y, int m, int d) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d", y, m, d);
  return buf;
}

}  // namespace

TEST_CASE("the independent date reader rejects wrong weekdays, suffixes and impossible days", "[seq2seq]") {
  Ymd r;
  std::string why;
  REQUIRE(parse_human_date("sunday 22/11/26", r, why));
  CHECK((r.y == 2026 && r.m == 11 && r.d == 22));
  REQUIRE(parse_human_date("Nov 22, 2026", r, why));
  REQUIRE(parse_human_date("the 22nd of November 2026", r, why));
  REQUIRE(parse_human_date("29.2.2024", r, why));
  CHECK_FALSE(parse_human_date("monday 22/11/26", r, why));      // 2026-11-22 is a Sunday
  CHECK_FALSE(parse_human_date("the 22th of November 2026", r, why));
  CHECK_FALSE(parse_human_date("29.2.2023", r, why));            // not a leap year
  CHECK_FALSE(parse_human_date("31 April 2026", r, why));
  CHECK_FALSE(parse_human_date("22 Novembre 2026", r, why));
}

TEST_CASE("weekday() and days_in_month() agree with std::chrono, leap years included", "[seq2seq]") {
  CHECK(days_in_month(2024, 2) == 29);
  CHECK(days_in_month(2023, 2) == 28);
  CHECK(days_in_month(2000, 2) == 29);  // divisible by 400
  CHECK(days_in_month(2100, 2) == 28);  // divisible by 100 only
  CHECK(days_in_month(1900, 2) == 28);
  for (int y = 1960; y < 2110; ++y)
    for (int m = 1; m <= 12; ++m) {
      const auto last = chr::year_month_day_last{chr::year{y}, chr::month_day_last{chr::month{static_cast<unsigned>(m)}}};
      REQUIRE(days_in_month(y, m) == static_cast<int>(static_cast<unsigned>(last.day())));
      for (int d = 1; d <= days_in_month(y, m); ++d) {
        const chr::year_month_day ymd{chr::year{y}, chr::month{unsigned(m)}, chr::day{unsigned(d)}};
        const unsigned iso_wd = chr::weekday{chr::sys_days{ymd}}.iso_encoding();  // 1 = Monday
        INFO(y << "-" << m << "-" << d);
        REQUIRE(heed::cli::weekday(y, m, d) == static_cast<int>(iso_wd) - 1);  // 0 = Monday
      }
    }
}

TEST_CASE("every date format reads back to the same day, for every day of 1970-2069", "[seq2seq]") {
  REQUIRE(dates_format_count() >= 12);
  std::set<std::string> shapes;
  int formats_with_weekday = 0;
  for (int f = 0; f < dates_format_count(); ++f) {
    int weekday_shown = 0, total_days = 0;
    std::set<std::string> seen;  // a source names one date only
    for (int y = 1970; y <= 2069; ++y)
      for (int m = 1; m <= 12; ++m)
        for (int d = 1; d <= days_in_month(y, m); ++d) {
          const std::string s = format_date(y, m, d, f);
          Ymd r;
          std::string why;
          bool shown = false;
          // plain ifs in this loop of 36525 x formats: Catch's INFO/REQUIRE per day take seconds
          if (!parse_human_date(s, r, why, &shown)) FAIL("format " << f << ": \"" << s << "\" for " << iso(y, m, d) << ": " << why);
          if (r.y != y || r.m != m || r.d != d)
            FAIL("format " << f << ": \"" << s << "\" reads as " << iso(r.y, r.m, r.d) << ", not " << iso(y, m, d));
          if (!seen.insert(s).second) FAIL("format " << f << ": \"" << s << "\" written for two dates");
          weekday_shown += shown;
          ++total_days;
        }
    // a format shows the weekday on every day or on none
    CHECK(total_days == 36525);  // 100 years, 25 of them leap years (2000 too)
    CHECK((weekday_shown == 0 || weekday_shown == total_days));
    formats_with_weekday += weekday_shown > 0;
    // the shape of a format: digits as 9, letters as a
    std::string shape = format_date(2026, 11, 22, f);
    for (char& c : shape) c = std::isdigit(static_cast<unsigned char>(c)) ? '9' : std::isalpha(static_cast<unsigned char>(c)) ? 'a' : c;
    shapes.insert(shape);
  }
  CHECK(formats_with_weekday >= 3);
  CHECK(static_cast<int>(shapes.size()) == dates_format_count());  // the formats really differ
  // The examples in the issue are among them.
  std::set<std::string> nov22;
  for (int f = 0; f < dates_format_count(); ++f) nov22.insert(format_date(2026, 11, 22, f));
  for (const char* want : {"22 November 2026", "Nov 22, 2026", "sunday 22/11/26"}) CHECK(nov22.count(want) == 1);
}

TEST_CASE("dates examples: ISO targets match the source, in range, every format drawn", "[seq2seq]") {
  Generator gen(5);
  std::set<std::string> shapes;
  int leap_days = 0;
  for (int i = 0; i < 20000; ++i) {
    const Example e = make_example("dates", gen);
    Ymd r;
    std::string why;
    if (!parse_human_date(e.source, r, why)) FAIL("\"" << e.source << "\": " << why);
    if (e.target != iso(r.y, r.m, r.d)) FAIL("\"" << e.source << "\" -> \"" << e.target << "\"");
    if (r.y < 1970 || r.y > 2069) FAIL("\"" << e.source << "\": year out of range");
    leap_days += r.m == 2 && r.d == 29;
    std::string shape = e.source;
    for (char& c : shape) c = std::isdigit(static_cast<unsigned char>(c)) ? '9' : std::isalpha(static_cast<unsigned char>(c)) ? 'a' : c;
    shapes.insert(shape);
  }
  CHECK(leap_days > 0);
  // every format shows up (a format gives several shapes: day and month widths, name lengths)
  for (int f = 0; f < dates_format_count(); ++f) {
    std::string shape = format_date(2026, 11, 22, f);
    for (char& c : shape) c = std::isdigit(static_cast<unsigned char>(c)) ? '9' : std::isalpha(static_cast<unsigned char>(c)) ? 'a' : c;
    INFO("format " << f);
    CHECK(shapes.count(shape) == 1);
  }
}

TEST_CASE("copy and reverse examples round-trip, with every length drawn", "[seq2seq]") {
  Generator gen(6);
  std::set<size_t> copy_lengths, reverse_lengths;
  for (int i = 0; i < 5000; ++i) {
    const Example c = make_example("copy", gen);
    REQUIRE(c.target == c.source);
    REQUIRE((c.source.size() >= 1 && c.source.size() <= 10));
    REQUIRE(std::all_of(c.source.begin(), c.source.end(), [](char ch) { return ch >= '0' && ch <= '9'; }));
    copy_lengths.insert(c.source.size());
    const Example r = make_example("reverse", gen);
    REQUIRE(std::string(r.target.rbegin(), r.target.rend()) == r.source);
    REQUIRE((r.source.size() >= 1 && r.source.size() <= 20));
    REQUIRE(std::all_of(r.source.begin(), r.source.end(), [](char ch) { return ch >= 'a' && ch <= 'z'; }));
    reverse_lengths.insert(r.source.size());
  }
  CHECK(copy_lengths.size() == 10);
  CHECK(reverse_lengths.size() == 20);
  for (const auto& t : seq2seq_task_names())
    for (int i = 0; i < 200; ++i) {
      const Example e = make_example(t, gen);
      REQUIRE(static_cast<int64_t>(e.source.size()) <= kSeq2SeqMaxLen);
      REQUIRE(static_cast<int64_t>(e.target.size()) + 1 <= kSeq2SeqMaxLen);
    }
  CHECK_THROWS_AS(make_example("sort", gen), Error);
}

TEST_CASE("held-out examples are distinct, never drawn for training, and leave every length to train on", "[seq2seq]") {
  for (const auto& task : seq2seq_task_names()) {
    INFO(task);
    Seq2SeqData data(task, 1000, 7);
    REQUIRE(data.test.size() == 1000);
    std::set<std::string> held;  // built here, not taken from data.test_sources
    std::map<size_t, int64_t> held_per_length;
    for (const auto& e : data.test) {
      REQUIRE(held.insert(e.source).second);
      ++held_per_length[e.source.size()];
    }
    for (const auto& [len, n] : held_per_length) {
      INFO("length " << len);
      REQUIRE(double(n) <= 0.5 * source_count(task, len));
    }
    std::map<size_t, int64_t> train_per_length;
    for (int i = 0; i < 20000; ++i) {
      const Example e = data.train_example();
      INFO("training example \"" << e.source << "\"");
      REQUIRE(held.count(e.source) == 0);
      ++train_per_length[e.source.size()];
    }
    for (const auto& [len, n] : held_per_length) {
      INFO("length " << len << " has held-out examples but none to train on");
      CHECK(train_per_length[len] > 0);
    }
    // the same seed gives the same held-out set; another seed another one
    Seq2SeqData again(task, 1000, 7), other(task, 1000, 8);
    CHECK(again.test.front().source == data.test.front().source);
    CHECK(again.test.back().source == data.test.back().source);
    int same = 0;
    for (const auto& e : other.test) same += held.count(e.source) > 0;
    CHECK(same < 500);
  }
  // copy has ten 1-digit sources: at most five are held out, the others are trained on
  Seq2SeqData copy("copy", 1000, 1);
  int64_t one_digit = 0;
  for (const auto& e : copy.test) one_digit += e.source.size() == 1;
  CHECK(one_digit <= 5);
}

TEST_CASE("make_batch pads sources and targets and marks the padding", "[seq2seq]") {
  const Seq2SeqBatch b = make_batch({{"abc", "cba"}, {"x", "x"}});
  REQUIRE((b.B == 2 && b.Ts == 3 && b.Tt == 4));
  const int32_t a = Seq2SeqVocab::id('a'), x = Seq2SeqVocab::id('x'), P = Seq2SeqVocab::pad;
  CHECK(b.src == std::vector<int32_t>{a, a + 1, a + 2, x, P, P});
  CHECK(b.tgt_in == std::vector<int32_t>{Seq2SeqVocab::bos, a + 2, a + 1, a, Seq2SeqVocab::bos, x, P, P});
  CHECK(b.tgt_out == std::vector<int32_t>{a + 2, a + 1, a, Seq2SeqVocab::eos, x, Seq2SeqVocab::eos, P, P});
  CHECK(b.src_mask.pad == std::vector<uint8_t>{0, 0, 0, 0, 1, 1});
  CHECK(b.tgt_mask.pad == std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 1, 1});
  CHECK(Seq2SeqVocab::chr(Seq2SeqVocab::id('~')) == '~');
  CHECK_THROWS_AS(Seq2SeqVocab::id('\n'), Error);
}

TEST_CASE("padding masks: a padded batch gives each example the logits it gets alone", "[seq2seq]") {
  Seq2SeqOptions o = defaults(seq2seq_option_table());
  o.d_model = 32, o.n_head = 4, o.n_layer = 2, o.seed = 3;
  nn::EncoderDecoder model(seq2seq_model_options(o));
  model.eval();
  NoGradGuard no_grad;
  const std::vector<Example> ex = {{"Sunday, November 22, 2026", "2026-11-22"}, {"22.11.26", "2026-11-22"},
                                   {"x", "a longer target than source"}, {"abcdefghij", "j"}};
  const Seq2SeqBatch b = make_batch(ex);
  const Tensor batched = model.forward(b.src, b.B, b.Ts, b.tgt_in, b.Tt, &b.src_mask, &b.tgt_mask);
  const Tensor unmasked = model.forward(b.src, b.B, b.Ts, b.tgt_in, b.Tt);  // padding attended to
  const std::vector<float> vb = batched.to_vector<float>(), vu = unmasked.to_vector<float>();
  const int64_t V = Seq2SeqVocab::size;
  double max_diff = 0, max_unmasked_diff = 0;
  for (int64_t i = 0; i < b.B; ++i) {
    const Seq2SeqBatch one = make_batch({ex[i]});
    REQUIRE((one.Ts == static_cast<int64_t>(ex[i].source.size()) && one.Tt == static_cast<int64_t>(ex[i].target.size()) + 1));
    const std::vector<float> v1 = model.forward(one.src, 1, one.Ts, one.tgt_in, one.Tt, &one.src_mask, &one.tgt_mask)
                                      .to_vector<float>();
    for (int64_t t = 0; t < one.Tt; ++t)
      for (int64_t k = 0; k < V; ++k) {
        const float alone = v1[t * V + k];
        max_diff = std::max<double>(max_diff, std::abs(vb[(i * b.Tt + t) * V + k] - alone));
        max_unmasked_diff = std::max<double>(max_unmasked_diff, std::abs(vu[(i * b.Tt + t) * V + k] - alone));
      }
  }
  CHECK(max_diff < 1e-4);
  CHECK(max_unmasked_diff > 1e-2);  // without the masks the padding does change the outputs
  // greedy decoding in a padded batch = decoding each source alone
  std::vector<std::string> sources;
  for (const auto& e : ex) sources.push_back(e.source);
  const auto together = greedy_decode(model, sources, 12);
  for (size_t i = 0; i < sources.size(); ++i) CHECK(together[i] == greedy_decode(model, {sources[i]}, 12)[0]);
}

TEST_CASE("a seq2seq checkpoint round-trips, and bad metadata is an error naming the file", "[seq2seq]") {
  ScratchDir dir("s2s-ckpt");
  Seq2SeqOptions o = defaults(seq2seq_option_table());
  o.task = "reverse", o.d_model = 16, o.n_head = 2, o.n_layer = 1, o.seed = 9;
  nn::EncoderDecoder model(seq2seq_model_options(o));
  model.eval();
  save_seq2seq(dir / "m.safetensors", model, o);
  Seq2SeqOptions back = defaults(seq2seq_option_table());
  auto loaded = load_seq2seq(nn::load_safetensors(dir / "m.safetensors"), "m.safetensors", back);
  CHECK((back.task == "reverse" && back.d_model == 16 && back.n_head == 2 && back.n_layer == 1));
  CHECK(greedy_decode(*loaded, {"hello", "ab"}, 10) == greedy_decode(model, {"hello", "ab"}, 10));
  nn::save_safetensors(dir / "bad.safetensors", {{"w", Tensor::zeros({2})}}, {{"seq2seq", "{\"task\": 3}"}});
  try {
    load_seq2seq(nn::load_safetensors(dir / "bad.safetensors"), "bad.safetensors", back);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("bad.safetensors") != std::string::npos);
  }
}

TEST_CASE("heed seq2seq: a short run drives the loss down and ends with one JSON line", "[seq2seq][cli]") {
  ScratchDir dir("s2s-run");
  ProcessResult r = run_heed({"seq2seq", "--task", "copy", "--max-iters", "200", "--d-model", "32", "--n-head", "2",
                              "--n-layer", "1", "--batch-size", "32", "--lr", "3e-3", "--examples", "100",
                              "--log-interval", "20", "--seed", "4", "--threads", "1", "--out", dir.path()});
  require_ok(r);
  const auto summary = nlohmann::json::parse(last_line(r.out));
  REQUIRE(summary.is_object());
  CHECK(summary.size() == 3);
  CHECK(summary.at("task") == "copy");
  CHECK(summary.at("examples") == 100);
  const double em = summary.at("exact_match").get<double>();
  CHECK((em > 0.1 && em <= 1));  // 0.55 when written
  // log.jsonl: one entry per 20 iterations; the loss falls well below its start
  std::istringstream log(read_file(dir / "log.jsonl"));
  std::vector<double> train, val;
  for (std::string line; std::getline(log, line);) {
    const auto j = nlohmann::json::parse(line);
    train.push_back(j.at("train_loss").get<double>());
    val.push_back(j.at("val_loss").get<double>());
  }
  REQUIRE(train.size() == 10);
  INFO("train " << train.front() << " -> " << train.back() << ", val " << val.front() << " -> " << val.back());
  CHECK(train.back() < 0.5 * train.front());  // 4.0 -> 0.45 when written
  CHECK(val.back() < 0.5 * val.front());      // 3.0 -> 0.50
  CHECK(val.back() < 1.5);                    // ln(98) = 4.6 is chance
  CHECK(std::filesystem::file_size(dir / "model.safetensors") > 0);
  CHECK(std::filesystem::exists(dir / "loss.svg"));
}

TEST_CASE("heed seq2seq usage errors", "[seq2seq][cli]") {
  require_clean_error(run_heed({"seq2seq", "--task", "sort"}), 2, {"sort"});
  require_clean_error(run_heed({"seq2seq"}), 2, {"--task is required", "--resume"});
  require_clean_error(run_heed({"seq2seq", "--task", "copy", "--max-iters", "0"}), 2, {"--max-iters"});
  require_clean_error(run_heed({"seq2seq", "--task", "copy", "--d-model", "30", "--n-head", "4"}), 2, {"--n-embd 30"});
  require_clean_error(run_heed({"seq2seq", "--task", "copy", "--lr", "0"}), 2, {"--lr"});
}
