// 2-D average pooling (count_include_pad, no ceil mode: nn.AvgPool2d's defaults) as a separable window sum, written
// for any number of pooled dimensions up to 3 (a 2-D pool is a 3-D one with a depth window of 1). A block takes one
// output row (plane, oh) and a tile of its columns: it first adds, for every input column the tile's windows touch,
// the kh input rows of the window (coalesced: consecutive threads read consecutive columns, sixteen loads in flight
// per thread), keeping one sum per column in shared memory; then each output adds kw of those column sums and divides
// by the window size as PyTorch counts it. With the task's stride equal to its kernel (11) every input element is
// read once; at 2048 columns a row's 186 windows fit one tile. Indices are 64-bit (the task's input has 2^32
// elements). A window wider than the tile buffer falls back to a thread per output.
#include <cuda_runtime.h>

#include <cstdint>

constexpr int kThreads = 256;
constexpr int kSpan = 2048;  // input columns one tile may touch (8 KiB of shared memory)
constexpr int64_t kMaxBlocks = 132 * 64;

struct Pool {
  int64_t d, h, w;        // input sizes
  int64_t od, oh, ow;     // output sizes
  int64_t kd, kh, kw;     // window
  int64_t sd, sh, sw;     // stride
  int64_t pd, ph, pw;     // padding
};

// PyTorch's window along one axis: [start, end) clipped to the input, and the extent it counts (padding included).
__device__ __forceinline__ void window(int64_t o, int64_t k, int64_t s, int64_t p, int64_t n, int64_t* start,
                                       int64_t* end, int64_t* counted) {
  int64_t lo = o * s - p;
  int64_t hi = lo + k < n + p ? lo + k : n + p;
  *counted = hi - lo;
  *start = lo > 0 ? lo : 0;
  *end = hi < n ? hi : n;
}

__global__ void __launch_bounds__(kThreads) avg_pool2d_tiled_kernel(const float* __restrict__ x,
                                                                   float* __restrict__ y, int64_t planes, Pool p,
                                                                   int64_t tile, int64_t tiles) {
  __shared__ float colsum[kSpan];
  const int64_t total = planes * p.od * p.oh * tiles;
  for (int64_t task = blockIdx.x; task < total; task += gridDim.x) {
    int64_t rest = task;
    const int64_t t = rest % tiles;
    rest /= tiles;
    const int64_t oh = rest % p.oh;
    rest /= p.oh;
    const int64_t od = rest % p.od;
    const int64_t plane = rest / p.od;
    int64_t d0, d1, cd, h0, h1, ch;
    window(od, p.kd, p.sd, p.pd, p.d, &d0, &d1, &cd);
    window(oh, p.kh, p.sh, p.ph, p.h, &h0, &h1, &ch);
    const int64_t ow0 = t * tile;
    const int64_t count = p.ow - ow0 < tile ? p.ow - ow0 : tile;
    const int64_t w0 = ow0 * p.sw - p.pw;        // input column of colsum[0]
    const int64_t span = (count - 1) * p.sw + p.kw;  // <= kSpan by the launcher's choice of tile
    const float* base = x + plane * p.d * p.h * p.w;
    const int nh = static_cast<int>(h1 - h0);
    const int rows = static_cast<int>(d1 - d0) * nh;  // the window's input rows (kd * kh at most)
    for (int64_t c = threadIdx.x; c < span; c += 4 * kThreads) {
      float s[4] = {0.f, 0.f, 0.f, 0.f};
      int64_t iw[4];
      bool inside[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        iw[u] = w0 + c + u * kThreads;
        inside[u] = c + u * kThreads < span && iw[u] >= 0 && iw[u] < p.w;
      }
      // The window's input rows, four at a time: up to 16 independent loads in flight per thread.
      for (int r = 0; r < rows; r += 4) {
        const float* row[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int rq = r + q < rows ? r + q : r;
          row[q] = base + ((d0 + rq / nh) * p.h + h0 + rq % nh) * p.w;
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
#pragma unroll
          for (int u = 0; u < 4; ++u) {
            if (r + q < rows && inside[u]) s[u] += row[q][iw[u]];
          }
        }
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        if (c + u * kThreads < span) colsum[c + u * kThreads] = s[u];
      }
    }
    __syncthreads();
    float* out = y + ((plane * p.od + od) * p.oh + oh) * p.ow + ow0;
    for (int64_t o = threadIdx.x; o < count; o += kThreads) {
      int64_t wa, wb, cw;
      window(ow0 + o, p.kw, p.sw, p.pw, p.w, &wa, &wb, &cw);
      float sum = 0.f;
      for (int64_t iw = wa; iw < wb; ++iw) sum += colsum[iw - w0];
      out[o] = sum / static_cast<float>(cd * ch * cw);
    }
    __syncthreads();  // colsum is rewritten by the next task
  }
}

// A thread per output, for windows too wide for the tiled kernel's buffer.
__global__ void avg_pool2d_direct_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t planes, Pool p) {
  const int64_t total = planes * p.od * p.oh * p.ow;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = i;
    const int64_t ow = rest % p.ow;
    rest /= p.ow;
    const int64_t oh = rest % p.oh;
    rest /= p.oh;
    const int64_t od = rest % p.od;
    const int64_t plane = rest / p.od;
    int64_t d0, d1, cd, h0, h1, ch, w0, w1, cw;
    window(od, p.kd, p.sd, p.pd, p.d, &d0, &d1, &cd);
    window(oh, p.kh, p.sh, p.ph, p.h, &h0, &h1, &ch);
    window(ow, p.kw, p.sw, p.pw, p.w, &w0, &w1, &cw);
    const float* base = x + plane * p.d * p.h * p.w;
    float sum = 0.f;
    for (int64_t id = d0; id < d1; ++id) {
      for (int64_t ih = h0; ih < h1; ++ih) {
        const float* row = base + (id * p.h + ih) * p.w;
        for (int64_t iw = w0; iw < w1; ++iw) sum += row[iw];
      }
    }
    y[i] = sum / static_cast<float>(cd * ch * cw);
  }
}

// x (planes, d, h, w) -> y (planes, od, oh, ow), contiguous; the sizes come from the binding (PyTorch's formula).
extern "C" int avg_pool2d_launcher(const float* x, float* y, int64_t planes, const int64_t* in, const int64_t* out,
                                   const int64_t* kernel, const int64_t* stride, const int64_t* padding,
                                   cudaStream_t stream) {
  Pool p{in[0],     in[1],     in[2],     out[0],    out[1],    out[2],     kernel[0], kernel[1],
         kernel[2], stride[0], stride[1], stride[2], padding[0], padding[1], padding[2]};
  const int64_t rows = planes * p.od * p.oh;
  if (rows == 0 || p.ow == 0) return 0;
  if (p.kw <= kSpan) {
    const int64_t widest = (kSpan - p.kw) / p.sw + 1;  // outputs whose windows fit in kSpan columns
    const int64_t tiles = (p.ow + widest - 1) / widest;
    const int64_t tile = (p.ow + tiles - 1) / tiles;  // balanced tiles
    const int64_t work = rows * tiles;
    const int blocks = static_cast<int>(work < kMaxBlocks ? work : kMaxBlocks);
    avg_pool2d_tiled_kernel<<<blocks, kThreads, 0, stream>>>(x, y, planes, p, tile, tiles);
  } else {
    const int64_t work = (rows * p.ow + kThreads - 1) / kThreads;
    const int blocks = static_cast<int>(work < kMaxBlocks ? work : kMaxBlocks);
    avg_pool2d_direct_kernel<<<blocks, kThreads, 0, stream>>>(x, y, planes, p);
  }
  return static_cast<int>(cudaGetLastError());
}
