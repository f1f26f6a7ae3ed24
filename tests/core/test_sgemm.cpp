// The fp32 product kernel (core/ops/sgemm.h, oneDNN's sgemm) on raw buffers: values against a
// float64 product with a rounding-error bound, every transpose, leading dimensions wider than the
// matrix, beta 0 over a C full of NaN and beta 1, and the same on one packed op(B) in pieces of
// rows (oneDNN's packed sgemm); and fp32 matmul's bits on any thread count,
// which its fixed pieces (core/ops/matmul.cpp) are for; and no signal handled during a call.
#include <catch2/catch.hpp>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/ops/sgemm.h"
#include "core/ops/sgemm_at_b.h"
#include "core/parallel.h"
#include "support/helpers.h"

namespace {

struct Case {
  int64_t m, n, k;
};

// A stored (possibly transposed) operand: op(X) is rows x cols, X is stored row-major with
// leading dimension ld >= its stored row length.
struct Operand {
  bool trans;
  int64_t rows, cols, ld;
  std::vector<float> data;
  float at(int64_t i, int64_t j) const { return trans ? data[j * ld + i] : data[i * ld + j]; }
};

Operand random_operand(bool trans, int64_t rows, int64_t cols, int64_t pad, std::mt19937& gen) {
  std::normal_distribution<float> normal;
  const int64_t stored_rows = trans ? cols : rows, stored_cols = trans ? rows : cols;
  Operand x{trans, rows, cols, stored_cols + pad, {}};
  x.data.assign(static_cast<size_t>(stored_rows * x.ld), std::numeric_limits<float>::quiet_NaN());  // padding: NaN
  for (int64_t r = 0; r < stored_rows; ++r)
    for (int64_t c = 0; c < stored_cols; ++c) x.data[r * x.ld + c] = normal(gen);
  return x;
}

void sgemm(const Operand& a, const Operand& b, float beta, float* c, int64_t ldc) {
  heed::detail::sgemm(a.trans, b.trans, a.rows, b.cols, a.cols, a.data.data(), a.ld, b.data.data(), b.ld, beta, c, ldc);
}

// C (m x ldc, the first n columns the product) after fill_c's start and a product: within float
// rounding of op(A) op(B) + beta C in float64, C's padding columns untouched (NaN).
std::vector<float> fill_c(int64_t m, int64_t n, int64_t ldc, float beta) {
  std::vector<float> c(static_cast<size_t>(m * ldc), std::numeric_limits<float>::quiet_NaN());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? std::nanf("") : 0.5f * static_cast<float>(i - j);
  return c;
}

void check_product(const Operand& a, const Operand& b, float beta, const std::vector<float>& before,
                   const std::vector<float>& c, int64_t ldc) {
  const int64_t m = a.rows, n = b.cols, k = a.cols;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double ref = beta == 0.0f ? 0.0 : before[i * ldc + j], magnitude = std::fabs(ref);
      for (int64_t p = 0; p < k; ++p) {
        const double term = static_cast<double>(a.at(i, p)) * b.at(p, j);
        ref += term;
        magnitude += std::fabs(term);
      }
      // Any order of k + 1 float additions: |error| <= (k + 1) u sum |terms| (u = 2^-24), plus
      // rounding the result.
      const double bound = (static_cast<double>(k) + 2.0) * 0x1p-24 * magnitude;
      INFO("m " << m << " n " << n << " k " << k << " ta " << a.trans << " tb " << b.trans << " beta " << beta << " at ("
                << i << ", " << j << ")");
      REQUIRE(std::fabs(c[i * ldc + j] - ref) <= bound);
    }
    for (int64_t j = n; j < ldc; ++j) REQUIRE(std::isnan(c[i * ldc + j]));  // C's padding untouched
  }
}

}  // namespace

TEST_CASE("fp32 products are within float rounding of the float64 product: every transpose, wide leading dims, beta 0 and 1",
          "[matmul][sgemm]") {
  std::mt19937 gen(11);
  for (const Case& s : {Case{37, 29, 53}, Case{64, 64, 128}, Case{5, 70, 1}, Case{130, 3, 200}}) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        const Operand a = random_operand(ta, s.m, s.k, 3, gen), b = random_operand(tb, s.k, s.n, 5, gen);
        const int64_t ldc = s.n + 2;
        for (const float beta : {0.0f, 1.0f}) {
          std::vector<float> c = fill_c(s.m, s.n, ldc, beta);
          const std::vector<float> before = c;
          sgemm(a, b, beta, c.data(), ldc);
          check_product(a, b, beta, before, c, ldc);
        }
      }
    }
  }
}

TEST_CASE("fp32 products on a packed op(B): within float rounding of the float64 product, in pieces of rows, "
          "beta 0 and 1",
          "[matmul][sgemm]") {
  if (!heed::detail::sgemm_packed_b_available()) {
    WARN("oneDNN's packed sgemm is not in use here (" << heed::detail::fp32_product_kernel() << "): nothing to check");
    return;
  }
  std::mt19937 gen(12);
  for (const Case& s : {Case{37, 29, 53}, Case{200, 96, 130}, Case{64, 1, 7}}) {
    for (const bool tb : {false, true}) {
      const Operand a = random_operand(false, s.m, s.k, 3, gen), b = random_operand(tb, s.k, s.n, 5, gen);
      const int64_t floats = heed::detail::sgemm_packed_b_floats(tb, s.m, s.n, s.k, a.ld, b.ld);
      REQUIRE(floats > 0);
      std::vector<float> packed(static_cast<size_t>(floats), std::numeric_limits<float>::quiet_NaN());
      heed::detail::sgemm_pack_b(tb, s.m, s.n, s.k, a.ld, b.data.data(), b.ld, packed.data());
      const int64_t ldc = s.n + 2;
      for (const float beta : {0.0f, 1.0f}) {
        std::vector<float> c = fill_c(s.m, s.n, ldc, beta);
        const std::vector<float> before = c;
        // Three pieces of rows, one packed copy: what matmul's pieces do.
        const int64_t cuts[] = {0, s.m / 3, s.m / 2, s.m};
        for (int p = 0; p < 3; ++p)
          if (cuts[p + 1] > cuts[p])
            heed::detail::sgemm_packed_b(cuts[p + 1] - cuts[p], s.n, s.k, a.data.data() + cuts[p] * a.ld, a.ld,
                                         packed.data(), b.ld, beta, c.data() + cuts[p] * ldc, ldc);
        check_product(a, b, beta, before, c, ldc);
      }
    }
  }
}

namespace {

// The bits of C's first n columns, row by row.
std::vector<float> product_columns(const std::vector<float>& c, int64_t m, int64_t n, int64_t ldc) {
  std::vector<float> out;
  for (int64_t i = 0; i < m; ++i) out.insert(out.end(), c.begin() + i * ldc, c.begin() + i * ldc + n);
  return out;
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("heed's A^T B kernel is within float rounding of the float64 product: edges of its tile, slices of k, "
          "wide leading dims, beta 0 and 1",
          "[matmul][sgemm]") {
  if (!heed::detail::sgemm_at_b_available()) {
    WARN("heed's A^T B kernel does not run here (no AVX-512F, or fp32 products on OpenBLAS): nothing to check");
    return;
  }
  std::mt19937 gen(13);
  // Rows of C under, at and past its 8-row tile, columns past its 48; k of one row, one slice and
  // several (a slice is 128 rows on a 48 KB L1).
  for (const Case& s : {Case{37, 29, 53}, Case{5, 70, 1}, Case{130, 3, 200}, Case{8, 48, 128}, Case{17, 100, 300},
                        Case{64, 96, 257}, Case{1, 1, 1}}) {
    const Operand a = random_operand(true, s.m, s.k, 3, gen), b = random_operand(false, s.k, s.n, 5, gen);
    const int64_t ldc = s.n + 2;
    for (const float beta : {0.0f, 1.0f}) {
      std::vector<float> c = fill_c(s.m, s.n, ldc, beta);
      const std::vector<float> before = c;
      heed::detail::sgemm_at_b(s.m, s.n, s.k, a.data.data(), a.ld, b.data.data(), b.ld, beta, c.data(), ldc);
      check_product(a, b, beta, before, c, ldc);
    }
  }
}

TEST_CASE("heed's A^T B kernel gives the same bits however C is cut, and on any thread count", "[matmul][sgemm]") {
  // Each element is one chain of fused multiply-adds over k in order (core/ops/sgemm_at_b.h), so
  // pieces of any shape, the packed-once path of many pieces and the threads leave every bit.
  if (!heed::detail::sgemm_at_b_available()) {
    WARN("heed's A^T B kernel does not run here (no AVX-512F, or fp32 products on OpenBLAS): nothing to check");
    return;
  }
  const int saved_threads = heed::num_threads();
  std::mt19937 gen(14);
  // Cut by rows with B packed once (Linear's c_attn dW at 512 rows), cut by columns with A packed
  // once, and one piece a core or fewer.
  for (const Case& s : {Case{1152, 384, 512}, Case{96, 1000, 2048}, Case{70, 50, 300}}) {
    const Operand a = random_operand(true, s.m, s.k, 1, gen), b = random_operand(false, s.k, s.n, 2, gen);
    const int64_t ldc = s.n + 1;
    for (const float beta : {0.0f, 1.0f}) {
      INFO(s.m << " x " << s.n << " x " << s.k << ", beta " << beta);
      const std::vector<float> start = fill_c(s.m, s.n, ldc, beta);
      std::vector<float> whole = start;
      heed::detail::sgemm_at_b_piece(0, s.m, 0, s.n, s.k, a.data.data(), a.ld, b.data.data(), b.ld, beta,
                                     whole.data(), ldc);
      const std::vector<float> expected = product_columns(whole, s.m, s.n, ldc);
      // Pieces cut off C's tiles: rows at 3 and 21, columns at 17 and 65.
      std::vector<float> cut = start;
      const int64_t rows[] = {0, std::min<int64_t>(3, s.m), std::min<int64_t>(21, s.m), s.m};
      const int64_t cols[] = {0, std::min<int64_t>(17, s.n), std::min<int64_t>(65, s.n), s.n};
      for (int r = 0; r < 3; ++r)
        for (int q = 0; q < 3; ++q)
          if (rows[r] < rows[r + 1] && cols[q] < cols[q + 1])
            heed::detail::sgemm_at_b_piece(rows[r], rows[r + 1], cols[q], cols[q + 1], s.k, a.data.data(), a.ld,
                                           b.data.data(), b.ld, beta, cut.data(), ldc);
      CHECK(same_bits(product_columns(cut, s.m, s.n, ldc), expected));
      for (const int threads : {1, 2, 3, 4, 7}) {
        heed::set_num_threads(threads);
        std::vector<float> c = start;
        heed::detail::sgemm_at_b(s.m, s.n, s.k, a.data.data(), a.ld, b.data.data(), b.ld, beta, c.data(), ldc);
        INFO(threads << " threads");
        CHECK(same_bits(product_columns(c, s.m, s.n, ldc), expected));
      }
    }
  }
  heed::set_num_threads(saved_threads);
}

TEST_CASE("heed's A^T B kernel cuts C by its longer side, finer than the cores where the shared copy fits 64 MB",
          "[matmul][sgemm]") {
  using heed::detail::sgemm_at_b_cut;
  if (!heed::detail::sgemm_at_b_available()) {
    WARN("heed's A^T B kernel does not run here (no AVX-512F, or fp32 products on OpenBLAS): nothing to check");
    return;
  }
  // small's c_fc dW on 2 cores: 8 pieces a core along C's 1 536 rows, x (4 096 x 384, 6 MB) packed once.
  const auto fc = sgemm_at_b_cut(1536, 384, 4096, 2);
  CHECK(fc.by_rows);
  CHECK(fc.pieces == 16);
  CHECK(fc.shared);
  // mlp c_proj's: cut along C's 1 536 columns, g packed once.
  const auto proj = sgemm_at_b_cut(384, 1536, 4096, 2);
  CHECK_FALSE(proj.by_rows);
  CHECK(proj.pieces == 16);
  CHECK(proj.shared);
  // The same product over 2^20 rows: x's copy would take 1.5 GB, so one piece a core, none shared.
  const auto big = sgemm_at_b_cut(1536, 384, int64_t{1} << 20, 2);
  CHECK(big.pieces == 2);
  CHECK_FALSE(big.shared);
  // Small products: one piece, or one a core; never more pieces than tiles along the cut side.
  CHECK(sgemm_at_b_cut(64, 64, 64, 2).pieces == 1);
  CHECK_FALSE(sgemm_at_b_cut(512, 128, 768, 2).shared);
  CHECK(sgemm_at_b_cut(16, 8, 1 << 22, 4).pieces == 2);
  // Pieces start on whole tiles (8 rows, 48 columns), in order, none empty, and end at C's edge.
  for (const auto& cut : {fc, proj, big, sgemm_at_b_cut(70, 50, 300, 2), sgemm_at_b_cut(100, 1000, 2048, 3)}) {
    INFO(cut.pieces << " pieces along " << cut.side << (cut.by_rows ? " rows" : " columns"));
    CHECK(cut.tile == (cut.by_rows ? 8 : 48));
    CHECK(cut.start(0) == 0);
    CHECK(cut.start(cut.pieces) == cut.side);
    for (int64_t p = 0; p < cut.pieces; ++p) {
      CHECK(cut.start(p) % cut.tile == 0);
      CHECK(cut.start(p) < cut.start(p + 1));
    }
  }
}

TEST_CASE("fp32 products refuse a leading dimension shorter than the matrix's row", "[matmul][sgemm]") {
  std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64, 0.0f);
  REQUIRE_THROWS(heed::detail::sgemm(false, false, 4, 4, 4, a.data(), 3, b.data(), 4, 0.0f, c.data(), 4));
}

TEST_CASE("matmul gives the same bits on 1, 2, 3, 4 and 7 threads, thin and wide products included", "[matmul][parallel]") {
  // Every BLAS product is cut into pieces fixed by its shape and the cores (core/tuning.h,
  // kProductPieceMacs), on oneDNN and on OpenBLAS (this case runs again as "openblas: ..."), in
  // float32 and float64 (always OpenBLAS). Shapes whose rows are each above the GEMM grain (a split
  // by the thread count would make one-row pieces), with fewer rows than two pieces, with more
  // columns than rows, Linear's, one row (gemv), and ones whose OpenBLAS pieces of a third sum in
  // another order than the whole (40 x 700 x 9, 100 x 1024 x 1024 in float64: measured on its
  // SkylakeX kernels).
  const int saved_threads = heed::num_threads();
  struct Product {
    heed::Shape a, b;
  };
  const std::vector<Product> products = {{{100, 1024}, {1024, 1024}}, {{20, 2048}, {2048, 512}}, {{33, 64}, {64, 3000}},
                                         {{768, 128}, {128, 512}},    {{40, 700}, {700, 9}},      {{1, 1536}, {1536, 1024}},
                                         {{200, 50}, {50, 10}},       {{1, 384}, {384, 65}}};
  for (const heed::DType dtype : {heed::DType::f32, heed::DType::f64}) {
    for (const Product& p : products) {
      heed::Generator gen(7);
      const heed::Tensor a = heed::Tensor::randn(p.a, gen).to(dtype), b = heed::Tensor::randn(p.b, gen).to(dtype);
      // Each operand as stored, and as the transpose of a stored matrix (read through the kernel's
      // transpose flag): x W^T, Linear's forward, is the latter for b.
      const heed::Tensor at = heed::transpose(heed::transpose(a, 0, 1).contiguous(), 0, 1);
      const heed::Tensor bt = heed::transpose(heed::transpose(b, 0, 1).contiguous(), 0, 1);
      for (const auto& [x, y] : {std::pair{a, b}, std::pair{a, bt}, std::pair{at, b}}) {
        std::vector<unsigned char> one;
        for (const int threads : {1, 2, 3, 4, 7}) {
          heed::set_num_threads(threads);
          const heed::Tensor c = heed::matmul(x, y);
          std::vector<unsigned char> got(static_cast<size_t>(c.numel()) * heed::dtype_size(dtype));
          if (dtype == heed::DType::f32) {
            const std::vector<float> v = c.to_vector<float>();
            std::memcpy(got.data(), v.data(), got.size());
          } else {
            const std::vector<double> v = c.to_vector<double>();
            std::memcpy(got.data(), v.data(), got.size());
          }
          if (threads == 1) one = got;
          INFO(heed::dtype_name(dtype) << " " << heed::to_string(p.a) << " @ " << heed::to_string(p.b) << " (a transposed "
                                       << !x.is_contiguous() << ", b " << !y.is_contiguous() << ") on " << threads
                                       << " threads, " << heed::detail::fp32_product_kernel());
          REQUIRE(got == one);
        }
      }
    }
  }
  heed::set_num_threads(saved_threads);
}

TEST_CASE("fp32 products leave OpenBLAS where its kernels miss the CPU's AVX2 and FMA", "[matmul][sgemm]") {
  using heed::detail::fp32_products_on_onednn;
  using heed::detail::openblas_kernels_fit_cpu;
  // Debian 12's OpenBLAS 0.3.21 names an Emerald Rapids Xeon (family 6 model 207) "Prescott".
  for (const char* older : {"Prescott", "PRESCOTT", "Core2", "Nehalem", "Sandybridge", "Barcelona", "Bulldozer", ""}) {
    INFO(older);
    CHECK_FALSE(openblas_kernels_fit_cpu(older, true, true));
    CHECK(openblas_kernels_fit_cpu(older, false, false));  // an SSE-only CPU: nothing better to run
    CHECK(openblas_kernels_fit_cpu(older, true, false));   // no FMA: OpenBLAS's FMA kernels would not run either
  }
  // Mixed case from a build that picks kernels at load time, capitals from one built for a target.
  for (const char* fits : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "HASWELL", "SKYLAKEX", "ZEN"}) {
    INFO(fits);
    CHECK(openblas_kernels_fit_cpu(fits, true, true));
  }
  // The rule: oneDNN with AVX-512, or where OpenBLAS's kernels miss the CPU; OpenBLAS when asked.
  for (const char* choice : {"", "onednn"}) {
    INFO("HEED_FP32_PRODUCTS=" << choice);
    CHECK(fp32_products_on_onednn(choice, true, true));
    CHECK(fp32_products_on_onednn(choice, true, false));
    CHECK(fp32_products_on_onednn(choice, false, false));  // an AVX2 CPU newer than OpenBLAS's table
    CHECK_FALSE(fp32_products_on_onednn(choice, false, true));  // an AVX2 CPU OpenBLAS knows
  }
  for (const bool avx512f : {false, true})
    for (const bool fits : {false, true}) CHECK_FALSE(fp32_products_on_onednn("openblas", avx512f, fits));
  CHECK_THROWS_AS(fp32_products_on_onednn("mkl", true, true), heed::Error);
}

TEST_CASE("fp32 products leave the calling thread's OpenMP team size as they found it", "[matmul][sgemm]") {
  // oneDNN runs on OpenMP; heed asks it for one thread per call (its own pool splits products). A
  // user's OpenMP code on the same thread must not find its team size changed afterwards.
  auto set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  auto get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  if (!set || !get) {
    WARN("no OpenMP runtime in this process: nothing to check");
    return;
  }
  const int before = get();
  set(3);
  heed::Generator gen(3);
  const heed::Tensor a = heed::Tensor::randn({64, 96}, gen), b = heed::Tensor::randn({96, 80}, gen);
  const heed::Tensor c = heed::matmul(a, b);
  CHECK(get() == 3);
  set(before);
  REQUIRE(c.size(0) == 64);
}

#if defined(__x86_64__) && defined(__linux__)  // reads the interrupted rsp from the signal context
namespace {

// The test's thread and its stack; how many SIGALRMs interrupted that thread, and how many of
// those found its rsp off its stack. (SIGALRM goes to the process: while the test's thread blocks
// it, another thread, a worker of OpenBLAS's or heed's pool, may take it.)
pthread_t g_thread;
uintptr_t g_stack_lo = 0, g_stack_hi = 0;
volatile sig_atomic_t g_alarms = 0, g_alarms_off_stack = 0;

void on_alarm(int, siginfo_t*, void* context) {
  if (!pthread_equal(pthread_self(), g_thread)) return;
  g_alarms = g_alarms + 1;
  const auto rsp = static_cast<uintptr_t>(static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RSP]);
  if (rsp < g_stack_lo || rsp >= g_stack_hi) g_alarms_off_stack = g_alarms_off_stack + 1;
}

}  // namespace

TEST_CASE("fp32 products handle no signal while oneDNN's kernel has moved the stack into the heap", "[matmul][sgemm]") {
  // oneDNN 2.6's gemm kernel points rsp at a workspace it mallocs when the summed axis is longer
  // than its stack buffer (84 with AVX-512); a signal handled then has its frame written below
  // that workspace, into the heap (core/ops/sgemm.cpp, NoSignalsDuringCall). A SIGALRM every 50 us
  // during products with k = 88 and 300 must always find the thread's rsp on its own stack. The
  // handler runs on an alternate stack and only looks at the rsp it interrupted, so this test
  // corrupts nothing when it fails.
  pthread_attr_t attr;
  REQUIRE(pthread_getattr_np(pthread_self(), &attr) == 0);
  void* lo = nullptr;
  size_t size = 0;
  REQUIRE(pthread_attr_getstack(&attr, &lo, &size) == 0);
  pthread_attr_destroy(&attr);
  g_thread = pthread_self();
  g_stack_lo = reinterpret_cast<uintptr_t>(lo);
  g_stack_hi = g_stack_lo + size;
  g_alarms = 0;
  g_alarms_off_stack = 0;

  std::vector<char> alt_stack(1 << 16);
  stack_t alt{}, saved_alt{};
  alt.ss_sp = alt_stack.data();
  alt.ss_size = alt_stack.size();
  REQUIRE(sigaltstack(&alt, &saved_alt) == 0);
  struct sigaction sa {}, saved_action {};
  sa.sa_sigaction = on_alarm;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  REQUIRE(sigaction(SIGALRM, &sa, &saved_action) == 0);
  std::mt19937 gen(5);
  // seq2seq's dW = g^T x that crashed (98 x 16 x 88, A transposed), and one with a longer k
  const Operand a1 = random_operand(true, 98, 88, 0, gen), b1 = random_operand(false, 88, 16, 0, gen);
  const Operand a2 = random_operand(false, 48, 300, 0, gen), b2 = random_operand(false, 300, 64, 0, gen);
  std::vector<float> c1(98 * 16), c2(48 * 64);
  auto products = [&] {
    sgemm(a1, b1, 0.0f, c1.data(), 16);
    sgemm(a2, b2, 0.0f, c2.data(), 64);
  };
  products();  // oneDNN generates its kernels on the first call: the alarms are for the products

  const itimerval every{{0, 50}, {0, 50}}, off{};
  itimerval saved_timer{};
  REQUIRE(setitimer(ITIMER_REAL, &every, &saved_timer) == 0);
  int rounds = 0;
  while (rounds < 20000 && g_alarms < 500) {
    products();
    ++rounds;
  }

  setitimer(ITIMER_REAL, &off, nullptr);  // a pending SIGALRM is handled on return, by on_alarm
  // Ignore first: a worker thread may still hold an alarm, which the default action would turn
  // into the end of the test binary.
  signal(SIGALRM, SIG_IGN);
  sigaction(SIGALRM, &saved_action, nullptr);
  setitimer(ITIMER_REAL, &saved_timer, nullptr);
  sigaltstack(&saved_alt, nullptr);
  INFO(g_alarms << " SIGALRMs on the test's thread during " << rounds << " rounds of products");
  CHECK(g_alarms > 0);
  REQUIRE(g_alarms_off_stack == 0);
}
#endif  // x86-64 Linux

TEST_CASE("fp32 products give the calling thread its own signal mask back", "[matmul][sgemm]") {
  // sgemm blocks every signal during oneDNN's call (core/ops/sgemm.cpp); what the caller had
  // blocked before must stay blocked after, and nothing more.
  sigset_t mine, before, after;
  sigemptyset(&mine);
  sigaddset(&mine, SIGUSR1);
  REQUIRE(pthread_sigmask(SIG_BLOCK, &mine, &before) == 0);
  std::vector<float> a(64 * 96, 0.5f), b(96 * 64, 0.25f), c(64 * 64, 0.0f);
  heed::detail::sgemm(false, false, 64, 64, 96, a.data(), 96, b.data(), 64, 0.0f, c.data(), 64);
  REQUIRE(pthread_sigmask(SIG_SETMASK, &before, &after) == 0);
  CHECK(sigismember(&after, SIGUSR1) == 1);
  CHECK(sigismember(&after, SIGINT) == sigismember(&before, SIGINT));
  CHECK(sigismember(&after, SIGTERM) == sigismember(&before, SIGTERM));
  CHECK(c[0] == 0.5f * 0.25f * 96);
}
