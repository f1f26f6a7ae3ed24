// heed: fp32 matrix products on oneDNN's sgemm, the kernel under matmul, linear and their
// gradients (core/ops/matmul.cpp splits each product over heed's threads and calls this once per
// piece). Not an autograd op and not public: raw row-major buffers, cblas_sgemm's convention
// with alpha = 1:
//
//   C (m x n) = op(A) (m x k) @ op(B) (k x n) + beta C,   op(X) = X or X^T,   beta 0 or 1.
//
// Why oneDNN (on CPUs with AVX-512, and on CPUs whose OpenBLAS kernels misjudge them, unless
// HEED_FP32_PRODUCTS=openblas; OpenBLAS for float64 and on other CPUs): on an AMD EPYC Zen 4 core
// its sgemm ran heed's Linear shapes 10-12 % faster in cache, and the training step 5-11 % faster;
// on a Sapphire Rapids-class Xeon the step 12-15 % faster; one-row x W from 128 x 512 on
// 1.07-2.9x faster than OpenBLAS's sgemv (in cache, Emerald Rapids Xeon; docs/performance.md,
// "fp32 products on oneDNN", "Issue 16 on an Intel Xeon with AMX", "A CPU newer than OpenBLAS").
//
// matmul cuts a product into pieces fixed by its shape and the machine's cores (core/tuning.h,
// kProductPieceMacs), since oneDNN's kernels choose their order of summation from the shape of the
// piece of C a call covers (measured with its AVX-512 kernels: pieces of fewer than 16 rows, or of
// few rows and some columns, sum in another order than the whole product; with its AVX2 kernels,
// almost any piece does); tests/core/test_sgemm.cpp checks 1 to 7 threads. The same machine and CPU
// set give the same bits; another one may not, as with any BLAS.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace heed::detail {

/// Whether fp32 products run on sgemm() here: fp32_products_on_onednn() for this process's
/// HEED_FP32_PRODUCTS (read once), CPU (core/cpu.h) and OpenBLAS kernels. When false, matmul calls
/// OpenBLAS's cblas_sgemm, as for float64.
bool sgemm_on_onednn();

/// The rule sgemm_on_onednn() applies: oneDNN when the CPU has AVX-512 (oneDNN measured faster than
/// OpenBLAS there) or when OpenBLAS's kernels do not fit the CPU (openblas_kernels_fit_cpu), unless
/// `choice` (HEED_FP32_PRODUCTS) is "openblas"; "onednn" or "" (unset) leave the rule to decide;
/// another value throws heed::Error.
bool fp32_products_on_onednn(std::string_view choice, bool avx512f, bool openblas_fits);

/// The kernels OpenBLAS chose when it loaded (openblas_get_corename(): "SkylakeX", "Haswell",
/// "Prescott", ...; a build for one target names it in capitals, "HASWELL"), from the CPU's model
/// number or from OPENBLAS_CORETYPE.
std::string openblas_kernels();

/// Whether OpenBLAS kernels named `core` (any case) use the vector instructions of a CPU with
/// `avx2` and `fma`: on such a CPU only Haswell, Zen, SkylakeX, Cooperlake and SapphireRapids do.
/// OpenBLAS picks its kernels from a table of CPU models, and Debian 12's 0.3.21 gives an Intel
/// CPU of family 6 and extended model 0xB or later (Raptor Lake, Emerald Rapids: model 207) its
/// SSE3 "Prescott" kernels (its dynamic.c falls through to the Pentium 4 case; fixed in 0.3.25),
/// a fifth to two-fifths of the speed; oneDNN dispatches on the instruction sets themselves.
bool openblas_kernels_fit_cpu(std::string_view core, bool avx2, bool fma);

/// Which code runs fp32 products here, with its version ("oneDNN 2.6.3 dnnl_sgemm and packed
/// sgemm", "oneDNN ... dnnl_sgemm" without sgemm_packed_b_available(), or "OpenBLAS cblas_sgemm"),
/// and ", heed's A^T B at 1 KB strides" where sgemm_at_b_available() (core/ops/sgemm_at_b.h), for
/// `heed bench`'s report (core/tuning.h, tuning_json).
std::string fp32_product_kernel();

/// C = op(A) op(B) + beta C on the calling thread. beta 0: C is only written (it may hold
/// anything, NaN included); beta 1: C accumulates. Throws heed::Error if oneDNN refuses the call
/// (a leading dimension smaller than its matrix's row).
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

/// Whether fp32 products here can pack op(B) once and share it between pieces of rows of C
/// (sgemm_pack_b and sgemm_packed_b below): sgemm_on_onednn() and this oneDNN exports its packed
/// sgemm. oneDNN builds that from its MKL-style sgemm_pack_get_size, sgemm_pack and sgemm_compute
/// (src/cpu/gemm/gemm_pack.hpp, exported with DNNL_API for its own RNN primitives and tests, but
/// declared in no public header), so heed looks them up at run time by their oneDNN 2.x C++
/// names (dim_t = int64_t): a oneDNN without them leaves every product on sgemm(). The same
/// kernels as dnnl_sgemm, reading op(B) from one packed copy instead of packing it per call.
bool sgemm_packed_b_available();

/// Floats the packed op(B) of C (m x n) = A (m x k, not transposed, row stride lda) op(B) takes,
/// or 0 where oneDNN declines to pack this product (then use sgemm()).
int64_t sgemm_packed_b_floats(bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb);

/// Packs op(B) for products of up to m rows of C as in sgemm_packed_b_floats, into `packed`
/// (that many floats). Throws heed::Error if oneDNN refuses.
void sgemm_pack_b(bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda, const float* b, int64_t ldb,
                  float* packed);

/// C = A op(B) + beta C on the calling thread, for rows_m <= m rows of A (not transposed, row stride
/// lda, the stride it was packed for) and op(B) packed by sgemm_pack_b (the same trans_b, n, k,
/// lda and ldb). beta 0 or 1 as in sgemm(). Throws heed::Error if oneDNN refuses.
void sgemm_packed_b(int64_t rows_m, int64_t n, int64_t k, const float* a, int64_t lda, const float* packed,
                    int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace heed::detail
