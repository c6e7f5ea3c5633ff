// Kernels of the SASS fixtures (collector/tests/sass.rs): built with
//   nvcc -cubin -lineinfo -arch=sm_90 -o sass_kernels.sm_90.cubin sass_kernels.cu
//   nvcc -cubin -lineinfo -arch=sm_80 -o sass_kernels.sm_80.cubin sass_kernels.cu
// from this directory (nvcc 13.0.88, the nvidia-cuda-nvcc wheel).
__global__ void saxpy(float a, const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void strided(float *out, const float *in, int n, int stride) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[(i * stride) % n] * 2.0f;
}
