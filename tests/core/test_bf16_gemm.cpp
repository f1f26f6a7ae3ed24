// gemm_bf16 against a reference computed on the same inputs rounded to bf16, in every transpose
// form Linear and attention use, at odd shapes, beta 0 and 1, with the causal skips, batched, on
// several thread counts; and the hardware kernel against the emulated one, bit for bit.
//
// The tolerance. Both kernels see exactly round_bf16 of every input, and a product of two bf16
// values is exact in fp32 (8 + 8 significant bits fit in 24), so the only error left is fp32
// summation: the kernel adds the K products (and C's old value when beta = 1) in its own order,
// rounding after every addition. For any order, recursive summation of n terms t_i satisfies
// |computed - exact| <= gamma(n - 1) sum |t_i|, gamma(n) = n u / (1 - n u), u = 2^-24 (Higham,
// Accuracy and Stability of Numerical Algorithms, 2nd ed., eq. 4.4). The reference sums the same
// exact products in double (its own error, K 2^-53 sum |t_i|, is negligible), so each element is
// checked against gamma(K + 1) (sum_k |a_ik b_kj| + |c_ij|): it grows with K and holds whatever
// the blocking. A kernel that skipped the rounding of its inputs would be off by about 2^-9 of
// each product, which the bound catches at these sizes (a test below checks that it does).
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "core/amx.h"
#include "core/check.h"
#include "core/cpu.h"
#include "core/ops/bf16.h"
#include "core/ops/gemm_bf16.h"
#include "core/parallel.h"
#include "core/random.h"

using namespace heed;

namespace {

struct ThreadsGuard {
  int saved = num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};

// Uniform in [-1, 1): of every magnitude down to 2^-24, and cheap to draw by the million.
std::vector<float> random_floats(size_t n, uint64_t seed) {
  Generator gen(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(2.0 * gen.uniform() - 1.0);
  return v;
}

// One product's operands as gemm_bf16 reads them (row-major, with leading dimensions).
struct Case {
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  std::vector<float> a, b, c;  // c: C's value before the call

  Case(bool ta_, bool tb_, int64_t m_, int64_t n_, int64_t k_, uint64_t seed, int64_t pad = 0)
      : ta(ta_), tb(tb_), m(m_), n(n_), k(k_) {
    lda = std::max<int64_t>(1, ta ? m : k) + pad;
    ldb = std::max<int64_t>(1, tb ? k : n) + pad;
    ldc = std::max<int64_t>(1, n) + pad;
    a = random_floats(static_cast<size_t>((ta ? k : m) * lda), seed);
    b = random_floats(static_cast<size_t>((tb ? n : k) * ldb), seed + 1);
    c = random_floats(static_cast<size_t>(m * ldc), seed + 2);
  }
  float& A(int64_t i, int64_t p) { return ta ? a[p * lda + i] : a[i * lda + p]; }
  float& B(int64_t p, int64_t j) { return tb ? b[j * ldb + p] : b[p * ldb + j]; }

  // C after the call, with `beta` and the given options (C starts as c, or NaN when beta = 0, to
  // show that it is not read).
  std::vector<float> run(float beta, const GemmBf16Options& opt = {}) const {
    std::vector<float> out = c;
    if (beta == 0.0f) std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
    gemm_bf16(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, beta, out.data(), ldc, opt);
    return out;
  }
};

GemmBf16Options with_kernel(Bf16Kernel kernel) {
  GemmBf16Options o;
  o.kernel = kernel;
  return o;
}

// The kernels to check here: emulated always, the hardware ones where the CPU has them.
std::vector<Bf16Kernel> kernels() { return bf16_kernels_here(); }

double gamma(int64_t n) {
  const double nu = static_cast<double>(n) * std::ldexp(1.0, -24);
  return nu / (1.0 - nu);
}

// The double-precision sum of the bf16-rounded products for every element of C, and the bound
// gamma(K + 1) (sum of magnitudes) around it (see the top of this file).
struct Reference {
  std::vector<double> value, bound;
  Reference(Case& t, float beta) : value(static_cast<size_t>(t.m * t.n)), bound(value.size()) {
    for (int64_t i = 0; i < t.m; ++i)
      for (int64_t j = 0; j < t.n; ++j) {
        value[i * t.n + j] = beta == 1.0f ? t.c[i * t.ldc + j] : 0.0;
        bound[i * t.n + j] = std::fabs(value[i * t.n + j]);
      }
    // Sums of products in double (exact for bf16 inputs up to the last few bits of a long sum),
    // read along memory: B's rows as they are stored (along j, or along k when transposed).
    std::vector<float> a(static_cast<size_t>(t.m * t.k));
    for (int64_t i = 0; i < t.m; ++i)
      for (int64_t p = 0; p < t.k; ++p) a[i * t.k + p] = round_bf16(t.A(i, p));
    std::vector<float> brow(static_cast<size_t>(t.tb ? t.k : t.n));
    for (int64_t r = 0; r < (t.tb ? t.n : t.k); ++r) {
      for (size_t e = 0; e < brow.size(); ++e) brow[e] = round_bf16(t.b[r * t.ldb + static_cast<int64_t>(e)]);
      for (int64_t i = 0; i < t.m; ++i) {
        const float* ai = a.data() + i * t.k;
        if (t.tb) {  // r is column j of op(B): one dot product
          double sum = 0, mag = 0;
          for (int64_t p = 0; p < t.k; ++p) {
            const double term = static_cast<double>(ai[p]) * brow[p];
            sum += term;
            mag += std::fabs(term);
          }
          value[i * t.n + r] += sum;
          bound[i * t.n + r] += mag;
        } else {  // r is row p of op(B): one term of every element of row i
          for (int64_t j = 0; j < t.n; ++j) {
            const double term = static_cast<double>(ai[r]) * brow[j];
            value[i * t.n + j] += term;
            bound[i * t.n + j] += std::fabs(term);
          }
        }
      }
    }
    for (double& b : bound) b *= gamma(t.k + 1);
  }
};

// How many elements of `got` that `needed(i, j)` (all, unless a skip leaves some free) are
// outside the reference's bound; the first few are logged.
template <class Needed>
int64_t count_outside_bound(const Case& t, const Reference& ref, const std::vector<float>& got, Needed needed) {
  int64_t bad = 0;
  for (int64_t i = 0; i < t.m; ++i)
    for (int64_t j = 0; j < t.n; ++j) {
      if (!needed(i, j)) continue;
      const double g = got[i * t.ldc + j], r = ref.value[i * t.n + j], b = ref.bound[i * t.n + j];
      if (!(std::fabs(g - r) <= b) && bad++ < 3)
        UNSCOPED_INFO("C(" << i << ", " << j << ") = " << g << ", reference " << r << ", bound " << b);
    }
  return bad;
}

template <class Needed>
int64_t count_outside_bound(Case& t, float beta, const std::vector<float>& got, Needed needed) {
  return count_outside_bound(t, Reference(t, beta), got, needed);
}

int64_t count_outside_bound(Case& t, float beta, const std::vector<float>& got) {
  return count_outside_bound(t, beta, got, [](int64_t, int64_t) { return true; });
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

struct Mnk {  // a product's sizes
  int64_t m, n, k;
};

// Every shape in every transpose form (and with padded leading dimensions when `pads`), beta 0
// and 1, on every kernel: inside the bound, the padding of C untouched, and the kernels' bits equal.
void check_shapes(const std::vector<Mnk>& shapes, bool pads, const Bf16BlockingCaps& caps = {}) {
  int seed = 0;
  for (const Mnk& s : shapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (int64_t pad : {0, 3}) {
          if (pad && !pads) continue;
          Case t(ta, tb, s.m, s.n, s.k, static_cast<uint64_t>(100 + seed++), pad);
          for (float beta : {0.0f, 1.0f}) {
            const Reference ref(t, beta);
            std::vector<std::vector<float>> outs;  // emulated, then avx512_bf16 where it runs
            for (Bf16Kernel kernel : kernels()) {
              INFO("m=" << s.m << " n=" << s.n << " k=" << s.k << " trans_a=" << ta << " trans_b=" << tb << " pad="
                        << pad << " beta=" << beta << " kernel=" << static_cast<int>(kernel));
              GemmBf16Options options = with_kernel(kernel);
              options.caps = caps;
              const std::vector<float> out = t.run(beta, options);
              if (kernel != Bf16Kernel::amx_bf16) outs.push_back(out);  // AMX's bits are its own
              REQUIRE(count_outside_bound(t, ref, out, [](int64_t, int64_t) { return true; }) == 0);
              // Padding between rows of C is never written.
              for (int64_t i = 0; i < t.m; ++i)
                for (int64_t j = t.n; j < t.ldc; ++j)
                  REQUIRE(std::bit_cast<uint32_t>(out[i * t.ldc + j]) ==
                          std::bit_cast<uint32_t>(beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : t.c[i * t.ldc + j]));
            }
            if (outs.size() == 2) REQUIRE(same_bits(outs[0], outs[1]));  // hardware == emulated
          }
        }
}

}  // namespace

TEST_CASE("gemm_bf16 equals the fp32 sum of bf16-rounded products in every transpose form and odd shape", "[bf16]") {
  check_shapes({{1, 1, 1},
                {1, 37, 5},
                {13, 1, 7},
                {12, 32, 32},  // one tile exactly
                {13, 33, 33},
                {25, 65, 67},
                {37, 50, 1},
                {64, 200, 64},
                {300, 31, 129}},
               true);
}

TEST_CASE("gemm_bf16 is exact to the bound across k slices, row blocks and column panels", "[bf16]") {
  // The blocking this CPU's caches give: products deeper than a k slice and taller than a block of
  // rows, for either form of A (the depth of a slice depends on it). Its panels of columns (half
  // of a core's share of L3: hundreds of MB of B on some hosts) are run through caps below.
  const int64_t huge = int64_t(1) << 40;
  const int64_t deep = gemm_bf16_blocking(7, 9, huge, false).kc + 5;
  int64_t tall = 0;  // past the largest block of rows of any kernel here (their tiles' rows differ)
  for (Bf16Kernel kernel : kernels()) tall = std::max(tall, gemm_bf16_blocking(huge, 40, 70, false, kernel).mc + 13);
  for (Bf16Kernel kernel : kernels())
    for (bool ta : {false, true}) {
      INFO("kernel " << static_cast<int>(kernel) << " trans_a " << ta);
      REQUIRE(gemm_bf16_blocking(7, 9, deep, ta, kernel).kc < deep);
      REQUIRE(gemm_bf16_blocking(tall, 40, 70, ta, kernel).mc < tall);
    }
  check_shapes({{7, 9, deep}, {tall, 40, 70}}, false);

  // Small caps: several slices, blocks and panels at once, with ragged last ones, in one product.
  const Bf16BlockingCaps caps{64, 64, 64};
  const Mnk capped{75, 150, 150};
  for (Bf16Kernel kernel : kernels())
    for (bool ta : {false, true}) {
      INFO("kernel " << static_cast<int>(kernel) << " trans_a " << ta);
      const GemmBf16Blocking blk = gemm_bf16_blocking(capped.m, capped.n, capped.k, ta, kernel, caps);
      REQUIRE(blk.kc < capped.k);
      REQUIRE(blk.mc < capped.m);
      REQUIRE(blk.nc < capped.n);
    }
  check_shapes({capped, {2, 150, 150}}, true, caps);
}

TEST_CASE("the bound of the bf16 gemm tests catches a kernel that does not round its inputs", "[bf16]") {
  // The reference on unrounded inputs stands in for such a kernel: at a shape of the test above,
  // many of its elements fall outside the bound around the rounded reference, so that test would
  // fail for it.
  for (int64_t k : {7, 67, 129}) {
    Case t(false, true, 20, 30, k, 7);
    std::vector<float> unrounded(static_cast<size_t>(t.m * t.ldc));
    for (int64_t i = 0; i < t.m; ++i)
      for (int64_t j = 0; j < t.n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += static_cast<double>(t.A(i, p)) * t.B(p, j);
        unrounded[i * t.ldc + j] = static_cast<float>(sum);
      }
    INFO("k=" << k);
    CHECK(count_outside_bound(t, 0.0f, unrounded) > t.m * t.n / 2);
    // and the kernel itself is inside it
    CHECK(count_outside_bound(t, 0.0f, t.run(0.0f)) == 0);
  }
}

TEST_CASE("gemm_bf16 gives the same bits on any thread count, split by rows or by columns", "[bf16]") {
  ThreadsGuard guard;
  // The last two are large enough that the AMX kernel, whose chunks are the largest (its
  // multiply-adds per second are), splits them too.
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{301, 70, 200}, {40, 333, 200}, {1000, 300, 500},
                         {100, 3000, 300}}) {
    for (Bf16Kernel kernel : kernels()) {
      if (k > 200 && kernel != Bf16Kernel::amx_bf16) continue;
      Case t(false, true, m, n, k, 11);
      set_num_threads(1);
      const std::vector<float> one = t.run(1.0f, with_kernel(kernel));
      for (int threads : {2, 3}) {
        set_num_threads(threads);
        INFO("m=" << m << " n=" << n << " threads=" << threads);
        REQUIRE(same_bits(t.run(1.0f, with_kernel(kernel)), one));
      }
      REQUIRE(count_outside_bound(t, 1.0f, one) == 0);
    }
  }
}

TEST_CASE("gemm_bf16 writes a C larger than L2 with the same bits on any thread count, aligned or not", "[bf16]") {
  // A C written once (beta 0, one k slice) and larger than L2 is written with non-temporal stores
  // by the kernels that have them (AMX), when its rows are 64-byte aligned; a thread's part of it
  // is streamed or not depending on its size. The same sums either way: the bits of one thread
  // on two and three, inside the bound, and the padding of unaligned rows untouched. Tall (split
  // by rows) and wide (split by columns), with A read along k or transposed.
  ThreadsGuard guard;
  struct FreeFloats {
    void operator()(float* p) const { std::free(p); }
  };
  const int64_t l2_floats = cpu_info().l2_bytes / static_cast<int64_t>(sizeof(float)), k = 32;
  const std::vector<Mnk> shapes{{3 * l2_floats / 1024 + 5, 1024, k},  // a ragged last tile of rows
                                {100, 3 * l2_floats / 100 + 7, k}};  // and of columns
  int seed = 900;
  for (const Mnk& s : shapes)
    for (bool ta : {false, true})
      for (int64_t pad : {0, 3}) {  // pad 3: rows not 64-byte aligned, so never streamed
        Case t(ta, true, s.m, s.n, s.k, static_cast<uint64_t>(seed++), pad);
        const Reference ref(t, 0.0f);
        const size_t bytes = (static_cast<size_t>(t.m * t.ldc) * sizeof(float) + 63) / 64 * 64;  // aligned_alloc's rule
        std::unique_ptr<float, FreeFloats> c(static_cast<float*>(std::aligned_alloc(64, bytes)));
        REQUIRE(c != nullptr);
        for (Bf16Kernel kernel : kernels()) {
          std::vector<float> one;
          for (int threads : {1, 2, 3}) {
            INFO("m=" << t.m << " n=" << t.n << " trans_a=" << ta << " pad=" << pad << " kernel="
                      << static_cast<int>(kernel) << " threads=" << threads);
            set_num_threads(threads);
            std::fill(c.get(), c.get() + t.m * t.ldc, std::numeric_limits<float>::quiet_NaN());
            gemm_bf16(ta, true, t.m, t.n, t.k, t.a.data(), t.lda, t.b.data(), t.ldb, 0.0f, c.get(), t.ldc,
                      with_kernel(kernel));
            const std::vector<float> got(c.get(), c.get() + t.m * t.ldc);
            if (threads == 1) {
              one = got;
              REQUIRE(count_outside_bound(t, ref, got, [](int64_t, int64_t) { return true; }) == 0);
              for (int64_t i = 0; i < t.m; ++i)
                for (int64_t j = t.n; j < t.ldc; ++j) REQUIRE(std::isnan(got[i * t.ldc + j]));
            } else {
              REQUIRE(same_bits(got, one));
            }
          }
        }
      }
}

TEST_CASE("a one-row gemm_bf16 has the bits of row 0 of the same product with more rows, cached weights or not",
          "[bf16]") {
  // m == 1 runs its own kernel over op(B) packed whole (a KV-cached generation step); m == 2 runs
  // the blocked tile kernel. Each output must sum the same pairs in the same order.
  ThreadsGuard guard;
  const int64_t deep = gemm_bf16_blocking(1, 40, int64_t(1) << 40, false).kc + 5;  // several k slices
  int seed = 500;
  for (Bf16Kernel kernel : kernels())
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 1}, {37, 5}, {65, 33}, {200, 67}, {40, deep}})
          for (float beta : {0.0f, 1.0f}) {
            INFO("kernel=" << static_cast<int>(kernel) << " trans_a=" << ta << " trans_b=" << tb << " n=" << n
                           << " k=" << k << " beta=" << beta);
            const Case two(ta, tb, 2, n, k, static_cast<uint64_t>(seed++), 3);
            const std::vector<float> rows2 = two.run(beta, with_kernel(kernel));
            Case one = two;  // row 0 of A (column 0 when stored transposed) and of C
            one.m = 1;
            const std::vector<float> row0(rows2.begin(), rows2.begin() + n);
            std::vector<float> got = one.run(beta, with_kernel(kernel));
            REQUIRE(same_bits(std::vector<float>(got.begin(), got.begin() + n), row0));
            {
              Bf16WeightCache cache;
              cache.add(one.b.data(), static_cast<int64_t>(one.b.size()));
              for (int pass = 0; pass < 2; ++pass) {  // packs, then reuses
                got = one.run(beta, with_kernel(kernel));
                REQUIRE(same_bits(std::vector<float>(got.begin(), got.begin() + n), row0));
              }
            }
          }
  // The split over threads (strips of columns) leaves the bits alone.
  for (Bf16Kernel kernel : kernels()) {
    const Case t(false, true, 1, 333, 200, 12);
    set_num_threads(1);
    const std::vector<float> serial = t.run(1.0f, with_kernel(kernel));
    for (int threads : {2, 3}) {
      set_num_threads(threads);
      REQUIRE(same_bits(t.run(1.0f, with_kernel(kernel)), serial));
    }
  }
}

TEST_CASE("Bf16WeightCache packs a registered weight once and ignores what it was not given", "[bf16]") {
  Case t(false, true, 1, 70, 50, 21);
  const std::vector<float> before = t.run(0.0f);
  Case other(false, true, 1, 70, 50, 22);
  {
    Bf16WeightCache cache;
    cache.add(t.b.data(), static_cast<int64_t>(t.b.size()));
    REQUIRE(same_bits(t.run(0.0f), before));  // packed here
    // The cache's contract is that registered floats do not change while it lives; changing them
    // shows that the packed copy, not B, is read from now on.
    for (float& x : t.b) x = -x;
    REQUIRE(same_bits(t.run(0.0f), before));
    // An unregistered B (another product) is rounded at the call, as always.
    const std::vector<float> other_now = other.run(0.0f);
    other.b[0] += 1.0f;
    REQUIRE_FALSE(same_bits(other.run(0.0f), other_now));
    // A B that only starts inside a registered range is not taken from it.
    Bf16WeightCache inner;
    inner.add(t.b.data(), 10);
    REQUIRE(Bf16WeightCache::active() == &inner);
    REQUIRE_FALSE(same_bits(t.run(0.0f), before));  // the innermost cache: B read as it is now
  }
  REQUIRE(Bf16WeightCache::active() == nullptr);
  const std::vector<float> after = t.run(0.0f);  // without a cache: the negated B
  for (size_t j = 0; j < 70; ++j) REQUIRE(after[j] == -before[j]);
}

TEST_CASE("gemm_bf16 with k = 0 leaves beta C", "[bf16]") {
  Case t(false, false, 5, 6, 0, 3);
  const std::vector<float> zero = t.run(0.0f), kept = t.run(1.0f);
  for (int64_t i = 0; i < t.m * t.n; ++i) {
    REQUIRE(zero[i] == 0.0f);
    REQUIRE(kept[i] == t.c[i]);
  }
}

TEST_CASE("gemm_bf16 propagates NaN and inf, and counts bf16 denormals as zero in both kernels", "[bf16]") {
  for (Bf16Kernel kernel : kernels()) {
    Case t(false, false, 4, 5, 6, 9);
    t.a[1 * t.lda + 2] = std::numeric_limits<float>::quiet_NaN();  // row 1 of C becomes NaN
    t.a[2 * t.lda + 3] = std::numeric_limits<float>::infinity();    // row 2: +-inf where b(3, j) != 0
    const std::vector<float> out = t.run(0.0f, with_kernel(kernel));
    for (int64_t j = 0; j < t.n; ++j) {
      CHECK(std::isnan(out[1 * t.ldc + j]));
      CHECK(std::isinf(out[2 * t.ldc + j]));
      CHECK(std::isfinite(out[0 * t.ldc + j]));
    }
    // bf16 denormal times a huge value: a product of 2^-130 x 2^100 in exact arithmetic, zero here
    // (VDPBF16PS's denormals-are-zero, which the emulated kernel reproduces).
    float tiny = std::ldexp(1.0f, -130), huge = std::ldexp(1.0f, 100), c = -1.0f;
    gemm_bf16(false, false, 1, 1, 1, &tiny, 1, &huge, 1, 0.0f, &c, 1, with_kernel(kernel));
    CHECK(c == 0.0f);
  }
  // The emulated kernel puts the thread's floating-point mode back as it found it.
  volatile float small = std::numeric_limits<float>::min();
  CHECK(small * 0.5f > 0.0f);  // a denormal result, not flushed
}

TEST_CASE("gemm_bf16 skips what a causal mask makes unneeded and gives the full product elsewhere", "[bf16]") {
  // Attention shapes per head: Tq queries, Tk keys, head_dim hd; causal: diagonal = Tk - Tq.
  for (auto [Tq, Tk] : {std::pair<int64_t, int64_t>{70, 70}, {50, 83}, {97, 97}}) {
    const int64_t hd = 20, d = Tk - Tq;
    for (Bf16Kernel kernel : kernels()) {
      INFO("Tq=" << Tq << " Tk=" << Tk << " kernel=" << static_cast<int>(kernel));
      GemmBf16Options opt = with_kernel(kernel);
      opt.diagonal = d;
      // scores = q k^T: only C(i, j) with j <= i + d is needed.
      {
        Case t(false, true, Tq, Tk, hd, 21);
        opt.skip = Bf16Skip::c_above;
        const std::vector<float> s = t.run(0.0f, opt);
        REQUIRE(count_outside_bound(t, 0.0f, s, [&](int64_t i, int64_t j) { return j <= i + d; }) == 0);
      }
      // y = p v, p zero right of the diagonal; NaN far right of it (past any chunk a tile's rows
      // reach) must not be read.
      {
        Case t(false, false, Tq, hd, Tk, 22);
        for (int64_t i = 0; i < Tq; ++i)
          for (int64_t j = 0; j < Tk; ++j)
            if (j > i + d) t.A(i, j) = j > i + d + 64 ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
        opt.skip = Bf16Skip::a_above;
        const std::vector<float> y = t.run(1.0f, opt);
        for (int64_t i = 0; i < Tq; ++i)  // the NaN stand in for zeros in the reference
          for (int64_t j = 0; j < Tk; ++j)
            if (j > i + d) t.A(i, j) = 0.0f;
        REQUIRE(count_outside_bound(t, 1.0f, y) == 0);
      }
      // dk = ds^T q: op(A)(j, i) = ds(i, j), zero where i < j - d; NaN far from it must not be read.
      {
        Case t(true, false, Tk, hd, Tq, 23);
        for (int64_t j = 0; j < Tk; ++j)
          for (int64_t i = 0; i < Tq; ++i)
            if (i < j - d) t.A(j, i) = i < j - d - 64 ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
        GemmBf16Options below = opt;
        below.skip = Bf16Skip::a_below;
        below.diagonal = -d;
        const std::vector<float> dk = t.run(0.0f, below);
        for (int64_t j = 0; j < Tk; ++j)
          for (int64_t i = 0; i < Tq; ++i)
            if (i < j - d) t.A(j, i) = 0.0f;
        REQUIRE(count_outside_bound(t, 0.0f, dk) == 0);
      }
    }
  }
}

TEST_CASE("gemm_bf16_batched over attention's heads equals one gemm_bf16 per head", "[bf16]") {
  ThreadsGuard guard;
  set_num_threads(2);
  // q and k are heads of one (B, T, 3C) projection, the scores (B, nh, T, T).
  const int64_t B = 2, T = 37, nh = 3, hd = 8, C = nh * hd;
  const std::vector<float> qkv = random_floats(static_cast<size_t>(B * T * 3 * C), 31);
  std::vector<float> batched(static_cast<size_t>(B * nh * T * T)), single(batched.size());
  const Bf16Operand q{qkv.data(), 3 * C, false, T * 3 * C, hd};
  const Bf16Operand kt{qkv.data() + C, 3 * C, true, T * 3 * C, hd};
  const Bf16Output s{batched.data(), T, nh * T * T, T * T};
  for (Bf16Kernel kernel : kernels()) {
    gemm_bf16_batched(B, nh, T, T, hd, q, kt, 0.0f, s, with_kernel(kernel));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < nh; ++h)
        gemm_bf16(false, true, T, T, hd, qkv.data() + b * T * 3 * C + h * hd, 3 * C,
                  qkv.data() + b * T * 3 * C + C + h * hd, 3 * C, 0.0f, single.data() + (b * nh + h) * T * T, T,
                  with_kernel(kernel));
    REQUIRE(same_bits(batched, single));
    // and one head against the reference
    Case t(false, true, T, T, hd, 0);
    for (int64_t i = 0; i < T; ++i)
      for (int64_t p = 0; p < hd; ++p) {
        t.A(i, p) = qkv[(1 * T + i) * 3 * C + 2 * hd + p];      // batch 1, head 2
        t.B(p, i) = qkv[(1 * T + i) * 3 * C + C + 2 * hd + p];
      }
    const std::vector<float> head(batched.begin() + (1 * nh + 2) * T * T, batched.begin() + (1 * nh + 3) * T * T);
    REQUIRE(count_outside_bound(t, 0.0f, head) == 0);
  }
}

TEST_CASE("gemm_bf16 refuses bad arguments with a heed::Error", "[bf16]") {
  std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64, 0.0f);
  CHECK_THROWS_AS(gemm_bf16(false, false, 2, 2, 2, a.data(), 2, b.data(), 2, 0.5f, c.data(), 2), Error);
  CHECK_THROWS_AS(gemm_bf16(false, false, -1, 2, 2, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2), Error);
  CHECK_THROWS_AS(gemm_bf16(false, false, 2, 2, 3, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2), Error);  // lda < k
  CHECK_THROWS_AS(gemm_bf16(true, false, 3, 2, 2, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2), Error);   // lda < m
  CHECK_THROWS_AS(gemm_bf16(false, true, 2, 2, 3, a.data(), 3, b.data(), 2, 0.0f, c.data(), 2), Error);   // ldb < k
  CHECK_THROWS_AS(gemm_bf16(false, false, 2, 3, 2, a.data(), 2, b.data(), 3, 0.0f, c.data(), 2), Error);  // ldc < n
  if (!cpu_info().avx512_bf16) {
    CHECK_THROWS_AS(gemm_bf16(false, false, 2, 2, 2, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2,
                              with_kernel(Bf16Kernel::avx512_bf16)),
                    Error);
  }
  if (!amx_ready()) {  // no AMX, or Linux did not grant it: asking for the kernel is an error, not a SIGILL
    CHECK_THROWS_AS(gemm_bf16(false, false, 2, 2, 2, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2,
                              with_kernel(Bf16Kernel::amx_bf16)),
                    Error);
    CHECK(bf16_kernel() != Bf16Kernel::amx_bf16);
  }
}

TEST_CASE("bf16_kernel runs AMX where the process may use it, else VDPBF16PS, else the emulated kernel", "[bf16]") {
  const Bf16Kernel chosen = bf16_kernel();
  if (amx_ready() && cpu_info().avx512bw) {
    CHECK(chosen == Bf16Kernel::amx_bf16);
  } else if (cpu_info().avx512_bf16 && cpu_info().avx512bw) {
    CHECK(chosen == Bf16Kernel::avx512_bf16);
  } else {
    CHECK(chosen == Bf16Kernel::emulated);
  }
  const std::vector<Bf16Kernel> here = bf16_kernels_here();
  CHECK(here.front() == Bf16Kernel::emulated);
  CHECK(std::find(here.begin(), here.end(), chosen) != here.end());
}

#ifdef HEED_AMX
TEST_CASE("AmxTiles hands LDTILECFG the whole 64-byte block: all eight tiles at 16 rows of 64 bytes", "[bf16]") {
  // GCC 12's _tile_loadconfig names only the block's first 8 bytes as read, and a build for
  // x86-64-v3 dropped the other stores: every AMX product then faulted (core/amx.h).
  if (!amx_ready()) {
    WARN("no AMX here (or not granted): the tile configuration not checked");
    return;
  }
  const detail::AmxTileConfig wanted = detail::full_tiles();
  {
    const detail::AmxTiles tiles;
    const detail::AmxTileConfig now = detail::AmxTiles::tile_config_now();
    CHECK(now.palette == 1);
    for (int t = 0; t < 8; ++t) {
      INFO("tile " << t);
      CHECK(now.bytes_per_row[t] == 64);
      CHECK(now.rows[t] == 16);
    }
    CHECK(std::memcmp(&now, &wanted, sizeof now) == 0);
  }
  CHECK(detail::AmxTiles::tile_config_now().palette == 0);  // released: the tiles are unconfigured
}
#endif
