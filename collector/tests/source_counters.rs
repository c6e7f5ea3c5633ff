//! Source counters in the report and in `rtrace sass`, golden: a trace holding the real sm_90
//! cubin of collector/tests/cubin (built with `-lineinfo`) and two launches of its `strided`
//! kernel with source counters (values written here: 8 blocks of 256 threads, 64 warps; every
//! instruction to the exit executed once per warp, the load at 0x230 one sector per thread
//! against the ideal 4 per warp, the store at 0x260 ideal, the exit's branch divergent for
//! one warp). The report's section (table, CSV, JSON) and the annotated SASS are compared with
//! collector/tests/source_counters/*.txt (rewrite them with RTRACE_BLESS=1). nvdisasm as in
//! tests/sass.rs.

#[path = "common/export_fixture.rs"]
mod fixture;
#[path = "common/nvdisasm.rs"]
mod tools;

use fixture::*;
use rtrace_format::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use tools::nvdisasm;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/source_counters")
}

const CRC: u64 = 0x1234_abcd;
const KERNEL: &str = "_Z7stridedPfPKfii";

/// One launch's counters of `strided`: 64 warps of 32 threads.
fn instructions() -> Vec<InstructionCounters> {
    (0..=0x270u64)
        .step_by(16)
        .map(|pc| {
            let mut v = [64, 2048, 0, 0, 0, 0, 0];
            match pc {
                0x70 => v[6] = 1,
                0x230 => {
                    v[2] = 2048;
                    v[3] = 256;
                }
                0x260 => {
                    v[2] = 256;
                    v[3] = 256;
                }
                _ => {}
            }
            InstructionCounters {
                pc_offset: pc,
                values: v,
            }
        })
        .collect()
}

fn trace(dir: &Path) -> PathBuf {
    let bytes = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cubin/sass_kernels.sm_90.cubin"),
    )
    .unwrap();
    let image = ModuleImage {
        module: 1,
        context: 1,
        hash: image_hash(&bytes),
        crc: CRC,
        size: bytes.len() as u64,
        bytes: Some(bytes),
        in_run: false,
    };
    let mut b = Builder::new(&header(79, &["./strided"]));
    b = b.chunk(ChunkKind::ModuleImage, 0, &image.encode());
    let setup = SourceCounterSetup {
        context: 1,
        device: 0,
        time_ns: 1,
        chip: "GH100".into(),
        metrics: COUNTERS.iter().map(|c| c.metrics[0].to_string()).collect(),
        lazy_patching: true,
    };
    b = b.chunk(ChunkKind::SourceCounterSetup, 0, &encode_value(&setup));
    for n in 0..2u64 {
        let launch = SourceCounterLaunch {
            context: 1,
            correlation: 5 + n,
            launch: n,
            start_ns: 10 + n,
            end_ns: 20 + n,
            name: KERNEL.into(),
            functions: vec![SourceCounterFunction {
                cubin_crc: CRC,
                function_index: 0,
                name: KERNEL.into(),
                instructions: instructions(),
            }],
            dropped: 0,
        };
        b = b.chunk(ChunkKind::SourceCounters, 0, &encode_value(&launch));
    }
    let path = dir.join("counters.bin");
    std::fs::write(&path, b.bytes).unwrap();
    path
}

fn rtrace(args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_rtrace"))
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `rtrace report --section source-counters` of trace `t` in `format` (tables 120 wide), with
/// `nvdisasm` `n`.
fn section(t: &std::ffi::OsStr, n: &std::ffi::OsStr, format: &str) -> String {
    rtrace(&[
        "report".as_ref(),
        "--format".as_ref(),
        format.as_ref(),
        "--section".as_ref(),
        "source-counters".as_ref(),
        "--width".as_ref(),
        "120".as_ref(),
        "--nvdisasm".as_ref(),
        n,
        t,
    ])
}

fn golden(name: &str, text: &str) {
    let expected = dir().join(name);
    if std::env::var_os("RTRACE_BLESS").is_some() {
        std::fs::write(&expected, text).unwrap();
    }
    assert_eq!(text, std::fs::read_to_string(&expected).unwrap(), "{name}");
}

#[test]
fn counters_beside_instructions_lines_and_findings() {
    let tmp = std::env::temp_dir().join(format!("rtrace-sc-test-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let t = trace(&tmp);
    let n = nvdisasm();
    let (n, t) = (n.as_os_str(), t.as_os_str());
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cubin");
    let table = section(t, n, "table");
    // Two launches: 2 × 2048 sectors at the load against 2 × 256 ideal: 3584 excessive of
    // 4608 (77.8%), all on line 12.
    assert!(
        table.contains(
            "Uncoalesced Global Accesses: est. speedup 77.8%: This kernel has uncoalesced global \
             accesses resulting in a total of 3584 excessive sectors (78% of the total 4608 sectors)."
        ),
        "{table}"
    );
    golden("table.txt", &table);
    let csv = section(t, n, "csv");
    golden("counters.csv", &csv);
    let json = section(t, n, "json");
    assert!(json.contains("\"est_speedup_percent\":77.78"), "{json}");
    golden("counters.json", &json);
    let sass = rtrace(&[
        "sass".as_ref(),
        "--kernel".as_ref(),
        "^strided".as_ref(),
        "--nvdisasm".as_ref(),
        n,
        "--source-dir".as_ref(),
        src.as_os_str(),
        t,
    ]);
    // The load's line sums its instructions (one per warp each, the load's sectors).
    assert!(
        sass.contains(
            "  sass_kernels.cu:12      if (i < n) out[i] = in[(i * stride) % n] * 2.0f;\n"
        ),
        "{sass}"
    );
    golden("strided.sass.txt", &sass);
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// A trace recorded on the H100 (`tests/gpu/source_counters_check.sh`: `rtrace record
/// --source-counters` of sassmetrics_probe.cu's three kernels, one launch each, CUDA 13.0,
/// driver 580.159.04), kept zstd-compressed (its rings' unused pages are zeros). The sums
/// asserted are those Nsight Compute's Source page gave on the same kernels in that run
/// (`ncu --section SourceCounters --page source --csv`: every instruction equal, each of the
/// counters the three kernels have).
#[test]
fn a_trace_recorded_on_the_h100_matches_nsight_compute() {
    let tmp = std::env::temp_dir().join(format!("rtrace-sc-h100-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let packed = std::fs::read(dir().join("h100.bin.zst")).unwrap();
    let bytes = zstd::stream::decode_all(&packed[..]).unwrap();
    let t = tmp.join("h100.bin");
    std::fs::write(&t, bytes).unwrap();
    let n = nvdisasm();
    let (n, t) = (n.as_os_str(), t.as_os_str());
    let table = section(t, n, "table");
    for line in [
        "bank_conflicts(float*, int): 1 launch: 30336 instructions, 960512 thread instructions, \
         256 global sectors (256 ideal), 131328 shared wavefronts (4352 ideal), 0 divergent \
         branch targets",
        "divergent(float const*, float*, int): 1 launch: 26880 instructions, 422912 thread \
         instructions, 512 global sectors (512 ideal), 0 shared wavefronts (0 ideal), 1024 \
         divergent branch targets",
        "strided_reads(float const*, float*, int): 1 launch: 9152 instructions, 286720 thread \
         instructions, 33024 global sectors (4352 ideal), 0 shared wavefronts (0 ideal), 0 \
         divergent branch targets",
        "Uncoalesced Shared Accesses (shared memory bank conflicts): est. speedup 96.7%",
        "Uncoalesced Global Accesses: est. speedup 86.8%",
    ] {
        assert!(table.contains(line), "{line}\n{table}");
    }
    golden("h100.table.txt", &table);
    let json = section(t, n, "json");
    golden("h100.counters.json", &json);
    let sass = rtrace(&[
        "sass".as_ref(),
        "--kernel".as_ref(),
        "^bank_conflicts".as_ref(),
        "--nvdisasm".as_ref(),
        n,
        t,
    ]);
    golden("h100.bank_conflicts.sass.txt", &sass);
    std::fs::remove_dir_all(&tmp).unwrap();
}
