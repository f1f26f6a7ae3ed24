// Matrix products: matmul (2-D and batched, with NumPy-broadcast batch axes) and linear (PyTorch's
// F.linear), each forward followed by its backward. Products run on OpenBLAS's cblas_?gemm / ?gemv;
// float ones on oneDNN's sgemm instead on CPUs with AVX-512 and where OpenBLAS's kernels do not
// fit the CPU (unless HEED_FP32_PRODUCTS=openblas; core/ops/sgemm.h).
//
// Nothing is copied when the last two axes of an operand are a row-major matrix with a leading
// dimension or the transpose of one: the kernel reads it in place through its transpose flag and
// lda/ldb. Batch axes are walked with per-operand strides (0 where an operand broadcasts), and the
// gradient of a broadcast operand is summed by gemm itself (beta = 1 on repeat visits).
// <cblas.h> lives in this file and core/parallel.cpp only: it clashes with xtensor-blas
// (docs/platform.md, which also says how OpenBLAS picks its kernels). Under AutocastBF16
// (core/autocast.h) float products run gemm_bf16 instead; the precision is read when the op is
// called and captured for its backward.
#include <cblas.h>

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/cpu.h"
#include "core/ops.h"
#include "core/ops/pack_buffer.h"
#include "core/ops/sgemm.h"
#include "core/ops/sgemm_at_b.h"
#include "core/ops/simd_rows.h"
#include "core/parallel.h"
#include "core/tuning.h"

namespace heed {
namespace {

// One gemm operand as BLAS reads it: a rows x cols matrix per batch, element (i, j) of batch 0 at
// data + offset + i*ld + j (stored row-major) or data + offset + i + j*ld (stored transposed).
// bstrides has one entry per axis of the loop's batch shape, 0 where the operand broadcasts.
struct Mat {
  void* data = nullptr;  // storage base (the owning Tensor is kept alive by the caller)
  int64_t offset = 0;
  Shape bstrides;
  int64_t rows = 0, cols = 0;
  bool trans = false;
  int64_t ld = 1;

  Mat t() const {  // the transpose is a flag: no data moves
    Mat m = *this;
    std::swap(m.rows, m.cols);
    m.trans = !trans;
    return m;
  }
  template <class T>
  T* ptr() const { return static_cast<T*>(data) + offset; }
};

// The bf16 kernel a float product runs (autocast_bf16() when its op was called), or nullopt: BLAS.
using Bf16 = std::optional<Bf16Kernel>;

using Layout = std::optional<std::pair<bool, int64_t>>;  // (trans, ld)

// How BLAS can read a rows x cols matrix with strides (srow, scol) in place, or nullopt when it
// is neither row-major nor transposed with a leading dimension (then it must be copied).
Layout blas_layout(int64_t rows, int64_t cols, int64_t srow, int64_t scol) {
  // A stride along a dim of size 1 is never followed, so it constrains nothing.
  const bool row1 = rows <= 1, col1 = cols <= 1;
  const int64_t min_ld_rm = std::max<int64_t>(cols, 1), min_ld_tr = std::max<int64_t>(rows, 1);
  if ((col1 || scol == 1) && (row1 || srow >= min_ld_rm)) return std::pair{false, row1 ? min_ld_rm : srow};
  if ((row1 || srow == 1) && (col1 || scol >= min_ld_tr)) return std::pair{true, col1 ? min_ld_tr : scol};
  return std::nullopt;
}

// t's batch strides over the loop batch shape (right-aligned; 0 on broadcast axes).
Shape batch_strides(const Tensor& t, const Shape& batch) {
  if (batch.empty()) return {};  // a single product (linear), whatever t's rank
  const size_t tb = t.shape().size() - 2, lead = batch.size() - tb;
  Shape st(batch.size(), 0);
  for (size_t i = 0; i < tb; ++i) st[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  return st;
}

Mat make_mat(const Tensor& t, const Shape& batch, int64_t rows, int64_t cols, const Layout& layout) {
  Mat m;
  m.data = t.storage()->data();
  m.offset = t.offset();
  m.bstrides = batch_strides(t, batch);
  m.rows = rows;
  m.cols = cols;
  m.trans = layout ? layout->first : false;
  m.ld = layout ? layout->second : std::max<int64_t>(cols, 1);  // empty matrices: never read
  return m;
}

// The last two axes of `t` as a gemm operand over `batch`. `used` receives t itself or, when BLAS
// cannot read t in place, a contiguous copy made outside autograd; keep it alive while the Mat is used.
Mat operand(const Tensor& t, const Shape& batch, Tensor& used) {
  const size_t nd = t.shape().size();
  const int64_t rows = t.shape()[nd - 2], cols = t.shape()[nd - 1];
  used = t;
  Layout layout = blas_layout(rows, cols, t.strides()[nd - 2], t.strides()[nd - 1]);
  if (!layout && rows > 0 && cols > 0) {
    used = t.detach().contiguous();
    layout = blas_layout(rows, cols, used.strides()[nd - 2], used.strides()[nd - 1]);
  }
  return make_mat(used, batch, rows, cols, layout);
}

// x (..., cols) as one matrix with the leading axes folded into rows, read in place when those
// axes step through evenly spaced rows (any contiguous x, or a slice of one), else copied.
Mat folded_operand(const Tensor& x, int64_t rows, Tensor& used) {
  auto layout_of = [rows](const Tensor& t) -> Layout {
    const size_t nd = t.shape().size();
    const int64_t cols = t.shape()[nd - 1];
    int64_t srow = std::max<int64_t>(cols, 1), expect = -1;
    for (size_t d = nd - 1; d-- > 0;) {
      if (t.shape()[d] == 1) continue;
      if (expect < 0) {
        srow = t.strides()[d];
      } else if (t.strides()[d] != expect) {
        return std::nullopt;
      }
      expect = t.strides()[d] * t.shape()[d];
    }
    return blas_layout(rows, cols, srow, t.strides()[nd - 1]);
  };
  const int64_t cols = x.shape().back();
  used = x;
  Layout layout = layout_of(x);
  if (!layout && rows > 0 && cols > 0) {
    used = x.detach().contiguous();
    layout = layout_of(used);
  }
  return make_mat(used, {}, rows, cols, layout);
}

// A fresh contiguous tensor's last two axes as a gemm output over `batch` (0 strides where the
// tensor broadcasts: those products are summed into it).
Mat output_mat(const Tensor& t, const Shape& batch) {
  const size_t nd = t.shape().size();
  return make_mat(t, batch, t.shape()[nd - 2], t.shape()[nd - 1], std::pair{false, std::max<int64_t>(t.shape()[nd - 1], 1)});
}

// One product C = op(A) @ op(B) + beta C (m x n x k, row-major, m, n, k >= 1) on a BLAS: oneDNN's
// sgemm (one-row pieces included), or OpenBLAS's sgemm or dgemm, or its gemv for a one-row piece. The kernels run single-threaded
// (core/parallel.cpp, core/ops/sgemm.cpp); heed's pool runs the pieces, cut along the longer side
// of C. A BLAS's bits for an element of C depend on the piece of C a call covers (oneDNN's and
// OpenBLAS's, gemv's too: docs/platform.md), so the pieces follow from the product's shape and
// max_pieces, never from the thread count (core/tuning.h, kProductPieceMacs).
template <class T>
struct BlasProduct {
  bool ta, tb;
  int64_t m, n, k;
  const T* a;
  int64_t lda;
  const T* b;
  int64_t ldb;
  T beta;
  T* c;
  int64_t ldc;
  bool by_rows = true;
  int64_t side = 0, pieces = 1;

  BlasProduct(bool ta_, bool tb_, int64_t m_, int64_t n_, int64_t k_, const T* a_, int64_t lda_, const T* b_,
              int64_t ldb_, T beta_, T* c_, int64_t ldc_, int64_t max_pieces)
      : ta(ta_), tb(tb_), m(m_), n(n_), k(k_), a(a_), lda(lda_), b(b_), ldb(ldb_), beta(beta_), c(c_), ldc(ldc_) {
    constexpr int64_t kMax = std::numeric_limits<blasint>::max();
    HEED_CHECK(m <= kMax && n <= kMax && k <= kMax && lda <= kMax && ldb <= kMax && ldc <= kMax,
               "matmul: a ", m, " x ", k, " x ", n, " product (leading dims ", lda, ", ", ldb, ", ", ldc,
               ") exceeds BLAS's 32-bit sizes");
    HEED_CHECK(m > 0 && n > 0 && k > 0, "BlasProduct: an empty ", m, " x ", k, " x ", n, " product (gemm handles those)");
    by_rows = m >= n;
    side = by_rows ? m : n;
    const int64_t per_line = by_rows ? n * k : m * k;
    const int64_t piece_macs = m == 1 ? kRowProductPieceMacs : kProductPieceMacs;  // one row streams op(B)
    const int64_t lines = std::max(kProductMinPiece, (piece_macs + per_line - 1) / per_line);
    pieces = std::clamp<int64_t>(side / lines, 1, std::max<int64_t>(max_pieces, 1));
  }

  void run_piece(int64_t p) const {
    const int64_t s0 = side * p / pieces, s1 = side * (p + 1) / pieces;
    if (by_rows) {
      call(s0, s1, 0, n);
    } else {
      call(0, m, s0, s1);
    }
  }

 private:
  // Rows [m0, m1) of C come from rows of op(A), columns [n0, n1) from columns of op(B).
  void call(int64_t m0, int64_t m1, int64_t n0, int64_t n1) const {
    const T* pa = ta ? a + m0 : a + m0 * lda;
    const T* pb = tb ? b + n0 * ldb : b + n0;
    T* pc = c + m0 * ldc + n0;
    if constexpr (std::is_same_v<T, float>) {
      if (detail::sgemm_on_onednn()) {
        // One row too (x W, or a transposed x: one-row x W^T has its own kernel, gemm below):
        // oneDNN's sgemm takes its own gemv path then. On an Emerald Rapids Xeon it ran x W 1.07-2.9x
        // faster than OpenBLAS's sgemv on its AVX-512 kernels from 128 x 512 on, 0.7x at k = 65
        // (0.7 us more); not measured on other CPUs (docs/performance.md, "A CPU newer than
        // OpenBLAS").
        detail::sgemm(ta, tb, m1 - m0, n1 - n0, k, pa, lda, pb, ldb, beta, pc, ldc);
        return;
      }
    }
    // OpenBLAS: cblas's types.
    const auto opa = ta ? CblasTrans : CblasNoTrans, opb = tb ? CblasTrans : CblasNoTrans;
    const auto K = static_cast<blasint>(k);
    const auto LDA = static_cast<blasint>(lda), LDB = static_cast<blasint>(ldb), LDC = static_cast<blasint>(ldc);
    const auto M = static_cast<blasint>(m1 - m0), N = static_cast<blasint>(n1 - n0);
    if (M == 1) {
      // One row of C (a KV-cached generation step, batch 1): a matrix-vector product. OpenBLAS
      // 0.3.21's gemm packs all of op(B) even for one row (a 1 x 384 x 1152 product spent most of
      // its time copying the weight), where gemv streams it once. c = op(B)^T a, with a the row
      // of op(A) (strided when A is transposed).
      const auto opv = tb ? CblasNoTrans : CblasTrans;
      const auto rows = static_cast<blasint>(tb ? n1 - n0 : k), cols = static_cast<blasint>(tb ? k : n1 - n0);
      const auto inc = static_cast<blasint>(ta ? lda : 1);
      // gemv scales y by beta first; some OpenBLAS versions multiply (0 x NaN = NaN) where gemm
      // ignores C when beta is 0: a fresh output may hold any bits.
      if (beta == T(0)) std::fill(pc, pc + (n1 - n0), T(0));
      if constexpr (std::is_same_v<T, float>) {
        cblas_sgemv(CblasRowMajor, opv, rows, cols, 1.0f, pb, LDB, pa, inc, beta, pc, 1);
      } else {
        cblas_dgemv(CblasRowMajor, opv, rows, cols, 1.0, pb, LDB, pa, inc, beta, pc, 1);
      }
      return;
    }
    if constexpr (std::is_same_v<T, float>) {
      cblas_sgemm(CblasRowMajor, opa, opb, M, N, K, 1.0f, pa, LDA, pb, LDB, beta, pc, LDC);
    } else {
      cblas_dgemm(CblasRowMajor, opa, opb, M, N, K, 1.0, pa, LDA, pb, LDB, beta, pc, LDC);
    }
  }
};

// C = A @ op(B) + beta C with A not transposed (Linear's forward and dx; the caller leaves the
// weight gradient, whose A is transposed, to BlasProduct: oneDNN reads both operands in place
// there) on oneDNN, with op(B) packed once and shared by pieces of rows of C: more pieces than
// cores (kPackedProductPieceMacs, core/tuning.h), each its own chunk of the pool, so the threads
// share them out as they come free and a core the host or the OS slows runs fewer. Cut so finely
// through BlasProduct, each piece's call would pack op(B) again. The pieces follow from the shape
// and the cores, as BlasProduct's. Returns false, having done nothing, where the product is too
// small for two pieces a core or oneDNN's packed sgemm is missing or declines.
bool packed_b_product(bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                      int64_t ldb, float beta, float* c, int64_t ldc) {
  if (!detail::sgemm_packed_b_available()) return false;
  const int64_t cores = cpu_info().cores;
  const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const int64_t per_core_pieces = std::min(packed_pieces_per_core(macs, cores), m / (kProductMinPiece * cores));
  if (per_core_pieces < 2) return false;
  const int64_t floats = detail::sgemm_packed_b_floats(tb, m, n, k, lda, ldb);
  if (floats == 0) return false;
  // As large as the largest op(B) packed on this thread, a weight matrix's size.
  thread_local detail::PackBuffer<float> buffer;
  float* packed = buffer.get(floats);
  detail::sgemm_pack_b(tb, m, n, k, lda, b, ldb, packed);
  const int64_t pieces = per_core_pieces * cores;
  parallel_for_each(pieces, [&](int64_t p) {
    const int64_t r0 = m * p / pieces, r1 = m * (p + 1) / pieces;
    detail::sgemm_packed_b(r1 - r0, n, k, a + r0 * lda, lda, packed, ldb, beta, c + r0 * ldc, ldc);
  });
  return true;
}

// C = op(A) @ op(B) + beta C for a product whose sizes are all >= 1, on a BLAS, cut into the
// pieces of at most max_pieces (see BlasProduct).
template <class T>
BlasProduct<T> blas_product(const Mat& A, const Mat& B, const Mat& C, T beta, int64_t max_pieces) {
  return BlasProduct<T>(A.trans, B.trans, C.rows, C.cols, A.cols, A.ptr<T>(), A.ld, B.ptr<T>(), B.ld, beta, C.ptr<T>(),
                        C.ld, max_pieces);
}

// Runs every piece of the given products as one job of the pool: a thread claims a run of them
// and runs them one after the other (inside another job's chunk, all of them inline).
template <class T>
void run_pieces(std::initializer_list<const BlasProduct<T>*> products) {
  int64_t total = 0;
  for (const BlasProduct<T>* product : products) total += product->pieces;
  parallel_for(total, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      int64_t local = i;
      for (const BlasProduct<T>* product : products) {
        if (local < product->pieces) {
          product->run_piece(local);
          break;
        }
        local -= product->pieces;
      }
    }
  });
}

// C = op(A) @ op(B) + beta C for one m x n x k product, row-major.
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc, Bf16 bf16 = std::nullopt) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum; OpenBLAS versions disagree on whether k == 0 still scales C
    if (beta == T(0))
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (bf16) return gemm_bf16(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc, {.kernel = *bf16});  // splits itself
  }
  if constexpr (std::is_same_v<T, float>) {
    if (m == 1 && tb) {
      // One row times a transposed row-major B (Linear's x W^T at a KV-cached generation step):
      // each of C's n elements is a dot product with one contiguous row of B, which streams B
      // once from memory. OpenBLAS 0.3.21's sgemv (its 4-row kernel) reads it at about half the
      // rate one sequential row at a time does on a Zen 4 core (16 vs 33-36 GB/s over the small
      // config's 42 MB of weights). Each element is one thread's sum: the bits do not depend on
      // the split.
      std::vector<T> row;
      const T* x = a;
      if (ta) {  // op(A)'s one row is A's column 0: gather it
        row.resize(static_cast<size_t>(k));
        for (int64_t i = 0; i < k; ++i) row[i] = a[i * lda];
        x = row.data();
      }
      parallel_for(n, std::max<int64_t>(1, tuning().elementwise_grain / k), [&](int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j) {
          const T dot = detail::row_dot_streamed(b + j * ldb, x, k);
          c[j] = beta == T(0) ? dot : dot + beta * c[j];
        }
      });
      return;
    }
  }
  if constexpr (std::is_same_v<T, float>) {
    if (!ta && packed_b_product(tb, m, n, k, a, lda, b, ldb, beta, c, ldc)) return;
    // A weight gradient g^T x: heed's own kernel where oneDNN's reads a 1 KB-aligned stride badly.
    if (ta && !tb && detail::sgemm_at_b_suits(m, n, k, lda, ldb))
      return detail::sgemm_at_b(m, n, k, a, lda, b, ldb, beta, c, ldc);  // splits itself
  }
  const BlasProduct<T> product(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc, cpu_info().cores);
  run_pieces<T>({&product});
}

// C = op(A) @ op(B) + beta C for batch 0 of each operand.
template <class T>
void gemm(const Mat& A, const Mat& B, const Mat& C, T beta, Bf16 bf16) {
  gemm<T>(A.trans, B.trans, C.rows, C.cols, A.cols, A.ptr<T>(), A.ld, B.ptr<T>(), B.ld, beta, C.ptr<T>(), C.ld, bf16);
}

// C[i] = op(A[i]) @ op(B[i]) for every index i of `batch`. Where C has stride 0 along a batch
// axis (the gradient of a broadcast operand) the products along it are summed into one matrix:
// its first visit writes (beta 0), later ones accumulate (beta 1). Does nothing for an empty batch.
template <class T>
void batched_gemm(const Shape& batch, const Mat& A, const Mat& B, const Mat& C, Bf16 bf16) {
  const int64_t m = C.rows, n = C.cols, k = A.cols;
  int64_t nb = 1;
  std::vector<size_t> axes;  // the batch axes longer than 1, the only ones that move pointers
  for (size_t d = 0; d < batch.size(); ++d) {
    nb *= batch[d];
    if (batch[d] > 1) axes.push_back(d);
  }
  if (nb == 0 || m == 0 || n == 0) return;
  if (axes.empty()) return gemm<T>(A, B, C, T(0), bf16);

  // Do the strides continue a matrix's rows across the batch axes (batch i starts where i-1 ended)?
  auto continues = [&](const Shape& st, int64_t inner) {
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
      if (st[*it] != inner) return false;
      inner *= batch[*it];
    }
    return true;
  };
  auto broadcast = [&](const Shape& st) {
    return std::all_of(axes.begin(), axes.end(), [&](size_t d) { return st[d] == 0; });
  };
  // One big gemm beats many small ones. (B, T, C) @ (C, D): the batches are more rows of A and C.
  if (broadcast(B.bstrides) && !A.trans && continues(A.bstrides, m * A.ld) && continues(C.bstrides, m * C.ld))
    return gemm<T>(false, B.trans, nb * m, n, k, A.ptr<T>(), A.ld, B.ptr<T>(), B.ld, T(0), C.ptr<T>(), C.ld, bf16);
  // Its weight gradient, sum_i A[i]^T G[i]: the batches are more of the summed (k) axis.
  if (broadcast(C.bstrides) && A.trans && !B.trans && continues(A.bstrides, k * A.ld) &&
      continues(B.bstrides, k * B.ld))
    return gemm<T>(true, false, m, n, nb * k, A.ptr<T>(), A.ld, B.ptr<T>(), B.ld, T(0), C.ptr<T>(), C.ld, bf16);

  const T* pa = A.ptr<T>();
  const T* pb = B.ptr<T>();
  T* pc = C.ptr<T>();
  std::vector<int64_t> idx(batch.size(), 0);
  int64_t oa = 0, ob = 0, oc = 0;
  for (int64_t it = 0; it < nb; ++it) {
    // C's matrix is visited first when every index along C's broadcast axes is 0.
    const bool first = std::all_of(axes.begin(), axes.end(), [&](size_t d) { return C.bstrides[d] != 0 || idx[d] == 0; });
    gemm<T>(A.trans, B.trans, m, n, k, pa + oa, A.ld, pb + ob, B.ld, first ? T(0) : T(1), pc + oc, C.ld, bf16);
    for (size_t j = axes.size(); j-- > 0;) {
      const size_t d = axes[j];
      if (++idx[d] < batch[d]) {
        oa += A.bstrides[d];
        ob += B.bstrides[d];
        oc += C.bstrides[d];
        break;
      }
      idx[d] = 0;
      oa -= A.bstrides[d] * (batch[d] - 1);
      ob -= B.bstrides[d] * (batch[d] - 1);
      oc -= C.bstrides[d] * (batch[d] - 1);
    }
  }
}

// The broadcast of a's and b's batch axes (all but the last two).
Shape batch_shape(const Tensor& a, const Tensor& b) {
  const size_t na = a.shape().size() - 2, nb = b.shape().size() - 2, n = std::max(na, nb);
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - na ? 1 : a.shape()[i - (n - na)];
    const int64_t db = i < n - nb ? 1 : b.shape()[i - (n - nb)];
    HEED_CHECK(da == db || da == 1 || db == 1, "matmul: batch dims of ", to_string(a.shape()), " @ ",
               to_string(b.shape()), " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace

// ------------------------------------------------------------------------------------------
// matmul

// Both operands at least 2-D (matmul below promotes 1-D ones).
static Tensor matmul_batched(const Tensor& a, const Tensor& b) {
  HEED_CHECK(a.dtype() == b.dtype(), "matmul: dtypes differ: ", dtype_name(a.dtype()), " ", to_string(a.shape()),
             " @ ", dtype_name(b.dtype()), " ", to_string(b.shape()));
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  HEED_CHECK(b.size(-2) == k, "matmul: inner dims differ: ", to_string(a.shape()), " @ ", to_string(b.shape()),
             " (", k, " vs ", b.size(-2), ")");
  const Shape batch = batch_shape(a, b);
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);

  Tensor ua, ub;
  const Mat A = operand(a, batch, ua), B = operand(b, batch, ub);
  Tensor out = Tensor::empty(out_shape, a.dtype());
  const Bf16 bf16 = autocast_bf16();
  visit_dtype(a.dtype(), [&]<class T>() { batched_gemm<T>(batch, A, B, output_mat(out, batch), bf16); });

  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  // dA = g @ B^T needs only B and dB = A^T @ g only A: keep just what the backward reads.
  return record("matmul", out, {a, b},
                [A, B, batch, need_a, need_b, bf16, sa = a.shape(), sb = b.shape(), keep_a = need_b ? ua.detach() : Tensor(),
                 keep_b = need_a ? ub.detach() : Tensor()](const Tensor& g) {
    Tensor gu;
    const Mat G = operand(g, batch, gu);
    // An empty batch makes no products, so a broadcast operand's gradient must start at zero.
    const bool empty = numel_of(batch) == 0;
    auto buffer = [&](const Shape& s) { return empty ? Tensor::zeros(s, g.dtype()) : Tensor::empty(s, g.dtype()); };
    std::vector<Tensor> grads(2);
    visit_dtype(g.dtype(), [&]<class T>() {
      if (need_a) {
        grads[0] = buffer(sa);
        batched_gemm<T>(batch, G, B.t(), output_mat(grads[0], batch), bf16);
      }
      if (need_b) {
        grads[1] = buffer(sb);
        batched_gemm<T>(batch, A.t(), G, output_mat(grads[1], batch), bf16);
      }
    });
    return grads;
  }, {need_b ? ua : Tensor(), need_a ? ub : Tensor()});
}

// ------------------------------------------------------------------------------------------
// linear

// linear(x, w, b), plus r when r is defined (add_linear): C starts at r (+ b) and gemm adds the
// product onto it with beta = 1, which also spares OpenBLAS its zeroing pass over C.
Tensor matmul(const Tensor& a, const Tensor& b) {
  HEED_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: operands need at least 1 dim, got ", to_string(a.shape()), " @ ",
             to_string(b.shape()));
  // PyTorch's rules: a 1-D left operand is a row (1, k) and a 1-D right one a column (k, 1), the
  // added axis removed from the result; 1-D @ 1-D is the dot product, shape [].
  const bool row = a.dim() == 1, col = b.dim() == 1;
  Tensor out = matmul_batched(row ? unsqueeze(a, 0) : a, col ? unsqueeze(b, 1) : b);
  if (col) out = squeeze(out, -1);
  if (row) out = squeeze(out, col ? -1 : -2);
  return out;
}

static Tensor linear_impl(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& r) {
  const bool has_b = b.defined(), has_r = r.defined();
  const char* op = has_r ? "add_linear" : "linear";
  HEED_CHECK(x.dim() >= 1 && w.dim() == 2, op, ": x ", to_string(x.shape()), " needs at least 1 dim and w ",
             to_string(w.shape()), " exactly 2 (out, in)");
  const int64_t in = x.size(-1), out_f = w.size(0);
  HEED_CHECK(w.size(1) == in, op, ": inner dims differ: x ", to_string(x.shape()), " and w ", to_string(w.shape()),
             " (w is (out, in))");
  HEED_CHECK(x.dtype() == w.dtype() && (!has_b || b.dtype() == x.dtype()), op, ": dtypes differ: x ",
             dtype_name(x.dtype()), " ", to_string(x.shape()), ", w ", dtype_name(w.dtype()), " ", to_string(w.shape()),
             has_b ? ", b " : "", has_b ? dtype_name(b.dtype()) : "");
  HEED_CHECK(!has_b || (b.dim() == 1 && b.size(0) == out_f), op, ": bias ", to_string(has_b ? b.shape() : Shape{}),
             " does not match w ", to_string(w.shape()), " (expected [", out_f, "])");
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  const int64_t rows = numel_of(out_shape);
  out_shape.push_back(out_f);

  HEED_CHECK(!has_r || (r.shape() == out_shape && r.dtype() == x.dtype()), op, ": residual ",
             has_r ? dtype_name(r.dtype()) : "", " ", to_string(has_r ? r.shape() : Shape{}), " does not match the output ",
             dtype_name(x.dtype()), " ", to_string(out_shape));

  Tensor ux, uw;
  const Mat X = folded_operand(x, rows, ux);
  const Mat W = operand(w, {}, uw);
  Tensor y = Tensor::empty(out_shape, x.dtype());
  const Bf16 bf16 = autocast_bf16();
  const Mat Y = make_mat(y, {}, rows, out_f, std::pair{false, std::max<int64_t>(out_f, 1)});
  visit_dtype(x.dtype(), [&]<class T>() {
    // C starts as r + b, r, or b, row by row in one pass over the threads (residual streams are
    // large), and gemm adds x w^T onto it with beta = 1; with neither, beta = 0.
    const bool start = (has_r || has_b) && rows > 0;
    if (has_r && !r.is_contiguous()) y.copy_(r);
    if (start) {
      const bool from_r = has_r && r.is_contiguous();
      const T* pr = from_r ? r.data<T>() : nullptr;
      const T* pb = has_b ? b.data<T>() : nullptr;
      const int64_t sb = has_b ? b.strides()[0] : 0;
      T* py = y.data<T>();
      const int64_t grain = tuning().elementwise_grain / std::max<int64_t>(out_f, 1);
      parallel_for(rows, std::max<int64_t>(1, grain), [&](int64_t r0, int64_t r1) {
        for (int64_t i = r0; i < r1; ++i) {
          T* row = py + i * out_f;
          if (from_r) std::copy(pr + i * out_f, pr + (i + 1) * out_f, row);
          if (has_b && has_r) {
            for (int64_t j = 0; j < out_f; ++j) row[j] += pb[j * sb];
          } else if (has_b) {
            for (int64_t j = 0; j < out_f; ++j) row[j] = pb[j * sb];
          }
        }
      });
    }
    const T beta = start ? 1 : 0;
    gemm<T>(X, W.t(), Y, beta, bf16);
  });

  const bool need_x = x.requires_grad(), need_w = w.requires_grad(), need_b = has_b && b.requires_grad();
  return record(op, y, {x, w, b, r},
                [X, W, rows, need_x, need_w, need_b, bf16, sx = x.shape(), sw = w.shape(),
                 keep_x = need_w ? ux.detach() : Tensor(), keep_w = need_x ? uw.detach() : Tensor()](const Tensor& g) {
    const int64_t out_f = sw[0], in = sw[1];
    Tensor gu;
    const Mat G = folded_operand(g, rows, gu);  // g is contiguous: (rows, out) in place
    std::vector<Tensor> grads(4);
    grads[3] = g;  // d(r): the output's gradient itself (undefined r: ignored by autograd)
    visit_dtype(g.dtype(), [&]<class T>() {
      if (need_x) grads[0] = Tensor::empty(sx, g.dtype());
      if (need_w) grads[1] = Tensor::empty(sw, g.dtype());
      const Mat DX = need_x ? make_mat(grads[0], {}, rows, in, std::pair{false, std::max<int64_t>(in, 1)}) : Mat{};
      const Mat DW = need_w ? make_mat(grads[1], {}, out_f, in, std::pair{false, std::max<int64_t>(in, 1)}) : Mat{};
      auto dx = [&] { gemm<T>(G, W, DX, T(0), bf16); };      // dx = g @ w
      auto dw = [&] { gemm<T>(G.t(), X, DW, T(0), bf16); };  // dw = g^T @ x, every row at once
      // The two products have equal work. Where both are large enough (kProductPairMacs) they run
      // as a pair: each on its own cores, in parallel, so neither is cut finer than it must be.
      // - On a BLAS: one job of both products' pieces, each product cut for half the cores
      //   (BlasProduct): on two cores each runs whole on one core, side by side, and OpenBLAS
      //   packs no operand twice. The pieces follow from the shape and the cores, so the bits do
      //   not depend on the thread count. Not on oneDNN's fp32 kernels: their dw (A transposed,
      //   k = rows) runs well below their dx, so the core done with dx would wait; each product cut
      //   for all the cores in turn is faster there (docs/performance.md, "Issue 16 on the Xeon,
      //   continued").
      // - In bf16 (gemm_bf16 splits itself; its bits do not depend on the split): on two threads
      //   side by side, each on one core.
      const bool pair = need_x && need_w && rows * in * out_f >= kProductPairMacs;
      bool blas_pair = pair, bf16_pair = false;
      if constexpr (std::is_same_v<T, float>) {
        blas_pair = pair && !bf16 && !detail::sgemm_on_onednn();
        bf16_pair = pair && bf16 && num_threads() == 2;
      }
      if (blas_pair) {
        const int64_t half = (cpu_info().cores + 1) / 2;
        const BlasProduct<T> px = blas_product<T>(G, W, DX, T(0), half), pw = blas_product<T>(G.t(), X, DW, T(0), half);
        run_pieces<T>({&px, &pw});
      } else if (bf16_pair) {
        parallel_for(2, 1, [&](int64_t i0, int64_t i1) {  // both inline inside another job's chunk
          for (int64_t i = i0; i < i1; ++i) i == 0 ? dx() : dw();
        });
      } else {
        if (need_x) dx();
        if (need_w) dw();
      }
      if (need_b) {  // db = column sums of g, row by row so the inner loop is contiguous
        grads[2] = Tensor::zeros({out_f}, g.dtype());
        T* db = grads[2].data<T>();
        const T* pg = G.ptr<T>();
        for (int64_t r = 0; r < rows; ++r) {
          const T* row = pg + r * G.ld;
          for (int64_t j = 0; j < out_f; ++j) db[j] += row[j];
        }
      }
    });
    return grads;
  }, {need_w ? ux : Tensor(), need_x ? uw : Tensor()});
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) { return linear_impl(x, w, b, Tensor()); }

Tensor add_linear(const Tensor& r, const Tensor& x, const Tensor& w, const Tensor& b) {
  HEED_CHECK(r.defined(), "add_linear: the residual r is an undefined tensor");
  return linear_impl(x, w, b, r);
}

// torch.outer: a (n) and b (m) -> (n, m), a[i] b[j]; a broadcast product, differentiable in both.
Tensor outer(const Tensor& a, const Tensor& b) {
  HEED_CHECK(a.dim() == 1 && b.dim() == 1, "outer: expected two 1-D tensors, got ", to_string(a.shape()), " and ",
             to_string(b.shape()));
  HEED_CHECK(a.dtype() == b.dtype(), "outer: dtypes differ (", dtype_name(a.dtype()), " and ", dtype_name(b.dtype()), ")");
  return mul(unsqueeze(a, 1), unsqueeze(b, 0));
}

}  // namespace heed
