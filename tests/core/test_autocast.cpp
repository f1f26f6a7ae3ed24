// AutocastBF16 (core/autocast.h) at the op level: under the guard, linear and matmul compute the
// fp32 sums of products of bf16-rounded inputs (forward and both backward products), the bias
// gradient and float64 stay untouched, attention_heads equals the same attention composed from
// bf16 matmuls and the fp32 softmax, the backward follows its forward's precision, and the
// hardware kernel gives the emulated kernel's bits through every op.
//
// The tolerance of a product check is the one of tests/core/test_bf16_gemm.cpp: every product of
// two bf16 values is exact in fp32, so an element of K terms may differ from the double sum of
// the same products by at most gamma(K + 1) sum |terms|, gamma(n) ~ n 2^-24, in any order.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "core/cpu.h"
#include "core/heed.h"
#include "core/ops/bf16.h"
#include "support/helpers.h"

using namespace heed;

namespace {

Tensor randn32(const Shape& shape, uint64_t seed) { return test::randn64(shape, seed).to(DType::f32).detach(); }

// rows x cols matrix of float values read from a contiguous tensor.
std::vector<float> values(const Tensor& t) { return t.contiguous().to_vector<float>(); }

// Checks C (m x n) == A (m x k) @ B (k x n), all row-major, products of bf16-rounded values summed
// in fp32: within gamma(k + 1) sum |terms| of the double sum. Returns the largest distance from the
// product of the unrounded values relative to the bound (large: the inputs really were rounded).
double require_bf16_product(const std::vector<float>& c, const std::vector<float>& a, const std::vector<float>& b,
                            int64_t m, int64_t n, int64_t k) {
  const double gamma = double(k + 1) * std::ldexp(1.0, -24) / (1.0 - double(k + 1) * std::ldexp(1.0, -24));
  double unrounded_excess = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0, abs_sum = 0, unrounded = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double t = double(round_bf16(a[i * k + p])) * double(round_bf16(b[p * n + j]));
        exact += t, abs_sum += std::fabs(t);
        unrounded += double(a[i * k + p]) * double(b[p * n + j]);
      }
      const double bound = gamma * abs_sum;
      INFO("C(" << i << ", " << j << ") of " << m << " x " << n << " x " << k);
      REQUIRE(std::fabs(double(c[i * n + j]) - exact) <= bound);
      unrounded_excess = std::max(unrounded_excess, std::fabs(double(c[i * n + j]) - unrounded) / (bound + 1e-30));
    }
  return unrounded_excess;
}

std::vector<float> transposed(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> t(x.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = x[i * cols + j];
  return t;
}

}  // namespace

TEST_CASE("AutocastBF16 nests, restores the previous state and is per thread", "[bf16][autocast]") {
  CHECK(!autocast_bf16());
  {
    AutocastBF16 on(true, Bf16Kernel::emulated);
    REQUIRE(autocast_bf16() == Bf16Kernel::emulated);
    {
      AutocastBF16 off(false);
      CHECK(!autocast_bf16());
    }
    CHECK(autocast_bf16() == Bf16Kernel::emulated);
    std::optional<Bf16Kernel> other_thread = Bf16Kernel::automatic;
    std::thread([&] { other_thread = autocast_bf16(); }).join();
    CHECK(!other_thread);
  }
  CHECK(!autocast_bf16());
}

TEST_CASE("linear under AutocastBF16: forward, dx and dW are fp32 sums of bf16-rounded products, db stays fp32",
          "[bf16][autocast]") {
  const int64_t rows = 6, in = 37, out = 23;  // x (2, 3, in): rows folded
  const Tensor x = randn32({2, 3, in}, 1).requires_grad_(), w = randn32({out, in}, 2).requires_grad_(),
               b = randn32({out}, 3).requires_grad_(), g = randn32({2, 3, out}, 4);
  Tensor y;
  {
    AutocastBF16 guard(true, Bf16Kernel::emulated);
    y = linear(x, w, b);
  }
  y.backward(g);  // outside the guard: the backward keeps its forward's precision
  const std::vector<float> xv = values(x), wv = values(w), bv = values(b), gv = values(g);
  // y = b + x w^T: the bias is the sum's first term (C starts at b, the product is added onto it)
  {
    const std::vector<float> y_full = values(y);
    const std::vector<float> wt = transposed(wv, out, in);
    const double gamma = double(in + 2) * std::ldexp(1.0, -24);
    double excess = 0;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < out; ++j) {
        double exact = bv[j], abs_sum = std::fabs(bv[j]), unrounded = bv[j];
        for (int64_t p = 0; p < in; ++p) {
          const double t = double(round_bf16(xv[i * in + p])) * double(round_bf16(wt[p * out + j]));
          exact += t, abs_sum += std::fabs(t), unrounded += double(xv[i * in + p]) * double(wt[p * out + j]);
        }
        REQUIRE(std::fabs(y_full[i * out + j] - exact) <= gamma * abs_sum);
        excess = std::max(excess, std::fabs(y_full[i * out + j] - unrounded) / (gamma * abs_sum));
      }
    CHECK(excess > 10);  // the product really saw rounded inputs
  }
  // dx = g w (k = out), dW = g^T x (k = rows)
  CHECK(require_bf16_product(values(x.grad()), gv, wv, rows, in, out) > 10);
  CHECK(require_bf16_product(values(w.grad()), transposed(gv, rows, out), xv, out, in, rows) > 10);
  // db: column sums of g in fp32, unrounded
  const std::vector<float> db = values(b.grad());
  for (int64_t j = 0; j < out; ++j) {
    double s = 0, abs_sum = 0;
    for (int64_t i = 0; i < rows; ++i) s += gv[i * out + j], abs_sum += std::fabs(gv[i * out + j]);
    REQUIRE(std::fabs(db[j] - s) <= double(rows + 1) * std::ldexp(1.0, -24) * abs_sum);
  }
}

TEST_CASE("matmul under AutocastBF16 (batched, broadcast): every product in bf16, float64 untouched",
          "[bf16][autocast]") {
  const int64_t m = 5, k = 19, n = 7;
  const Tensor a = randn32({3, m, k}, 5).requires_grad_(), b = randn32({k, n}, 6).requires_grad_();
  const Tensor g = randn32({3, m, n}, 7);
  Tensor c;
  {
    AutocastBF16 guard(true, Bf16Kernel::emulated);
    c = matmul(a, b);
  }
  c.backward(g);
  const std::vector<float> av = values(a), bv = values(b), cv = values(c), gv = values(g);
  for (int64_t i = 0; i < 3; ++i) {
    const std::vector<float> ai(av.begin() + i * m * k, av.begin() + (i + 1) * m * k);
    const std::vector<float> ci(cv.begin() + i * m * n, cv.begin() + (i + 1) * m * n);
    CHECK(require_bf16_product(ci, ai, bv, m, n, k) > 10);
  }
  // dB = sum_i a_i^T g_i: one product of depth 3 m (the batches are more of the summed axis)
  CHECK(require_bf16_product(values(b.grad()), transposed(av, 3 * m, k), gv, k, n, 3 * m) > 10);

  // float64 products ignore the guard: the same bits as without it
  const Tensor a64 = test::randn64({m, k}, 8), b64 = test::randn64({k, n}, 9);
  Tensor plain = matmul(a64, b64), guarded;
  {
    AutocastBF16 guard(true, Bf16Kernel::emulated);
    guarded = matmul(a64, b64);
  }
  CHECK(guarded.to_vector<double>() == plain.to_vector<double>());
}

namespace {

// Channels [off, off + C) of src (B, T, W) as heads (B, nh, T, C / nh).
Tensor heads_of(const Tensor& src, int64_t off, int64_t C, int64_t nh) {
  const Tensor t = slice(src, 2, off, off + C);
  return permute(reshape(t, {t.size(0), t.size(1), nh, C / nh}), {0, 2, 1, 3});
}

// Attention over a fused (B, T, 3C) projection, as one op or composed from matmul and
// attention_softmax; returns the output and the projection's gradient for dy.
std::pair<std::vector<float>, std::vector<float>> attention(const Tensor& qkv_data, const Tensor& dy, int64_t nh,
                                                            bool causal, const KeyPaddingMask* pad, bool composed) {
  const Tensor qkv = qkv_data.detach().requires_grad_();
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
  AttentionHeadsOptions o;
  o.n_head = nh, o.scale = 1.0 / std::sqrt(double(C / nh)), o.causal = causal, o.key_padding = pad;
  Tensor y;
  if (composed) {
    const Tensor p = attention_softmax(matmul(heads_of(qkv, 0, C, nh), transpose(heads_of(qkv, C, C, nh), -1, -2)),
                                       o.scale, causal, pad);
    y = reshape(permute(matmul(p, heads_of(qkv, 2 * C, C, nh)), {0, 2, 1, 3}), {B, T, C});
  } else {
    y = attention_heads({qkv, 0}, {qkv, C}, {qkv, 2 * C}, C, o);
  }
  y.backward(dy);
  return {values(y), values(qkv.grad())};
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(double(a[i]) - double(b[i])));
  return d;
}

}  // namespace

TEST_CASE("attention_heads under AutocastBF16 equals attention composed from bf16 matmuls and the fp32 softmax",
          "[bf16][autocast]") {
  const int64_t B = 2, T = 45, C = 24, nh = 3;  // T not a multiple of the kernels' tiles
  const Tensor qkv = randn32({B, T, 3 * C}, 11), dy = randn32({B, T, C}, 12);
  const auto pad = padding_mask_from_lengths({45, 30}, T);
  for (bool causal : {false, true})
    for (bool padded : {false, true}) {
      INFO("causal " << causal << " padded " << padded);
      const KeyPaddingMask* mask = padded ? &pad : nullptr;
      std::pair<std::vector<float>, std::vector<float>> fused, composed;
      {
        AutocastBF16 guard(true, Bf16Kernel::emulated);
        fused = attention(qkv, dy, nh, causal, mask, false);
        composed = attention(qkv, dy, nh, causal, mask, true);
      }
      const auto fp32 = attention(qkv, dy, nh, causal, mask, false);
      // The same roundings at the same points; only the order of fp32 sums differs.
      CHECK(max_abs_diff(fused.first, composed.first) < 1e-5);
      CHECK(max_abs_diff(fused.second, composed.second) < 1e-4);
      // and bf16 really ran: the fp32 op's results are further off, though close
      const double off_y = max_abs_diff(fused.first, fp32.first), off_g = max_abs_diff(fused.second, fp32.second);
      CHECK(off_y > 1e-4);
      CHECK(off_y < 5e-2);
      CHECK(off_g > 1e-4);
      CHECK(off_g < 1e-1);
    }
}

TEST_CASE("AutocastBF16: the avx512_bf16 kernel gives the emulated kernel's bits through linear and attention",
          "[bf16][autocast]") {
  if (!cpu_info().avx512_bf16) {
    WARN("this CPU has no AVX512_BF16: nothing to compare the emulated kernel with");
    return;
  }
  const int64_t B = 2, T = 70, C = 48, nh = 4;
  const Tensor x = randn32({B, T, C}, 21), w = randn32({3 * C, C}, 22), dy = randn32({B, T, C}, 23);
  const auto pad = padding_mask_from_lengths({70, 41}, T);
  auto run = [&](Bf16Kernel kernel, bool causal, const KeyPaddingMask* mask, double dropout) {
    AutocastBF16 guard(true, kernel);
    const Tensor xg = x.detach().requires_grad_(), wg = w.detach().requires_grad_();
    Generator gen(5);
    AttentionHeadsOptions o;
    o.n_head = nh, o.scale = 0.3, o.causal = causal, o.key_padding = mask, o.dropout = dropout, o.gen = &gen;
    const Tensor qkv = linear(xg, wg);
    const Tensor y = attention_heads({qkv, 0}, {qkv, C}, {qkv, 2 * C}, C, o);
    y.backward(dy);
    return std::vector<std::vector<float>>{values(y), values(xg.grad()), values(wg.grad())};
  };
  for (bool causal : {false, true})
    for (const KeyPaddingMask* mask : {static_cast<const KeyPaddingMask*>(nullptr), &pad})
      for (double dropout : {0.0, 0.25}) {
        INFO("causal " << causal << " padded " << (mask != nullptr) << " dropout " << dropout);
        const auto hw = run(Bf16Kernel::avx512_bf16, causal, mask, dropout);
        const auto emu = run(Bf16Kernel::emulated, causal, mask, dropout);
        for (size_t i = 0; i < hw.size(); ++i) {
          INFO("result " << i);
          CHECK(std::memcmp(hw[i].data(), emu[i].data(), hw[i].size() * sizeof(float)) == 0);
        }
      }
}
