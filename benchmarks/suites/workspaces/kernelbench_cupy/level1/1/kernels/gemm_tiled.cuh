// Shared-memory tiled fp32 GEMM, C[m][n] = epilogue(sum_k A[m][k] * B(k, n), m, n), for any M, N, K.
//
// A is M x K row-major. B is K x N row-major (B_IS_NK = false, torch.matmul's right operand) or N x K
// row-major (B_IS_NK = true: an nn.Linear weight, so C = A @ W^T without a transposed copy).
// A block of 256 threads computes a 128 x 128 tile of C, each thread an 8 x 8 register tile, stepping
// K by 32. The A and B tiles live in dynamic shared memory, two stages of them (66 KiB, over the
// 48 KiB static limit: the launch passes shared_mem=gemm::kSmemBytes). The next K-step is read from
// global memory into registers while the current stage is used, then stored to the other stage, so
// one __syncthreads per K-step suffices. Accumulation is plain fp32 FMA (no TF32). Out-of-range
// elements load as zero and are never stored, so no size needs to be a multiple of anything.
#pragma once

namespace gemm {

constexpr int kBM = 128;      // rows of C per block
constexpr int kBN = 128;      // columns of C per block
constexpr int kBK = 32;       // K per step
constexpr int kThreads = 256;
constexpr int kTM = 8;        // rows of C per thread
constexpr int kTN = 8;        // columns of C per thread
constexpr int kPad = 4;       // keeps rows 16-byte aligned for float4 reads, spreads the transposed stores
constexpr int kLdA = kBM + kPad;  // As[k][m]
constexpr int kLdB = kBN + kPad;  // Bs[k][n]
constexpr int kStageFloats = kBK * kLdA + kBK * kLdB;
constexpr int kSmemBytes = 2 * kStageFloats * 4;  // 67584 bytes; model_new.py passes the same number
constexpr int kLoadsA = kBM * kBK / kThreads;  // 16 elements of A per thread per step
constexpr int kLoadsB = kBN * kBK / kThreads;  // 16 elements of B per thread per step

static_assert(kThreads == (kBM / kTM) * (kBN / kTN), "one thread per 8 x 8 sub-tile");
static_assert(kBK == 32, "the A (and N x K B) loads map a warp onto one row of 32 k");

// Reads the K-step starting at k0 into registers (zero outside the matrices).
template <bool B_IS_NK>
__device__ __forceinline__ void load_step(const float* __restrict__ A, const float* __restrict__ B, int M,
                                          int N, int K, int m0, int n0, int k0, float (&ra)[kLoadsA],
                                          float (&rb)[kLoadsB]) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int i = 0; i < kLoadsA; ++i) {
        const int idx = tid + i * kThreads;
        const int r = idx / kBK, c = idx % kBK;  // a warp reads 32 consecutive k of one row
        const int gm = m0 + r, gk = k0 + c;
        ra[i] = (gm < M && gk < K) ? A[(long long)gm * K + gk] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kLoadsB; ++i) {
        const int idx = tid + i * kThreads;
        if (B_IS_NK) {
            const int r = idx / kBK, c = idx % kBK;  // r: n, c: k
            const int gn = n0 + r, gk = k0 + c;
            rb[i] = (gn < N && gk < K) ? B[(long long)gn * K + gk] : 0.0f;
        } else {
            const int r = idx / kBN, c = idx % kBN;  // r: k, c: n (a warp reads 32 consecutive n)
            const int gk = k0 + r, gn = n0 + c;
            rb[i] = (gk < K && gn < N) ? B[(long long)gk * N + gn] : 0.0f;
        }
    }
}

// Stores the registers of load_step into one stage, both tiles k-major.
template <bool B_IS_NK>
__device__ __forceinline__ void store_step(float* __restrict__ as, float* __restrict__ bs,
                                           const float (&ra)[kLoadsA], const float (&rb)[kLoadsB]) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int i = 0; i < kLoadsA; ++i) {
        const int idx = tid + i * kThreads;
        as[(idx % kBK) * kLdA + idx / kBK] = ra[i];
    }
#pragma unroll
    for (int i = 0; i < kLoadsB; ++i) {
        const int idx = tid + i * kThreads;
        if (B_IS_NK) {
            bs[(idx % kBK) * kLdB + idx / kBK] = rb[i];
        } else {
            bs[(idx / kBN) * kLdB + idx % kBN] = rb[i];
        }
    }
}

// The whole block's work: call from a __global__ launched with kThreads threads, grid
// (ceil(N / kBN), ceil(M / kBM)) and shared_mem = kSmemBytes. epilogue(acc, m, n) -> stored value.
template <bool B_IS_NK, class Epilogue>
__device__ __forceinline__ void tile(const float* __restrict__ A, const float* __restrict__ B,
                                     float* __restrict__ C, int M, int N, int K, const Epilogue& epilogue) {
    extern __shared__ float4 smem_f4[];  // float4: the dynamic buffer is 16-byte aligned
    float* smem = reinterpret_cast<float*>(smem_f4);

    const int n0 = blockIdx.x * kBN;
    const int m0 = blockIdx.y * kBM;
    const int tx = threadIdx.x % (kBN / kTN);  // column group
    const int ty = threadIdx.x / (kBN / kTN);  // row group

    float acc[kTM][kTN];
#pragma unroll
    for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] = 0.0f;

    float ra[kLoadsA], rb[kLoadsB];
    const int steps = (K + kBK - 1) / kBK;
    if (steps > 0) {
        load_step<B_IS_NK>(A, B, M, N, K, m0, n0, 0, ra, rb);
        store_step<B_IS_NK>(smem, smem + kBK * kLdA, ra, rb);
        __syncthreads();
    }
    for (int s = 0; s < steps; ++s) {
        const bool more = s + 1 < steps;
        if (more) load_step<B_IS_NK>(A, B, M, N, K, m0, n0, (s + 1) * kBK, ra, rb);

        const float* as = smem + (s & 1) * kStageFloats;
        const float* bs = as + kBK * kLdA;
#pragma unroll
        for (int kk = 0; kk < kBK; ++kk) {
            const float4 a0 = *reinterpret_cast<const float4*>(as + kk * kLdA + ty * kTM);
            const float4 a1 = *reinterpret_cast<const float4*>(as + kk * kLdA + ty * kTM + 4);
            const float4 b0 = *reinterpret_cast<const float4*>(bs + kk * kLdB + tx * kTN);
            const float4 b1 = *reinterpret_cast<const float4*>(bs + kk * kLdB + tx * kTN + 4);
            const float a[kTM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[kTN] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < kTM; ++i)
#pragma unroll
                for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }

        if (more) {
            // The other stage was last read in step s - 1, which every thread finished before the
            // __syncthreads that ended it.
            float* next = smem + ((s + 1) & 1) * kStageFloats;
            store_step<B_IS_NK>(next, next + kBK * kLdA, ra, rb);
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < kTM; ++i) {
        const int m = m0 + ty * kTM + i;
        if (m >= M) continue;
#pragma unroll
        for (int j = 0; j < kTN; ++j) {
            const int n = n0 + tx * kTN + j;
            if (n < N) C[(long long)m * N + n] = epilogue(acc[i][j], m, n);
        }
    }
}

}  // namespace gemm
