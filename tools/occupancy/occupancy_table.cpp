// Prints the CUDA occupancy calculator's answers (cudaOccMaxActiveBlocksPerMultiprocessor of
// the header-only cuda_occupancy.h) for a deterministic sample of launches on a set of device
// profiles: the reference table that collector/src/occupancy.rs is tested against.
// Built and run by tools/occupancy-table.sh; see there.
//
//   occupancy_table            the sampled fixture (devices, then one `occ` row per launch)
//   occupancy_table full       every H100 launch of the grid: block 32..1024 step 32,
//                              registers 16..255, dynamic shared memory 0..233472 step 96
//   occupancy_table sample N   like the fixture, with N sampled launches per device profile
//
// The function is described as the CUDA runtime converts a cudaFuncAttributes: partitioned
// global caching off, FUNC_SHMEM_LIMIT_OPTIN with the opt-in limit equal to the launch's dynamic
// shared memory (a launch that ran had opted in to at least that), one block barrier, no
// virtual resources, no per-function thread limit below the device's.
#include <cuda_occupancy.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace {

struct Profile {
    const char *name;
    int major, minor, sms, max_threads_per_block, max_threads_per_sm, regs_per_block, regs_per_sm,
        warp;
    size_t smem_per_block, smem_per_sm, smem_optin, smem_reserved;
    int rows;  // sampled rows in the fixture
};

int rows_per_profile = 0;  // `sample N`: N rows for every profile

// Attributes as cudaGetDeviceProperties reports them on each GPU.
const Profile PROFILES[] = {
    {"H100", 9, 0, 132, 1024, 2048, 65536, 65536, 32, 49152, 233472, 232448, 1024, 300},
    {"A100", 8, 0, 108, 1024, 2048, 65536, 65536, 32, 49152, 167936, 166912, 1024, 20},
    {"RTX3090", 8, 6, 82, 1024, 1536, 65536, 65536, 32, 49152, 102400, 101376, 1024, 20},
    {"L4", 8, 9, 58, 1024, 1536, 65536, 65536, 32, 49152, 102400, 101376, 1024, 20},
    {"V100", 7, 0, 80, 1024, 2048, 65536, 65536, 32, 49152, 98304, 98304, 0, 20},
    {"T4", 7, 5, 40, 1024, 1024, 65536, 65536, 32, 49152, 65536, 65536, 0, 20},
    {"B200", 10, 0, 148, 1024, 2048, 65536, 65536, 32, 49152, 233472, 232448, 1024, 20},
    {"RTX5090", 12, 0, 170, 1024, 1536, 65536, 65536, 32, 49152, 102400, 101376, 1024, 20},
    {"P100", 6, 0, 56, 1024, 2048, 65536, 65536, 32, 49152, 65536, 49152, 0, 20},
    {"GTX1080", 6, 1, 20, 1024, 2048, 65536, 65536, 32, 49152, 98304, 49152, 0, 20},
    {"K80", 3, 7, 13, 1024, 2048, 65536, 131072, 32, 49152, 114688, 49152, 0, 20},
    {"cc10.2", 10, 2, 100, 1024, 2048, 65536, 65536, 32, 49152, 233472, 232448, 1024, 5},
    {"cc13.0", 13, 0, 100, 1024, 2048, 65536, 65536, 32, 49152, 233472, 232448, 1024, 5},
};

uint64_t rng_state = 0x9e3779b97f4a7c15ull;
uint64_t next_u64() {  // xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}
// A number in [lo, hi].
long pick(long lo, long hi) { return lo + (long)(next_u64() % (uint64_t)(hi - lo + 1)); }

cudaOccDeviceProp props_of(const Profile &p) {
    cudaOccDeviceProp d;
    d.computeMajor = p.major;
    d.computeMinor = p.minor;
    d.maxThreadsPerBlock = p.max_threads_per_block;
    d.maxThreadsPerMultiprocessor = p.max_threads_per_sm;
    d.regsPerBlock = p.regs_per_block;
    d.regsPerMultiprocessor = p.regs_per_sm;
    d.warpSize = p.warp;
    d.sharedMemPerBlock = p.smem_per_block;
    d.sharedMemPerMultiprocessor = p.smem_per_sm;
    d.numSms = p.sms;
    d.sharedMemPerBlockOptin = p.smem_optin;
    d.reservedSharedMemPerBlock = p.smem_reserved;
    return d;
}

void row(const Profile &p, int block, int regs, size_t static_smem, size_t dynamic_smem,
         int carveout, bool compact) {
    cudaOccDeviceProp d = props_of(p);
    cudaOccFuncAttributes f;
    f.maxThreadsPerBlock = p.max_threads_per_block;
    f.numRegs = regs;
    f.sharedSizeBytes = static_smem;
    f.partitionedGCConfig = PARTITIONED_GC_OFF;
    f.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
    f.maxDynamicSharedSizeBytes = dynamic_smem;
    f.numBlockBarriers = 1;
    f.virtualResourceCount = 0;
    cudaOccDeviceState s;
    s.carveoutConfig = carveout;
    cudaOccResult r;
    memset(&r, 0, sizeof r);
    cudaOccError e = cudaOccMaxActiveBlocksPerMultiprocessor(&r, &d, &f, &s, block, dynamic_smem);
    if (compact) {  // block regs dynamic active limit_regs limit_smem limit_warps factors
        printf("%d %d %zu %d %d %d %d %u\n", block, regs, dynamic_smem,
               e ? -int(e) : r.activeBlocksPerMultiprocessor, r.blockLimitRegs,
               r.blockLimitSharedMem, r.blockLimitWarps, r.limitingFactors);
        return;
    }
    if (e != CUDA_OCC_SUCCESS) {
        printf("occ,%s,%d,%d,%zu,%zu,%d,%d,0,0,0,0,0,0,0,0,0\n", p.name, block, regs, static_smem,
               dynamic_smem, carveout, int(e));
        return;
    }
    printf("occ,%s,%d,%d,%zu,%zu,%d,0,%d,%d,%d,%d,%d,%d,%u,%d,%zu\n", p.name, block, regs,
           static_smem, dynamic_smem, carveout, r.activeBlocksPerMultiprocessor, r.blockLimitRegs,
           r.blockLimitSharedMem, r.blockLimitWarps, r.blockLimitBlocks, r.blockLimitBarriers,
           r.limitingFactors, r.allocatedRegistersPerBlock, r.allocatedSharedMemPerBlock);
}

void sample(const Profile &p) {
    static const int carveouts[] = {-1, -1, -1, -1, -1, 0, 25, 50, 75, 100};
    for (int i = 0; i < (rows_per_profile ? rows_per_profile : p.rows); i++) {
        int block;
        switch (next_u64() % 4) {
            case 0: case 1: block = 32 * (int)pick(1, 8); break;
            case 2: block = 32 * (int)pick(1, 32); break;
            default: block = (int)pick(1, 1056); break;
        }
        int regs;
        switch (next_u64() % 10) {
            case 0: case 1: case 2: case 3: case 4: regs = (int)pick(16, 64); break;
            case 5: case 6: case 7: regs = (int)pick(64, 128); break;
            case 8: regs = (int)pick(128, 255); break;
            default: regs = (int)pick(0, 256); break;
        }
        size_t static_smem = 0;
        switch (next_u64() % 10) {
            case 0: case 1: case 2: case 3: case 4: break;
            case 5: case 6: case 7: static_smem = (size_t)pick(0, 48) * 1024; break;
            default: static_smem = (size_t)pick(0, 49152); break;
        }
        size_t dynamic_smem = 0;
        long fits = (long)p.smem_optin - (long)static_smem;  // the most that may fit
        switch (next_u64() % 10) {
            case 0: case 1: case 2: case 3: break;
            case 4: case 5: case 6: dynamic_smem = (size_t)pick(0, 16384); break;
            case 7: case 8: dynamic_smem = (size_t)pick(0, fits / 1024) * 1024; break;
            case 9: dynamic_smem = (size_t)pick(0, fits + 2048); break;
        }
        int carveout = carveouts[next_u64() % 10];
        row(p, block, regs, static_smem, dynamic_smem, carveout, false);
    }
}

void edges(const Profile &p) {
    // Limits met exactly and passed by one.
    size_t room = p.smem_optin;  // the largest static + dynamic a block may ask for
    for (size_t smem : {(size_t)0, (size_t)1, (size_t)127, (size_t)128, (size_t)129, room - 1, room,
                        room + 1, room + p.smem_reserved, p.smem_per_sm})
        row(p, 128, 32, 0, smem, -1, false);
    for (int regs : {0, 1, 64, 65, 128, 168, 255, 256, 257})
        for (int block : {1, 32, 256, 1024})
            row(p, block, regs, 0, 0, -1, false);
    for (int block : {1, 31, 33, 64, 96, 672, 1023, 1024, 1025})
        row(p, block, 16, 0, 0, -1, false);
    row(p, 0, 16, 0, 0, -1, false);
    row(p, 128, 16, 0, 0, -2, false);
    row(p, 128, 16, 0, 0, 101, false);
    row(p, 128, 16, 48 * 1024, 0, 0, false);
}

}  // namespace

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "full") == 0) {
        const Profile &p = PROFILES[0];
        for (int block = 32; block <= 1024; block += 32)
            for (int regs = 16; regs <= 255; regs++)
                for (size_t smem = 0; smem <= p.smem_per_sm; smem += 96)
                    row(p, block, regs, 0, smem, -1, true);
        return 0;
    }
    if (argc > 2 && strcmp(argv[1], "sample") == 0) rows_per_profile = atoi(argv[2]);
    printf("# The CUDA occupancy calculator's answers (cuda_occupancy.h, %s) for sampled launches.\n"
           "# Generated by tools/occupancy-table.sh; do not edit.\n",
           CUDA_OCC_HEADER_VERSION);
    printf("# device,name,major,minor,sms,max_threads_per_block,max_threads_per_sm,regs_per_block,"
           "regs_per_sm,warp,smem_per_block,smem_per_sm,smem_optin,smem_reserved\n");
    for (const Profile &p : PROFILES)
        printf("device,%s,%d,%d,%d,%d,%d,%d,%d,%d,%zu,%zu,%zu,%zu\n", p.name, p.major, p.minor,
               p.sms, p.max_threads_per_block, p.max_threads_per_sm, p.regs_per_block,
               p.regs_per_sm, p.warp, p.smem_per_block, p.smem_per_sm, p.smem_optin,
               p.smem_reserved);
    printf("# occ,device,block,regs,static_smem,dynamic_smem,carveout,status,active,limit_regs,"
           "limit_smem,limit_warps,limit_blocks,limit_barriers,factors,alloc_regs,alloc_smem\n"
           "# status: 0 success, 1 invalid input, 2 unknown device; 2147483647: no limit\n");
    edges(PROFILES[0]);
    for (const Profile &p : PROFILES) sample(p);
    return 0;
}
