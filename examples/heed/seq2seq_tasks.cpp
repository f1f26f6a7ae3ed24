#include "seq2seq_tasks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "core/check.h"
#include "stop.h"

namespace heed::cli {

const std::vector<std::string>& seq2seq_task_names() {
  static const std::vector<std::string> names{"copy", "reverse", "dates"};
  return names;
}

void check_task(const std::string& task) {
  const auto& n = seq2seq_task_names();
  HEED_CHECK(std::find(n.begin(), n.end(), task) != n.end(), "--task: unknown task '", task,
             "' (choose copy, reverse or dates)");
}

int days_in_month(int y, int m) {
  static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : days[m - 1];
}

int weekday(int y, int m, int d) {
  // days since 1970-01-01 (a Thursday), by Howard Hinnant's days_from_civil
  y -= m <= 2;
  const int era = (y >= 0 ? y : y - 399) / 400;
  const int yoe = y - era * 400;
  const int doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const long days = long(era) * 146097 + doe - 719468;
  return static_cast<int>(((days % 7) + 7 + 3) % 7);  // 1970-01-01 was a Thursday (3)
}

static const char* kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                                "July",    "August",   "September", "October", "November", "December"};
static const char* kDays[] = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};

static std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

static std::string ordinal(int d) {
  const char* suffix = (d % 100 >= 11 && d % 100 <= 13) ? "th"
                       : d % 10 == 1                    ? "st"
                       : d % 10 == 2                    ? "nd"
                       : d % 10 == 3                    ? "rd"
                                                        : "th";
  return std::to_string(d) + suffix;
}

int dates_format_count() { return 14; }

std::string format_date(int y, int m, int d, int f) {
  char buf[96];
  const std::string month = kMonths[m - 1], mon = month.substr(0, 3);
  const std::string day = kDays[weekday(y, m, d)], dy = day.substr(0, 3);
  switch (f) {
    case 0: std::snprintf(buf, sizeof buf, "%d %s %d", d, month.c_str(), y); break;            // 22 November 2026
    case 1: std::snprintf(buf, sizeof buf, "%s %d, %d", mon.c_str(), d, y); break;             // Nov 22, 2026
    case 2: std::snprintf(buf, sizeof buf, "%s %02d/%02d/%02d", lower(day).c_str(), d, m, y % 100); break;  // sunday 22/11/26
    case 3: std::snprintf(buf, sizeof buf, "%02d/%02d/%d", d, m, y); break;                    // 22/11/2026
    case 4: std::snprintf(buf, sizeof buf, "%s %d, %d", month.c_str(), d, y); break;           // November 22, 2026
    case 5: std::snprintf(buf, sizeof buf, "%d %s %d", d, mon.c_str(), y); break;              // 22 Nov 2026
    case 6: std::snprintf(buf, sizeof buf, "%s, %s %d, %d", day.c_str(), month.c_str(), d, y); break;  // Sunday, November 22, 2026
    case 7: std::snprintf(buf, sizeof buf, "%d.%d.%d", d, m, y); break;                        // 22.11.2026
    case 8: std::snprintf(buf, sizeof buf, "%02d-%s-%d", d, lower(mon).c_str(), y); break;     // 22-nov-2026
    case 9: std::snprintf(buf, sizeof buf, "%s %d %s %02d", lower(dy).c_str(), d, lower(mon).c_str(), y % 100); break;  // sun 22 nov 26
    case 10: std::snprintf(buf, sizeof buf, "the %s of %s %d", ordinal(d).c_str(), month.c_str(), y); break;  // the 22nd of November 2026
    case 11: std::snprintf(buf, sizeof buf, "%s %s %d", month.c_str(), ordinal(d).c_str(), y); break;  // November 22nd 2026
    case 12: std::snprintf(buf, sizeof buf, "%s %d %s %d", dy.c_str(), d, mon.c_str(), y); break;  // Sun 22 Nov 2026
    default: std::snprintf(buf, sizeof buf, "%d%02d%02d", y, m, d); break;                    // 20261122
  }
  return buf;
}

Example make_example(const std::string& task, Generator& gen) {
  Example e;
  if (task == "copy") {
    const int64_t n = 1 + gen.randint(10);
    for (int64_t i = 0; i < n; ++i) e.source += static_cast<char>('0' + gen.randint(10));
    e.target = e.source;
  } else if (task == "reverse") {
    const int64_t n = 1 + gen.randint(20);
    for (int64_t i = 0; i < n; ++i) e.source += static_cast<char>('a' + gen.randint(26));
    e.target.assign(e.source.rbegin(), e.source.rend());
  } else if (task == "dates") {
    const int y = 1970 + static_cast<int>(gen.randint(100));
    const int m = 1 + static_cast<int>(gen.randint(12));
    const int d = 1 + static_cast<int>(gen.randint(days_in_month(y, m)));
    e.source = format_date(y, m, d, static_cast<int>(gen.randint(dates_format_count())));
    char iso[40];
    std::snprintf(iso, sizeof iso, "%04d-%02d-%02d", y, m, d);
    e.target = iso;
  } else {
    check_task(task);
  }
  return e;
}

int32_t Seq2SeqVocab::id(char c) {
  HEED_CHECK(c >= 32 && c <= 126, "seq2seq: character code ", int(c), " outside printable ASCII");
  return 3 + (c - 32);
}

char Seq2SeqVocab::chr(int32_t id) { return id >= 3 && id < size ? static_cast<char>(id - 3 + 32) : '?'; }

double source_count(const std::string& task, size_t length) {
  check_task(task);
  if (task == "copy") return length >= 1 && length <= 10 ? std::pow(10.0, double(length)) : 0.0;
  if (task == "reverse") return length >= 1 && length <= 20 ? std::pow(26.0, double(length)) : 0.0;
  return INFINITY;  // dates: thousands of sources of every length
}

// Dates: every day of 1970-2069 in each of the formats, all distinct strings.
static constexpr double kDateSources = 36525.0 * 14;

double total_source_count(const std::string& task) {
  check_task(task);
  if (task == "dates") return kDateSources;
  double n = 0;
  for (size_t len = 1; len <= 20; ++len) n += source_count(task, len);
  return n;
}

double max_held_out(const std::string& task) {
  check_task(task);
  if (task == "dates") return std::floor(kMaxHeldOutShare * kDateSources);
  double n = 0;
  for (size_t len = 1; len <= 20; ++len) n += std::floor(kMaxHeldOutShare * source_count(task, len));
  return n;
}

Seq2SeqData::Seq2SeqData(const std::string& t, int64_t n_test, uint64_t seed) : task(t), gen(seed) {
  check_task(task);
  HEED_CHECK(n_test >= 0 && double(n_test) <= max_held_out(task), "seq2seq: ", n_test,
             " held-out examples are more than the ", task, " task can hold out (", max_held_out(task), ")");
  Generator test_gen(seed ^ 0x7e57'da7aULL);
  std::map<size_t, int64_t> per_length;
  int64_t attempts = 0;
  while (static_cast<int64_t>(test.size()) < n_test) {
    if ((attempts & 4095) == 0) check_stop();
    HEED_CHECK(++attempts < n_test * 1000, "seq2seq: cannot draw ", n_test, " distinct test examples");
    Example e = make_example(task, test_gen);
    // Held-out examples take at most half the sources of any length, so that training still
    // sees every length (all ten 1-digit copy sources held out would leave none to learn from).
    const size_t len = e.source.size();
    if (double(per_length[len] + 1) > kMaxHeldOutShare * source_count(task, len)) continue;
    if (test_sources.insert(e.source).second) {
      ++per_length[len];
      test.push_back(std::move(e));
    }
  }
}

Example Seq2SeqData::train_example() {
  while (true) {
    Example e = make_example(task, gen);
    if (!test_sources.count(e.source)) return e;
  }
}

}  // namespace heed::cli
