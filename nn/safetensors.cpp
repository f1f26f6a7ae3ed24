// safetensors reading and writing. The reader validates everything before it touches the data
// section (see parse_safetensors in the header); the writer goes through a temporary file so a
// crash or a full disk never leaves a truncated checkpoint where a good one was.
#include "nn/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/check.h"

namespace heed::nn {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; heed reads and writes it with memcpy");

using nlohmann::json;

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the limit of the reference implementation
constexpr int kMaxJsonDepth = 64;                   // a valid header nests 3 deep

// ---------------------------------------------------------------------------------------------
// reading

enum class FileDType { f32, f64, f16, bf16, i32, i64, boolean };

struct Entry {
  std::string name;
  FileDType dtype;
  Shape shape;
  int64_t numel;
  uint64_t begin, end;  // relative to the data section
};

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in float
    const float f = std::ldexp(static_cast<float>(man), -24);
    return sign ? -f : f;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));  // inf, NaN
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));        // rebias 15 -> 127
}

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// A JSON integer in [0, 2^64), or false (negative, fractional, too large, not a number).
bool as_u64(const json& v, uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

Entry parse_entry(const std::string& what, const std::string& name, const json& info, uint64_t data_size) {
  auto bad = [&](const auto&... parts) { detail::fail(what, ": tensor '", name, "': ", parts...); };
  if (!info.is_object()) bad("entry is not a JSON object but ", info.type_name());
  Entry e{name, FileDType::f32, {}, 1, 0, 0};

  auto dt = info.find("dtype");
  if (dt == info.end()) bad("missing \"dtype\"");
  if (!dt->is_string()) bad("\"dtype\" is not a string");
  const std::string& dts = dt->get_ref<const std::string&>();
  size_t esize = 0;
  if (dts == "F32") e.dtype = FileDType::f32, esize = 4;
  else if (dts == "F64") e.dtype = FileDType::f64, esize = 8;
  else if (dts == "F16") e.dtype = FileDType::f16, esize = 2;
  else if (dts == "BF16") e.dtype = FileDType::bf16, esize = 2;
  else if (dts == "I32") e.dtype = FileDType::i32, esize = 4;
  else if (dts == "I64") e.dtype = FileDType::i64, esize = 8;
  else if (dts == "BOOL") e.dtype = FileDType::boolean, esize = 1;
  else bad("unsupported dtype '", dts, "' (heed reads F32, F64, F16, BF16, I32, I64 and BOOL)");

  auto sh = info.find("shape");
  if (sh == info.end()) bad("missing \"shape\"");
  if (!sh->is_array()) bad("\"shape\" is not an array");
  // The product of the non-zero dims must fit too: shape and stride arithmetic elsewhere multiplies
  // dims without knowing a later one is 0 ([0, 2^62, 2^62] has no elements but 2^124 as a stride).
  int64_t nonzero = 1;
  bool empty = false;
  for (size_t d = 0; d < sh->size(); ++d) {
    uint64_t n;
    const json& v = (*sh)[d];
    if (!as_u64(v, n)) bad("shape entry ", d, " (", v.dump(), ") is not a non-negative integer");
    if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      bad("shape entry ", d, " (", n, ") overflows int64");
    e.shape.push_back(static_cast<int64_t>(n));
    if (n == 0) empty = true;
    else if (__builtin_mul_overflow(nonzero, static_cast<int64_t>(n), &nonzero))
      bad("shape ", sh->dump(), ": the element count overflows int64");
  }
  e.numel = empty ? 0 : nonzero;
  int64_t nbytes;
  if (__builtin_mul_overflow(e.numel, static_cast<int64_t>(esize), &nbytes))
    bad("shape ", sh->dump(), ": the byte count overflows int64");

  auto off = info.find("data_offsets");
  if (off == info.end()) bad("missing \"data_offsets\"");
  if (!off->is_array() || off->size() != 2 || !as_u64((*off)[0], e.begin) || !as_u64((*off)[1], e.end))
    bad("\"data_offsets\" ", off->dump(), " is not two non-negative integers");
  if (e.end < e.begin) bad("data_offsets ", off->dump(), ": end is before begin");
  if (e.end > data_size)
    bad("data_offsets ", off->dump(), " lie outside the data section (", data_size, " bytes)");
  if (e.end - e.begin != static_cast<uint64_t>(nbytes))
    bad("data_offsets ", off->dump(), " span ", e.end - e.begin, " bytes but shape ", sh->dump(), " of ", dts,
        " needs ", nbytes);
  return e;
}

Tensor read_tensor(const Entry& e, const uint8_t* src) {
  switch (e.dtype) {
    case FileDType::f32:
    case FileDType::f64:
    case FileDType::i32:
    case FileDType::i64: {
      const DType d = e.dtype == FileDType::f32   ? DType::f32
                      : e.dtype == FileDType::f64 ? DType::f64
                      : e.dtype == FileDType::i32 ? DType::i32
                                                  : DType::i64;
      Tensor t = Tensor::empty(e.shape, d);
      if (e.numel) std::memcpy(t.storage()->data(), src, e.end - e.begin);  // src may be unaligned
      return t;
    }
    case FileDType::boolean: {
      // One byte each; any non-zero byte is true (a bool object holding another byte is undefined).
      Tensor t = Tensor::empty(e.shape, DType::boolean);
      bool* dst = t.data<bool>();
      for (int64_t i = 0; i < e.numel; ++i) dst[i] = src[i] != 0;
      return t;
    }
    case FileDType::f16:
    case FileDType::bf16: {
      Tensor t = Tensor::empty(e.shape, DType::f32);
      float* dst = t.data<float>();
      const bool half = e.dtype == FileDType::f16;
      for (int64_t i = 0; i < e.numel; ++i) {
        const uint16_t bits = static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8));
        dst[i] = half ? half_to_float(bits) : bf16_to_float(bits);
      }
      return t;
    }
  }
  return Tensor();  // unreachable
}

// ---------------------------------------------------------------------------------------------
// writing

// safetensors' (and PyTorch's safetensors.torch) name of each of heed's dtypes.
const char* file_dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::boolean: return "BOOL";
  }
  return "?";  // unreachable
}

std::string errno_text(int err) { return std::strerror(err); }

// Buffers small pieces (header, small tensors) and writes large contiguous ones straight through.
class FdWriter {
 public:
  explicit FdWriter(int fd) : fd_(fd) { buf_.reserve(kCap); }
  /// Returns 0 or an errno value.
  int put(const void* p, size_t n) {
    if (buf_.size() + n > kCap) {
      if (int err = flush()) return err;
      if (n >= kCap) return write_all(p, n);
    }
    const auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
    return 0;
  }
  int flush() {
    int err = write_all(buf_.data(), buf_.size());
    buf_.clear();
    return err;
  }

 private:
  static constexpr size_t kCap = 1 << 20;
  int write_all(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    while (n > 0) {
      const ssize_t w = ::write(fd_, b, std::min<size_t>(n, size_t{1} << 30));
      if (w < 0) {
        if (errno == EINTR) continue;
        return errno;
      }
      b += w;
      n -= static_cast<size_t>(w);
    }
    return 0;
  }
  int fd_;
  std::vector<uint8_t> buf_;
};

}  // namespace

SafetensorsFile parse_safetensors(const uint8_t* data, size_t size, const std::string& what) {
  HEED_CHECK(size >= 8, what, ": file is ", size, " bytes, too short for the 8-byte header length");
  uint64_t n = 0;
  std::memcpy(&n, data, 8);
  HEED_CHECK(n <= kMaxHeaderBytes, what, ": header length ", n, " is absurdly large (over ", kMaxHeaderBytes,
             " bytes); not a safetensors file?");
  HEED_CHECK(n <= size - 8, what, ": header length ", n, " runs past the end of the file (", size, " bytes)");
  const uint64_t data_size = size - 8 - n;
  const uint8_t* section = data + 8 + n;

  // The callback rejects deep nesting and repeated tensor names while parsing, before a hostile
  // header can build a huge tree (the last duplicate would silently win otherwise).
  std::set<std::string> top_keys;
  auto guard = [&](int depth, json::parse_event_t ev, json& parsed) {
    using E = json::parse_event_t;
    if ((ev == E::object_start || ev == E::array_start) && depth >= kMaxJsonDepth)
      detail::fail(what, ": header nests deeper than ", kMaxJsonDepth, " levels");
    if (ev == E::array_start && depth == 0) detail::fail(what, ": header is not a JSON object but an array");
    if (ev == E::key && depth == 1 && !top_keys.insert(parsed.get<std::string>()).second)
      detail::fail(what, ": header lists '", parsed.get<std::string>(), "' twice");
    return true;
  };
  json header;
  try {
    const char* text = reinterpret_cast<const char*>(data + 8);
    header = json::parse(text, text + n, guard);
  } catch (const json::exception& e) {
    detail::fail(what, ": header is not valid JSON (", e.what(), ")");
  }
  HEED_CHECK(header.is_object(), what, ": header is not a JSON object but ", header.type_name());

  SafetensorsFile out;
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      HEED_CHECK(it->is_object(), what, ": \"__metadata__\" is not a JSON object but ", it->type_name());
      for (auto m = it->begin(); m != it->end(); ++m) {
        HEED_CHECK(m->is_string(), what, ": \"__metadata__\" entry '", m.key(), "' is not a string but ",
                   m->type_name());
        out.metadata.emplace(m.key(), m->get<std::string>());
      }
      continue;
    }
    entries.push_back(parse_entry(what, it.key(), it.value(), data_size));
  }

  // File order; then no two tensors may share a byte (empty tensors occupy none).
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end != b.end ? a.end < b.end : a.name < b.name;
  });
  const Entry* reach = nullptr;  // the tensor ending furthest so far
  for (const Entry& e : entries) {
    if (e.begin == e.end) continue;
    if (reach && e.begin < reach->end)
      detail::fail(what, ": tensors '", reach->name, "' (bytes ", reach->begin, "..", reach->end, ") and '", e.name,
                   "' (bytes ", e.begin, "..", e.end, ") overlap");
    if (!reach || e.end > reach->end) reach = &e;
  }

  out.tensors.reserve(entries.size());
  for (const Entry& e : entries) out.tensors.emplace_back(e.name, read_tensor(e, section + e.begin));
  return out;
}

SafetensorsFile load_safetensors(const std::string& path) {
  // O_NONBLOCK: a FIFO with no writer would block open() itself, before fstat could refuse it
  // (it changes nothing for a regular file).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  HEED_CHECK(fd >= 0, path, ": cannot open: ", errno_text(errno));
  std::vector<uint8_t> bytes;
  int err = 0;
  struct stat st {};
  if (::fstat(fd, &st) != 0) err = errno;
  else if (!S_ISREG(st.st_mode)) err = EINVAL;
  // The header's length first: a file that is not safetensors (whose first 8 bytes give a header
  // past its end) is refused before the rest of it is read.
  uint8_t len_bytes[8] = {};
  uint64_t header_len = 0;
  const bool have_len = !err && st.st_size >= 8 && ::pread(fd, len_bytes, 8, 0) == 8;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | len_bytes[i];  // little-endian, as the format
  if (have_len && header_len > static_cast<uint64_t>(st.st_size) - 8) {
    ::close(fd);
    detail::fail(path, ": not a safetensors file: its first 8 bytes give a header of ", header_len,
                 " bytes, past the end of the file (", st.st_size, " bytes)");
  }
  if (!err) {
    try {
      bytes.resize(static_cast<size_t>(st.st_size));
    } catch (const std::bad_alloc&) {
      ::close(fd);
      detail::fail(path, ": cannot read its ", st.st_size, " bytes into memory");
    }
    size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t r = ::read(fd, bytes.data() + got, bytes.size() - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        err = r < 0 ? errno : EIO;  // 0: the file shrank while being read
        break;
      }
      got += static_cast<size_t>(r);
    }
  }
  ::close(fd);
  HEED_CHECK(!err, path, ": cannot read", err == EINVAL ? " (not a regular file)" : "", ": ", errno_text(err));
  return parse_safetensors(bytes.data(), bytes.size(), path);
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // ---- the header ----
  // Data in the order given, except that larger elements come first (float64 and int64, then
  // float32 and int32, then bool): every tensor then starts at a multiple of its element size (the
  // data section itself starts at a multiple of 8), which zero-copy readers need. This is what the
  // safetensors package does too.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) {
    const Tensor &a = tensors[i].second, &b = tensors[j].second;
    return a.defined() && b.defined() && dtype_size(a.dtype()) > dtype_size(b.dtype());
  });
  json header = json::object();
  uint64_t offset = 0;
  for (size_t i : order) {
    const auto& [name, t] = tensors[i];
    HEED_CHECK(t.defined(), "save_safetensors: ", path, ": tensor '", name, "' is undefined");

    HEED_CHECK(name != "__metadata__", "save_safetensors: ", path, ": \"__metadata__\" cannot name a tensor");
    HEED_CHECK(!header.contains(name), "save_safetensors: ", path, ": tensor name '", name, "' appears twice");
    const uint64_t nbytes = static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
    header[name] = {{"dtype", file_dtype_name(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {  // invalid UTF-8 in a name or a metadata value
    detail::fail("save_safetensors: ", path, ": cannot encode the header (", e.what(), ")");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_len = text.size();

  // ---- the temporary file, then rename over `path` ----
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  auto fail_with = [&](const char* step, int err) {
    detail::fail("save_safetensors: cannot write ", path, " (", step, " ", tmp, "): ", errno_text(err));
  };
  // O_EXCL creates a new file and never follows a symlink planted under the temporary name; a
  // leftover of an earlier process with this pid (or a planted link) is unlinked, never written.
  const int create_flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(tmp.c_str(), create_flags, 0644);
  if (fd < 0 && errno == EEXIST && ::unlink(tmp.c_str()) == 0) fd = ::open(tmp.c_str(), create_flags, 0644);
  if (fd < 0) fail_with("creating", errno);
  int err = 0;
  const char* step = "writing";
  try {
    FdWriter w(fd);
    err = w.put(&header_len, 8);
    if (!err) err = w.put(text.data(), text.size());
    for (size_t k = 0; k < order.size() && !err; ++k) {
      const Tensor& t = tensors[order[k]].second;
      if (t.numel() == 0) continue;
      visit_any_dtype(t.dtype(), [&]<class T>() {
        const Tensor rows = t.is_contiguous() ? t : t.contiguous();  // row-major copy of a strided view
        err = w.put(rows.data<T>(), static_cast<size_t>(t.numel()) * sizeof(T));
      });
    }
    if (!err) err = w.flush();
    if (!err && ::fsync(fd) != 0) err = errno, step = "syncing";
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0 && !err) err = errno, step = "closing";
  if (!err && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno, step = "renaming";
  if (err) {
    ::unlink(tmp.c_str());
    fail_with(step, err);
  }

  // Make the rename itself durable. Some file systems cannot sync a directory (EINVAL): the data
  // is already safe there, so only real I/O errors are reported.
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    const int rc = ::fsync(dfd);
    const int derr = rc != 0 ? errno : 0;
    ::close(dfd);
    HEED_CHECK(rc == 0 || derr == EINVAL || derr == ENOTSUP, "save_safetensors: ", path,
               " was written but syncing its directory ", dir, " failed: ", errno_text(derr));
  }
}

void save_state_dict(const Module& module, const std::string& path, const std::map<std::string, std::string>& metadata) {
  save_safetensors(path, module.state_dict(), metadata);
}

Module::LoadResult load_state_dict(Module& module, const std::string& path, bool strict) {
  SafetensorsFile file = load_safetensors(path);
  try {
    return module.load_state_dict(file.tensors, strict);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

}  // namespace heed::nn
