// Probe (issue 19): does CUPTI write activity records into a client's buffer before handing
// it back, and fill their timestamps in place? Buffers are pages of a file mapped shared; the
// process kills itself with SIGKILL after its launches, and cupti_filebuf_probe.py reads the file.
// Usage: cupti_filebuf_probe FILE LAUNCHES SLEEP_MS FLUSH_PERIOD_MS
#include <cuda_runtime.h>
#include <cupti.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const size_t BUF = 4 << 20, NBUF = 16;
static unsigned char *map;
static int next_buf;
static int completed;

static void CUPTIAPI requested(uint8_t **buf, size_t *size, size_t *max) {
  *buf = map + (size_t)(next_buf++ % NBUF) * BUF;
  *size = BUF;
  *max = 0;
}
static void CUPTIAPI done(CUcontext c, uint32_t s, uint8_t *buf, size_t size, size_t valid) {
  completed++;
}

__global__ void spin(long long ns) {
  long long t0 = clock64();
  while (clock64() - t0 < ns) {
  }
}

// The size of a record of `kind`, from CUPTI's own cursor on a buffer whose every 8-byte word
// starts with `kind`.
static size_t stride(CUpti_ActivityKind kind) {
  static uint64_t words[1024];
  for (int i = 0; i < 1024; i++) words[i] = (uint64_t)kind;
  CUpti_Activity *rec = NULL;
  if (cuptiActivityGetNextRecord((uint8_t *)words, sizeof words, &rec) != CUPTI_SUCCESS) return 0;
  if (cuptiActivityGetNextRecord((uint8_t *)words, sizeof words, &rec) != CUPTI_SUCCESS) return 0;
  return (size_t)((uint8_t *)rec - (uint8_t *)words);
}

int main(int argc, char **argv) {
  if (argc < 5) return 2;
  int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ftruncate(fd, BUF * NBUF) != 0) return 3;
  map = (unsigned char *)mmap(NULL, BUF * NBUF, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return 4;
  int launches = atoi(argv[2]), sleep_ms = atoi(argv[3]), period = atoi(argv[4]);
  printf("stride kernel %zu memcpy %zu memset %zu\n", stride(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
         stride(CUPTI_ACTIVITY_KIND_MEMCPY), stride(CUPTI_ACTIVITY_KIND_MEMSET));
  cuptiActivityRegisterCallbacks(requested, done);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  if (period > 0) cuptiActivityFlushPeriod(period);
  float *d;
  cudaMalloc(&d, 4096);
  float h[16] = {0};
  for (int i = 0; i < launches; i++) {
    spin<<<1, 32>>>(20000);
    if (i % 100 == 99) cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  }
  cudaDeviceSynchronize();
  if (sleep_ms > 0) usleep(sleep_ms * 1000);
  printf("launches %d copies %d completed_buffers %d requested %d\n", launches, launches / 100,
         completed, next_buf);
  fflush(stdout);
  kill(getpid(), SIGKILL);
  return 0;
}
