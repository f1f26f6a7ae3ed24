// safetensors: round trips, a file made by hand in Python, every malformed-file error, a small
// mutation fuzz (only heed::Error, never a crash), and the atomic write.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/heed.h"
#include "nn/safetensors.h"
#include "support/helpers.h"

using namespace heed;
namespace fs = std::filesystem;

namespace {

// A scratch directory, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("heed_safetensors_test_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// [8-byte length][header][data_size zero bytes]; `len` overrides the length field.
std::vector<uint8_t> make_file(const std::string& header, size_t data_size = 0, uint64_t len = UINT64_MAX) {
  if (len == UINT64_MAX) len = header.size();
  std::vector<uint8_t> b(8 + header.size() + data_size, 0);
  std::memcpy(b.data(), &len, 8);
  std::memcpy(b.data() + 8, header.data(), header.size());
  return b;
}

nn::SafetensorsFile parse(const std::vector<uint8_t>& b) {
  return nn::parse_safetensors(b.data(), b.size(), "bad.safetensors");
}

// A one-tensor header with the given fields for tensor 'w'.
std::string one(const std::string& fields) { return "{\"w\": {" + fields + "}}"; }

// Made by hand (the `safetensors` package is not installed here): a header in key order b, a, h,
// bf, s, e but data in order b, a, h, bf, s, e (F64, F32, F16, BF16, a scalar, an empty tensor;
// the scalar's data is not 4-byte aligned), and metadata with a \u escape.
// `/usr/bin/python3 st_fixture.py` with st_fixture.py =
//   import json, struct, torch
//   tensors = [  # data order: F64 first, so file order differs from the header's key order
//       ("b", torch.tensor([1.5, -2.0, 1e-300], dtype=torch.float64)),
//       ("a", torch.tensor([[1.0, -2.5], [3.25, 0.1]], dtype=torch.float32)),
//       ("h", torch.tensor([2.0 ** -24, 65504.0, -0.5, float("inf"), 1.0 / 3.0], dtype=torch.float16)),
//       ("bf", torch.tensor([[-3.0e38], [1.0 / 3.0]], dtype=torch.bfloat16)),
//       ("s", torch.tensor(7.0, dtype=torch.float32)),
//       ("e", torch.zeros(0, 3, dtype=torch.float32)),
//   ]
//   names = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16"}
//   header, blobs, off = {}, b"", 0
//   for name, t in tensors:
//       raw = t.contiguous().view(torch.uint8).numpy().tobytes() if t.dim() else t.reshape(1).view(torch.uint8).numpy().tobytes()
//       header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
//       blobs += raw
//       off += len(raw)
//   header["__metadata__"] = {"format": "pt", "note": "h\u00e9llo"}
//   text = json.dumps(header).encode()
//   text += b" " * (-len(text) % 8)
//   data = struct.pack("<Q", len(text)) + text + blobs
//   print(len(data))
//   for i in range(0, len(data), 16):
//       print("    " + ", ".join("0x%02x" % c for c in data[i:i + 16]) + ",")
//   for name, t in tensors:
//       print(name, [repr(v) for v in t.float().flatten().tolist()] if t.dtype != torch.float64 else [repr(v) for v in t.flatten().tolist()])
const std::vector<uint8_t> kPythonFile = {
    0xc0, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7b, 0x22, 0x62, 0x22, 0x3a, 0x20, 0x7b, 0x22,
    0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x20, 0x22, 0x46, 0x36, 0x34, 0x22, 0x2c, 0x20, 0x22,
    0x73, 0x68, 0x61, 0x70, 0x65, 0x22, 0x3a, 0x20, 0x5b, 0x33, 0x5d, 0x2c, 0x20, 0x22, 0x64, 0x61,
    0x74, 0x61, 0x5f, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a, 0x20, 0x5b, 0x30, 0x2c,
    0x20, 0x32, 0x34, 0x5d, 0x7d, 0x2c, 0x20, 0x22, 0x61, 0x22, 0x3a, 0x20, 0x7b, 0x22, 0x64, 0x74,
    0x79, 0x70, 0x65, 0x22, 0x3a, 0x20, 0x22, 0x46, 0x33, 0x32, 0x22, 0x2c, 0x20, 0x22, 0x73, 0x68,
    0x61, 0x70, 0x65, 0x22, 0x3a, 0x20, 0x5b, 0x32, 0x2c, 0x20, 0x32, 0x5d, 0x2c, 0x20, 0x22, 0x64,
    0x61, 0x74, 0x61, 0x5f, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a, 0x20, 0x5b, 0x32,
    0x34, 0x2c, 0x20, 0x34, 0x30, 0x5d, 0x7d, 0x2c, 0x20, 0x22, 0x68, 0x22, 0x3a, 0x20, 0x7b, 0x22,
    0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x20, 0x22, 0x46, 0x31, 0x36, 0x22, 0x2c, 0x20, 0x22,
    0x73, 0x68, 0x61, 0x70, 0x65, 0x22, 0x3a, 0x20, 0x5b, 0x35, 0x5d, 0x2c, 0x20, 0x22, 0x64, 0x61,
    0x74, 0x61, 0x5f, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a, 0x20, 0x5b, 0x34, 0x30,
    0x2c, 0x20, 0x35, 0x30, 0x5d, 0x7d, 0x2c, 0x20, 0x22, 0x62, 0x66, 0x22, 0x3a, 0x20, 0x7b, 0x22,
    0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x20, 0x22, 0x42, 0x46, 0x31, 0x36, 0x22, 0x2c, 0x20,
    0x22, 0x73, 0x68, 0x61, 0x70, 0x65, 0x22, 0x3a, 0x20, 0x5b, 0x32, 0x2c, 0x20, 0x31, 0x5d, 0x2c,
    0x20, 0x22, 0x64, 0x61, 0x74, 0x61, 0x5f, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a,
    0x20, 0x5b, 0x35, 0x30, 0x2c, 0x20, 0x35, 0x34, 0x5d, 0x7d, 0x2c, 0x20, 0x22, 0x73, 0x22, 0x3a,
    0x20, 0x7b, 0x22, 0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x20, 0x22, 0x46, 0x33, 0x32, 0x22,
    0x2c, 0x20, 0x22, 0x73, 0x68, 0x61, 0x70, 0x65, 0x22, 0x3a, 0x20, 0x5b, 0x5d, 0x2c, 0x20, 0x22,
    0x64, 0x61, 0x74, 0x61, 0x5f, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a, 0x20, 0x5b,
    0x35, 0x34, 0x2c, 0x20, 0x35, 0x38, 0x5d, 0x7d, 0x2c, 0x20, 0x22, 0x65, 0x22, 0x3a, 0x20, 0x7b,
    0x22, 0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x20, 0x22, 0x46, 0x33, 0x32, 0x22, 0x2c, 0x20,
    0x22, 0x73, 0x68, 0x61, 0x70, 0x65, 0x22, 0x3a, 0x20, 0x5b, 0x30, 0x2c, 0x20, 0x33, 0x5d, 0x2c,
    0x20, 0x22, 0x64, 0x61, 0x74, 0x61, 0x5f, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a,
    0x20, 0x5b, 0x35, 0x38, 0x2c, 0x20, 0x35, 0x38, 0x5d, 0x7d, 0x2c, 0x20, 0x22, 0x5f, 0x5f, 0x6d,
    0x65, 0x74, 0x61, 0x64, 0x61, 0x74, 0x61, 0x5f, 0x5f, 0x22, 0x3a, 0x20, 0x7b, 0x22, 0x66, 0x6f,
    0x72, 0x6d, 0x61, 0x74, 0x22, 0x3a, 0x20, 0x22, 0x70, 0x74, 0x22, 0x2c, 0x20, 0x22, 0x6e, 0x6f,
    0x74, 0x65, 0x22, 0x3a, 0x20, 0x22, 0x68, 0x5c, 0x75, 0x30, 0x30, 0x65, 0x39, 0x6c, 0x6c, 0x6f,
    0x22, 0x7d, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8, 0x3f,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x59, 0xf3, 0xf8, 0xc2, 0x1f, 0x6e, 0xa5, 0x01,
    0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0, 0x00, 0x00, 0x50, 0x40, 0xcd, 0xcc, 0xcc, 0x3d,
    0x01, 0x00, 0xff, 0x7b, 0x00, 0xb8, 0x00, 0x7c, 0x55, 0x35, 0x62, 0xff, 0xab, 0x3e, 0x00, 0x00,
    0xe0, 0x40,
};

}  // namespace

TEST_CASE("safetensors round trip: float32 and float64 with metadata", "[safetensors]") {
  TempDir dir;
  Generator gen(7);
  Tensor a = Tensor::randn({3, 5}, gen);
  Tensor b = Tensor::randn({4}, gen, 1.0, 0.0, DType::f64);
  Tensor s = Tensor::scalar(2.5, DType::f64);
  Tensor e = Tensor::zeros({0, 4});
  Tensor t = transpose(Tensor::randn({2, 3}, gen), 0, 1);  // a strided view: written row-major
  REQUIRE_FALSE(t.is_contiguous());
  const std::map<std::string, std::string> meta{{"config", "{\"n_layer\":4}"}, {"vocab", "\n !\u00e9\u4e2d"}, {"iter", "12"}};
  const std::string path = dir.file("rt.safetensors");
  nn::save_safetensors(path, {{"z.weight", a}, {"b", b}, {"scalar", s}, {"empty", e}, {"t", t}}, meta);

  nn::SafetensorsFile f = nn::load_safetensors(path);
  REQUIRE(f.metadata == meta);
  REQUIRE(f.tensors.size() == 5);
  // Data order: save order, float64 tensors first (aligned).
  const char* names[] = {"b", "scalar", "z.weight", "empty", "t"};
  const Tensor* src[] = {&b, &s, &a, &e, &t};
  for (size_t i = 0; i < 5; ++i) {
    INFO(names[i]);
    REQUIRE(f.tensors[i].first == names[i]);
    REQUIRE(f.tensors[i].second.dtype() == src[i]->dtype());
    REQUIRE(f.tensors[i].second.shape() == src[i]->shape());
    REQUIRE(f.tensors[i].second.to_vector<double>() == src[i]->to_vector<double>());  // bit for bit
  }
  // The layout the format requires: header length a multiple of 8, JSON starting with '{',
  // and data packed right after it.
  const std::vector<uint8_t> raw = read_bytes(path);
  uint64_t n;
  std::memcpy(&n, raw.data(), 8);
  REQUIRE(n % 8 == 0);
  REQUIRE(raw[8] == '{');
  REQUIRE(raw.size() == 8 + n + (15 + 6) * 4 + (4 + 1) * 8);
  // The reference implementation's rule: the data offsets tile the data section, no gaps.
  auto header = nlohmann::json::parse(raw.begin() + 8, raw.begin() + 8 + n);
  REQUIRE(header["b"]["data_offsets"] == nlohmann::json::array({0, 32}));
  REQUIRE(header["scalar"]["data_offsets"] == nlohmann::json::array({32, 40}));
  REQUIRE(header["z.weight"]["data_offsets"] == nlohmann::json::array({40, 100}));
  REQUIRE(header["empty"]["data_offsets"] == nlohmann::json::array({100, 100}));
  REQUIRE(header["t"]["data_offsets"] == nlohmann::json::array({100, 124}));
  REQUIRE(header["t"]["shape"] == nlohmann::json::array({3, 2}));
  REQUIRE(header["b"]["dtype"] == "F64");
  REQUIRE(header["t"]["dtype"] == "F32");
  // No temporary file is left behind.
  REQUIRE(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
}

TEST_CASE("safetensors round trip: int32, int64 and bool tensors under PyTorch's dtype names, and a state_dict "
          "with integer buffers",
          "[safetensors]") {
  TempDir dir;
  const Tensor i32 = Tensor::from_vector(std::vector<int32_t>{-7, 0, 2147483647, -2147483647 - 1}, {2, 2});
  const Tensor i64 = Tensor::from_vector(std::vector<int64_t>{int64_t{1} << 40, -3, 5}, {3});
  const Tensor flags = Tensor({{true, false, true}, {false, false, true}});
  const Tensor strided = transpose(flags, 0, 1);  // written row-major
  const std::string path = dir.file("ints.safetensors");
  nn::save_safetensors(path, {{"flags", flags}, {"i32", i32}, {"i64", i64}, {"t", strided}}, {});
  const std::vector<uint8_t> raw = read_bytes(path);
  uint64_t n;
  std::memcpy(&n, raw.data(), 8);
  auto header = nlohmann::json::parse(raw.begin() + 8, raw.begin() + 8 + n);
  CHECK(header["i32"]["dtype"] == "I32");
  CHECK(header["i64"]["dtype"] == "I64");
  CHECK(header["flags"]["dtype"] == "BOOL");
  // Larger elements first (each aligned to its size): int64, int32, then the bools, one byte each.
  CHECK(header["i64"]["data_offsets"] == nlohmann::json::array({0, 24}));
  CHECK(header["i32"]["data_offsets"] == nlohmann::json::array({24, 40}));
  CHECK(header["flags"]["data_offsets"] == nlohmann::json::array({40, 46}));
  CHECK(header["t"]["data_offsets"] == nlohmann::json::array({46, 52}));
  CHECK(raw[8 + n + 40] == 1);
  CHECK(raw[8 + n + 41] == 0);
  nn::SafetensorsFile f = nn::load_safetensors(path);
  REQUIRE(f.tensors.size() == 4);
  std::map<std::string, Tensor> got(f.tensors.begin(), f.tensors.end());
  REQUIRE(got["i32"].dtype() == DType::i32);
  CHECK(got["i32"].to_vector<int32_t>() == i32.to_vector<int32_t>());
  REQUIRE(got["i64"].dtype() == DType::i64);
  CHECK(got["i64"].to_vector<int64_t>() == i64.to_vector<int64_t>());
  REQUIRE(got["flags"].dtype() == DType::boolean);
  CHECK(got["flags"].to_vector<int64_t>() == flags.to_vector<int64_t>());
  CHECK(got["t"].shape() == Shape{3, 2});
  CHECK(got["t"].to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0, 0, 1, 1});
  // A BOOL byte other than 0 or 1 reads as true (never an invalid bool).
  std::vector<uint8_t> odd = make_file(one("\"dtype\": \"BOOL\", \"shape\": [3], \"data_offsets\": [0, 3]"), 3);
  odd[odd.size() - 3] = 0, odd[odd.size() - 2] = 2, odd[odd.size() - 1] = 255;
  CHECK(parse(odd).tensors[0].second.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1});

  // A module whose state_dict holds integer and bool buffers round-trips through a file.
  struct Counter : nn::Module {
    Tensor weight, steps, seen;
    explicit Counter(float w) {
      register_parameter("weight", weight, Tensor::full({2}, w));
      register_buffer("steps", steps, Tensor::from_vector(std::vector<int64_t>{0}, {1}));
      register_buffer("seen", seen, Tensor::zeros({3}, DType::boolean));
    }
  };
  Counter a(1.5f), b(0.0f);
  a.steps = Tensor::from_vector(std::vector<int64_t>{123456789012}, {1});
  a.seen = Tensor({true, false, true});
  const std::string mpath = dir.file("module.safetensors");
  nn::save_state_dict(a, mpath);
  nn::load_state_dict(b, mpath);
  CHECK(b.weight.to_vector<float>() == std::vector<float>{1.5f, 1.5f});
  REQUIRE(b.steps.dtype() == DType::i64);
  CHECK(b.steps.to_vector<int64_t>() == std::vector<int64_t>{123456789012});
  REQUIRE(b.seen.dtype() == DType::boolean);
  CHECK(b.seen.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
}

TEST_CASE("safetensors reads a file made in Python, with F16/BF16 converted to float32", "[safetensors]") {
  nn::SafetensorsFile f = nn::parse_safetensors(kPythonFile.data(), kPythonFile.size(), "python.safetensors");
  REQUIRE(f.metadata == std::map<std::string, std::string>{{"format", "pt"}, {"note", "h\u00e9llo"}});
  REQUIRE(f.tensors.size() == 6);
  const char* order[] = {"b", "a", "h", "bf", "s", "e"};
  for (size_t i = 0; i < 6; ++i) REQUIRE(f.tensors[i].first == order[i]);
  const Tensor& b = f.tensors[0].second;
  REQUIRE(b.dtype() == DType::f64);
  REQUIRE(b.to_vector<double>() == std::vector<double>{1.5, -2.0, 1e-300});
  const Tensor& a = f.tensors[1].second;
  REQUIRE(a.dtype() == DType::f32);
  REQUIRE(a.shape() == Shape{2, 2});
  REQUIRE(a.to_vector<double>() == std::vector<double>{1.0, -2.5, 3.25, 0.10000000149011612});
  // torch's own float16/bfloat16 -> float32 values, printed by the script above.
  const Tensor& h = f.tensors[2].second;
  REQUIRE(h.dtype() == DType::f32);
  REQUIRE(h.to_vector<double>() == std::vector<double>{5.960464477539063e-08, 65504.0, -0.5, INFINITY, 0.333251953125});
  const Tensor& bf = f.tensors[3].second;
  REQUIRE(bf.dtype() == DType::f32);
  REQUIRE(bf.shape() == Shape{2, 1});
  REQUIRE(bf.to_vector<double>() == std::vector<double>{-3.00405527047391e+38, 0.333984375});
  REQUIRE(f.tensors[4].second.shape() == Shape{});
  REQUIRE(f.tensors[4].second.item() == 7.0);
  REQUIRE(f.tensors[5].second.shape() == Shape{0, 3});
}

TEST_CASE("safetensors F16 conversion covers subnormals, signed zero, infinities and NaN", "[safetensors]") {
  // bits: +0, -0, smallest subnormal, largest subnormal, smallest normal, 1.0, -inf, NaN
  const uint16_t bits[] = {0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0xfc00, 0x7e00};
  std::vector<uint8_t> file = make_file(one("\"dtype\": \"F16\", \"shape\": [8], \"data_offsets\": [0, 16]"), 16);
  std::memcpy(file.data() + file.size() - 16, bits, 16);
  auto v = parse(file).tensors[0].second.to_vector<float>();
  REQUIRE(v[0] == 0.0f);
  REQUIRE_FALSE(std::signbit(v[0]));
  REQUIRE(v[1] == 0.0f);
  REQUIRE(std::signbit(v[1]));
  REQUIRE(v[2] == std::ldexp(1.0f, -24));
  REQUIRE(v[3] == std::ldexp(1023.0f, -24));
  REQUIRE(v[4] == std::ldexp(1.0f, -14));
  REQUIRE(v[5] == 1.0f);
  REQUIRE(v[6] == -INFINITY);
  REQUIRE(std::isnan(v[7]));
}

TEST_CASE("safetensors rejects malformed files with errors naming the file, field and problem", "[safetensors]") {
  const std::string ok_fields = "\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]";
  REQUIRE(parse(make_file(one(ok_fields), 8)).tensors.size() == 1);  // the baseline parses

  auto fails = [](const std::vector<uint8_t>& b, const std::string& words) {
    INFO("expecting: " << words);
    REQUIRE_THROWS_AS(parse(b), heed::Error);
    REQUIRE_THROWS_WITH(parse(b), Catch::Contains("bad.safetensors") && Catch::Contains(words));
  };
  // the frame
  fails(std::vector<uint8_t>{1, 2, 3}, "3 bytes, too short");
  fails(make_file("{}", 0, 100), "header length 100 runs past the end of the file (10 bytes)");
  fails(make_file("{}", 0, uint64_t{1} << 40), "absurdly large");
  fails(make_file("{}", 0, 100'000'001), "absurdly large");
  // the header as JSON
  fails(make_file("{\"w\": "), "header is not valid JSON");
  fails(make_file("{\"w\xff\": {}}"), "header is not valid JSON");  // not UTF-8
  fails(make_file("[1, 2]"), "header is not a JSON object");
  fails(make_file("42"), "header is not a JSON object but number");
  fails(make_file("{\"w\": {\"x\": " + std::string(100, '[') + std::string(100, ']') + "}}"), "nests deeper than 64");
  fails(make_file("{\"w\": {" + ok_fields + "}, \"w\": {" + ok_fields + "}}", 8), "lists 'w' twice");
  // entries
  fails(make_file("{\"w\": 5}"), "tensor 'w': entry is not a JSON object but number");
  fails(make_file(one("\"shape\": [2], \"data_offsets\": [0, 8]"), 8), "tensor 'w': missing \"dtype\"");
  fails(make_file(one("\"dtype\": 3, \"shape\": [2], \"data_offsets\": [0, 8]"), 8), "tensor 'w': \"dtype\" is not a string");
  fails(make_file(one("\"dtype\": \"I16\", \"shape\": [1], \"data_offsets\": [0, 2]"), 2), "tensor 'w': unsupported dtype 'I16'");
  // shapes
  fails(make_file(one("\"dtype\": \"F32\", \"data_offsets\": [0, 8]"), 8), "tensor 'w': missing \"shape\"");
  fails(make_file(one("\"dtype\": \"F32\", \"shape\": 2, \"data_offsets\": [0, 8]"), 8), "\"shape\" is not an array");
  fails(make_file(one("\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, 8]"), 8),
        "tensor 'w': shape entry 0 (-2) is not a non-negative integer");
  fails(make_file(one("\"dtype\": \"F32\", \"shape\": [2.0], \"data_offsets\": [0, 8]"), 8),
        "shape entry 0 (2.0) is not a non-negative integer");
  fails(make_file(one("\"dtype\": \"F32\", \"shape\": [\"2\"], \"data_offsets\": [0, 8]"), 8),
        "shape entry 0 (\"2\") is not a non-negative integer");
  fails(make_file(one("\"dtype\": \"F32\", \"shape\": [1, 9223372036854775808], \"data_offsets\": [0, 8]"), 8),
        "shape entry 1 (9223372036854775808) overflows int64");
  fails(make_file(one("\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 8]"), 8),
        "the element count overflows int64");
  fails(make_file(one("\"dtype\": \"F32\", \"shape\": [0, 4294967296, 4294967296], \"data_offsets\": [0, 0]")),
        "the element count overflows int64");  // no elements, but strides would overflow
  fails(make_file(one("\"dtype\": \"F64\", \"shape\": [2305843009213693952], \"data_offsets\": [0, 8]"), 8),
        "the byte count overflows int64");
  // offsets
  fails(make_file(one("\"dtype\": \"F32\", \"shape\": [2]"), 8), "tensor 'w': missing \"data_offsets\"");
  fails(make_file(one("\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4, 8]"), 8),
        "\"data_offsets\" [0,4,8] is not two non-negative integers");
  fails(make_file(one("\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [-8, 0]"), 8),
        "is not two non-negative integers");
  fails(make_file(one("\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": {\"a\": 1}"), 8),
        "is not two non-negative integers");
  fails(make_file(one("\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [8, 0]"), 8), "tensor 'w': data_offsets [8,0]: end is before begin");
  fails(make_file(one("\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]"), 8),
        "tensor 'w': data_offsets [4,12] lie outside the data section (8 bytes)");
  fails(make_file(one("\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 18446744073709551615]"), 8),
        "lie outside the data section");
  fails(make_file(one("\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]"), 16),
        "tensor 'w': data_offsets [0,8] span 8 bytes but shape [3] of F32 needs 12");
  fails(make_file("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
                  "\"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 12),
        "tensors 'a' (bytes 0..8) and 'b' (bytes 4..12) overlap");
  fails(make_file("{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}, "
                  "\"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}", 16),
        "tensors 'a' (bytes 0..16) and 'b' (bytes 8..12) overlap");
  // metadata
  fails(make_file("{\"__metadata__\": [\"x\"]}"), "\"__metadata__\" is not a JSON object but array");
  fails(make_file("{\"__metadata__\": 3}"), "\"__metadata__\" is not a JSON object but number");
  fails(make_file("{\"__metadata__\": {\"iter\": 12}}"), "\"__metadata__\" entry 'iter' is not a string but number");
}

TEST_CASE("safetensors accepts empty tensors sharing an offset and an empty header", "[safetensors]") {
  auto f = parse(make_file("{\"a\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [4, 4]}, "
                           "\"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
                           "\"c\": {\"dtype\": \"F64\", \"shape\": [3, 0], \"data_offsets\": [4, 4]}}  ",
                           8));
  REQUIRE(f.tensors.size() == 3);
  REQUIRE(parse(make_file("{}")).tensors.empty());
  REQUIRE(parse(make_file("{}      ")).metadata.empty());
}

TEST_CASE("safetensors parser survives every truncation and many byte mutations", "[safetensors]") {
  // Each prefix and each single-byte mutation either parses or throws heed::Error; any other
  // exception fails the test, and a crash or out-of-bounds read would show here (and under ASan).
  int errors = 0, parsed = 0;
  auto attempt = [&](const std::vector<uint8_t>& b) {
    try {
      parse(b);
      ++parsed;
    } catch (const heed::Error&) {
      ++errors;
    }
  };
  for (size_t n = 0; n < kPythonFile.size(); ++n)
    attempt(std::vector<uint8_t>(kPythonFile.begin(), kPythonFile.begin() + n));
  REQUIRE(errors == static_cast<int>(kPythonFile.size()));  // every strict prefix is bad
  for (size_t i = 0; i < kPythonFile.size(); ++i)
    for (uint8_t v : {uint8_t{0x00}, uint8_t{0x22}, uint8_t{0x30}, uint8_t{0x5d}, uint8_t{0xff}}) {
      std::vector<uint8_t> b = kPythonFile;
      b[i] = v;
      attempt(b);
    }
  REQUIRE(parsed > 0);  // mutations of the data section still parse
  REQUIRE(errors > static_cast<int>(kPythonFile.size()));
}

TEST_CASE("load_safetensors reports unreadable paths", "[safetensors]") {
  TempDir dir;
  REQUIRE_THROWS_WITH(nn::load_safetensors(dir.file("missing.safetensors")),
                      Catch::Contains("missing.safetensors: cannot open") && Catch::Contains("No such file"));
  REQUIRE_THROWS_WITH(nn::load_safetensors(dir.path.string()), Catch::Contains("cannot read"));
  const std::string empty = dir.file("empty.safetensors");
  std::ofstream(empty).close();
  REQUIRE_THROWS_WITH(nn::load_safetensors(empty), Catch::Contains("empty.safetensors: file is 0 bytes"));
}

TEST_CASE("save_safetensors rejects bad tensor lists", "[safetensors]") {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  Tensor a = Tensor::zeros({2});
  REQUIRE_THROWS_WITH(nn::save_safetensors(path, {{"a", a}, {"a", a}}, {}), Catch::Contains("'a' appears twice"));
  REQUIRE_THROWS_WITH(nn::save_safetensors(path, {{"__metadata__", a}}, {}), Catch::Contains("cannot name a tensor"));
  REQUIRE_THROWS_WITH(nn::save_safetensors(path, {{"u", Tensor()}}, {}), Catch::Contains("'u' is undefined"));
  REQUIRE_THROWS_WITH(nn::save_safetensors(path, {{"a", a}}, {{"k", "\xff"}}), Catch::Contains("cannot encode the header"));
  REQUIRE_FALSE(fs::exists(path));
  REQUIRE(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 0);
}

TEST_CASE("save_safetensors is atomic: a failed save leaves the old file intact", "[safetensors]") {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  nn::save_safetensors(path, {{"w", Tensor::full({4}, 1.5)}}, {{"iter", "1"}});
  const std::vector<uint8_t> before = read_bytes(path);
  const Tensor big = Tensor::full({100000}, 2.0);  // 400 kB

  SECTION("the temporary file cannot be created") {
    // A directory squatting on the temporary name makes open() fail even for root, which
    // ignores permission bits.
    const fs::path squat = path + ".tmp." + std::to_string(::getpid());
    fs::create_directory(squat);
    REQUIRE_THROWS_WITH(nn::save_safetensors(path, {{"w", big}}, {{"iter", "2"}}),
                        Catch::Contains("cannot write " + path) && Catch::Contains("creating") &&
                            Catch::Contains(std::strerror(EISDIR)));
    REQUIRE(fs::is_directory(squat));
    fs::remove(squat);
  }

  SECTION("a write fails half-way (file size limit, as a full disk would)") {
    // RLIMIT_FSIZE makes write() fail with EFBIG past 64 kB: a real short write on a real file.
    // SIGXFSZ would kill the process, so it is ignored for the duration.
    struct rlimit old_limit;
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    struct sigaction ignore {}, old_action {};
    ignore.sa_handler = SIG_IGN;
    REQUIRE(::sigaction(SIGXFSZ, &ignore, &old_action) == 0);
    struct rlimit small = old_limit;
    small.rlim_cur = 64 * 1024;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    std::string message;
    try {
      nn::save_safetensors(path, {{"w", big}}, {{"iter", "2"}});
    } catch (const heed::Error& e) {
      message = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &old_limit);
    ::sigaction(SIGXFSZ, &old_action, nullptr);
    REQUIRE_THAT(message, Catch::Contains("cannot write " + path) && Catch::Contains("writing") &&
                              Catch::Contains(std::strerror(EFBIG)));
  }

  REQUIRE(read_bytes(path) == before);  // the old checkpoint, byte for byte
  auto f = nn::load_safetensors(path);
  REQUIRE(f.metadata.at("iter") == "1");
  REQUIRE(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);  // no leftovers

  // And a save that succeeds replaces it.
  nn::save_safetensors(path, {{"w", big}}, {{"iter", "3"}});
  f = nn::load_safetensors(path);
  REQUIRE(f.metadata.at("iter") == "3");
  REQUIRE(f.tensors[0].second.numel() == 100000);
  REQUIRE(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
}
