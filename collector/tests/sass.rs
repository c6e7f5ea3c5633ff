//! `rtrace sass` on a trace holding two real cubins (collector/tests/cubin/, built with
//! `nvcc -lineinfo` for sm_80 and sm_90): the listing of one kernel, instructions under their
//! source lines with the lines' text, compared with collector/tests/cubin/saxpy.sass.txt
//! (rewrite it with RTRACE_BLESS=1). nvdisasm: $NVDISASM, else the one beside $CUDA_INCLUDE
//! (tools/setup-cuda.sh installs the nvidia-cuda-nvdisasm wheel), else nvdisasm on PATH.

#[path = "common/export_fixture.rs"]
mod fixture;
#[path = "common/nvdisasm.rs"]
mod tools;

use fixture::*;
use rtrace_format::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use tools::nvdisasm;

fn cubin_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cubin")
}

fn trace_with_images(dir: &Path) -> PathBuf {
    let mut b = Builder::new(&header(77, &["./app"]));
    for (module, arch) in [(1u32, "sm_80"), (2, "sm_90")] {
        let bytes = std::fs::read(cubin_dir().join(format!("sass_kernels.{arch}.cubin"))).unwrap();
        let image = ModuleImage {
            module,
            context: 1,
            hash: image_hash(&bytes),
            crc: 0,
            size: bytes.len() as u64,
            bytes: Some(bytes),
            in_run: false,
        };
        b = b.chunk(ChunkKind::ModuleImage, 0, &image.encode());
        let module = ModuleRecord {
            module,
            context: 1,
            cubin_size: image.size,
            ..Default::default()
        };
        b = b.chunk(ChunkKind::Modules, 0, &module.to_bytes());
    }
    let path = dir.join("images.bin");
    std::fs::write(&path, b.bytes).unwrap();
    path
}

#[test]
fn sass_lists_a_kernel_under_its_source_lines() {
    let dir = std::env::temp_dir().join(format!("rtrace-sass-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = trace_with_images(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_rtrace"))
        .arg("sass")
        .args(["--kernel", "^saxpy"])
        .arg("--nvdisasm")
        .arg(nvdisasm())
        .arg("--source-dir")
        .arg(cubin_dir())
        .arg(&trace)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    // Both architectures' saxpy, each under its own image.
    assert_eq!(
        text.matches("saxpy(float, float const*, float*, int)  [")
            .count(),
        2,
        "{text}"
    );
    assert!(
        text.contains("  sass_kernels.cu:7      if (i < n) y[i] = a * x[i] + y[i];\n"),
        "{text}"
    );
    let expected = cubin_dir().join("saxpy.sass.txt");
    if std::env::var_os("RTRACE_BLESS").is_some() {
        std::fs::write(&expected, &text).unwrap();
    }
    assert_eq!(text, std::fs::read_to_string(&expected).unwrap());

    // The report lists each image's functions, from its symbol table.
    let out = Command::new(env!("CARGO_BIN_EXE_rtrace"))
        .args(["report", "--format", "json"])
        .arg(&trace)
        .output()
        .unwrap();
    let json = String::from_utf8(out.stdout).unwrap();
    assert!(
        json.contains(
            "\"image_functions\":[{\"name\":\"_Z7stridedPfPKfii\",\"offset\":4864,\"size\":896},\
             {\"name\":\"_Z5saxpyfPKfPfi\",\"offset\":5760,\"size\":512}]"
        ),
        "{json}"
    );

    // Errors: no image, no nvdisasm.
    let empty = dir.join("empty.bin");
    std::fs::write(&empty, Builder::new(&header(78, &["./x"])).bytes).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rtrace"))
        .args(["sass", "--nvdisasm"])
        .arg(nvdisasm())
        .arg(&empty)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "rtrace: no module images to disassemble: the traces hold no modules (record with \
         GPU activity)\n"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_rtrace"))
        .args(["sass", "--nvdisasm", "/nonexistent/nvdisasm"])
        .arg(&trace)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "rtrace: --nvdisasm /nonexistent/nvdisasm: no such file\n"
    );
    // A wrong input is said first, whatever nvdisasm is.
    let missing = dir.join("missing.bin");
    let out = Command::new(env!("CARGO_BIN_EXE_rtrace"))
        .args(["sass", "--nvdisasm", "/nonexistent/nvdisasm"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("rtrace: {}: No such file or directory\n", missing.display())
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// collector/tests/pcsamp: a trace with PC samples and the expected outputs (apart from the
/// golden fixtures, which are read as a directory).
fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pcsamp")
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

/// `expected` in collector/tests/pcsamp, rewritten under RTRACE_BLESS.
fn golden(name: &str, text: &str) {
    let expected = fixtures().join(name);
    if std::env::var_os("RTRACE_BLESS").is_some() {
        std::fs::write(&expected, text).unwrap();
    }
    assert_eq!(text, std::fs::read_to_string(&expected).unwrap(), "{name}");
}

/// PC samples recorded on an H200 (tests/gpu/pcsamp_check.sh: `rtrace record --pc-sampling --
/// ./kernels all 1`, tests/gpu/pcsamp_kernels.cu built with -lineinfo for sm_90): the report's
/// PC sampling section (hottest instructions and lines, stall reasons) and the annotated SASS,
/// against pcsamp.table.txt, pcsamp.json and pcsamp.sass.txt.
#[test]
fn pc_samples_map_to_instructions_and_lines() {
    let trace = fixtures().join("pcsamp.bin");
    let n = nvdisasm();
    let table = rtrace(&[
        "report".as_ref(),
        "--width".as_ref(),
        "120".as_ref(),
        "--nvdisasm".as_ref(),
        n.as_os_str(),
        trace.as_os_str(),
    ]);
    let section = &table[table.find("\nPC sampling:").unwrap()..];
    assert!(
        section.starts_with(
            "\nPC sampling: 2776442 samples in 3 kernels (1 context sampled every 2^11 cycles; \
             CUPTI counted 2776442 samples, 0 dropped, 0 in kernels without PCs)\n"
        ),
        "{section}"
    );
    // The bank-conflict kernel: stalled on the shared-memory pipe; its hottest instruction is
    // the add that waits for a conflicting load, all on line 43.
    assert!(section.contains(
        "  bank_conflicts(float*, int): 2640080 samples (95.1% of all): Stall MIO Throttle 53.9%, \
         Stall Short Scoreboard 44.2%, Stall Wait 0.7%, Selected 0.6%\n"
    ));
    assert!(section.contains(
        "FADD R9, R9, R4     0x03c0   797463  30.2%  pcsamp_kernels.cu:43  Stall Short Scoreboard 99.9%, Selected 0.1%\n"
    ), "{section}");
    assert!(section.contains(
        "pcsamp_kernels.cu:43  2623755  99.4%  Stall MIO Throttle 54.2%, Stall Short Scoreboard 44.5%, Selected 0.4%\n"
    ), "{section}");
    golden("pcsamp.table.txt", section);
    let json = rtrace(&[
        "report".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        "--nvdisasm".as_ref(),
        n.as_os_str(),
        trace.as_os_str(),
    ]);
    let pc = &json[json.find("\"pc_sampling\":").unwrap()..];
    golden("pcsamp.json", pc);
    let sass = rtrace(&[
        "sass".as_ref(),
        "--kernel".as_ref(),
        "strided".as_ref(),
        "--nvdisasm".as_ref(),
        n.as_os_str(),
        trace.as_os_str(),
    ]);
    assert!(
        sass.contains(
            "    /*02b0*/      39527  46.1%  FADD R0, R11, R0  <- Stall Long Scoreboard 100.0%"
        ),
        "{sass}"
    );
    golden("pcsamp.sass.txt", &sass);
    // Without nvdisasm: offsets only, and why.
    let bare = rtrace(&[
        "report".as_ref(),
        "--nvdisasm".as_ref(),
        "/nonexistent/nvdisasm".as_ref(),
        trace.as_os_str(),
    ]);
    assert!(bare.contains(
        "  instructions and source lines not shown: --nvdisasm /nonexistent/nvdisasm: no such file\n"
    ));
    assert!(
        bare.contains("?            0x03c0   797463  30.2%          Stall Short Scoreboard 99.9%"),
        "{bare}"
    );
}

/// A trace of process `pid` with one module of the sm_80 cubin: its image stored (compressed,
/// as librtrace.so writes it) or named, stored by another process of the run (`in_run`) or
/// not recorded.
fn trace_of_run(dir: &Path, pid: u32, stored: bool, in_run: bool) -> PathBuf {
    let bytes = std::fs::read(cubin_dir().join("sass_kernels.sm_80.cubin")).unwrap();
    let image = ModuleImage {
        module: 1,
        context: 1,
        hash: image_hash(&bytes),
        crc: 0,
        size: bytes.len() as u64,
        bytes: stored.then_some(bytes),
        in_run,
    };
    let module = ModuleRecord {
        module: 1,
        context: 1,
        cubin_size: image.size,
        ..Default::default()
    };
    let b = Builder::new(&header(pid, &["./app"]))
        .chunk(ChunkKind::ModuleImage, 0, &image.encode())
        .chunk(ChunkKind::Modules, 0, &module.to_bytes());
    let path = dir.join(format!("run-{pid}.bin"));
    std::fs::write(&path, b.bytes).unwrap();
    path
}

fn sass(traces: &[&Path]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rtrace"))
        .args(["sass", "--kernel", "^saxpy", "--nvdisasm"])
        .arg(nvdisasm())
        .args(traces)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn images_are_found_in_any_trace_of_the_run() {
    let dir = std::env::temp_dir().join(format!("rtrace-sass-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Process 81 stored the image; 82, of the same run, named it.
    let first = trace_of_run(&dir, 81, true, false);
    let second = trace_of_run(&dir, 82, false, true);
    let whole = std::fs::metadata(cubin_dir().join("sass_kernels.sm_80.cubin"))
        .unwrap()
        .len();
    let stored = std::fs::metadata(&first).unwrap().len();
    let named = std::fs::metadata(&second).unwrap().len();
    // Compressed: the trace holding it is smaller than the image alone.
    assert!(stored < whole, "{stored} bytes for an image of {whole}");
    assert_eq!(stored - named, 2203, "the compressed image");

    let (code, alone, err) = sass(&[&first]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert!(alone.starts_with("saxpy(float, float const*, float*, int)  [sm_80, image "));
    // The second trace alone: the image is in a trace not given.
    assert_eq!(
        sass(&[&second]),
        (
            Some(2),
            String::new(),
            "rtrace: no module images to disassemble: 1 module image is stored in another \
             trace of the same run (rtrace record stores each image once per run): give all \
             of the run's traces\n"
                .to_string()
        )
    );
    // Both, or their directory: found by hash.
    assert_eq!(
        sass(&[&second, &first]),
        (Some(0), alone.clone(), String::new())
    );
    assert_eq!(sass(&[&dir]), (Some(0), alone.clone(), String::new()));

    // Recorded without images: how to record them.
    std::fs::remove_file(&first).unwrap();
    std::fs::remove_file(&second).unwrap();
    let bare = trace_of_run(&dir, 83, false, false);
    assert_eq!(
        sass(&[&bare]),
        (
            Some(2),
            String::new(),
            "rtrace: no module images to disassemble: 1 module image was not recorded (images \
             are stored with --pc-sampling or --metrics, or when asked for: rtrace record \
             --module-images, RTRACE_MODULE_IMAGES=1)\n"
                .to_string()
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}
