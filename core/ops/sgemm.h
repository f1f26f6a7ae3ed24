// heed: fp32 matrix products on oneDNN's sgemm, the kernel under matmul, linear and their
// gradients (core/ops/matmul.cpp splits each product over heed's threads and calls this once per
// piece). Not an autograd op and not public: raw row-major buffers, cblas_sgemm's convention
// with alpha = 1:
//
//   C (m x n) = op(A) (m x k) @ op(B) (k x n) + beta C,   op(X) = X or X^T,   beta 0 or 1.
//
// Why oneDNN and not OpenBLAS (which keeps the float64 products and the one-row ones): on an AMD
// EPYC Zen 4 core its sgemm ran heed's Linear shapes 10-12 % faster in cache, and the training
// step 4-9 % faster (docs/performance.md, "fp32 products on oneDNN"). Each element of C gets the
// same bits whatever rows or columns of C the call covers (the k-blocking does not depend on m
// or n), so a product's result does not depend on how the pool split it, or on the thread count.
#pragma once

#include <cstdint>

namespace heed::detail {

/// C = op(A) op(B) + beta C on the calling thread. beta 0: C is only written (it may hold
/// anything, NaN included); beta 1: C accumulates. Throws heed::Error if oneDNN refuses the call
/// (a leading dimension smaller than its matrix's row).
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace heed::detail
