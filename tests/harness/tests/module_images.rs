//! Module images (issue 20): stored only when something needs them (PC sampling, kernel
//! profiling) or when asked for (`RTRACE_MODULE_IMAGES=1`, `rtrace record --module-images`),
//! compressed, once per content across the processes of an `rtrace record` run; each module's
//! hash and CUPTI CRC are recorded either way. On the simulated driver, whose module image is
//! `common.h`'s `MODULE_IMAGE` (95 bytes of text).

use rtrace_collector::images::{find, Missing};
use rtrace_collector::{load_trace, Trace};
use rtrace_format::{ChunkKind, TraceReader, IMAGE_IN_RUN, IMAGE_ZSTD};
use rtrace_tests::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `common.h`'s `MODULE_IMAGE`, the image `direct` loads.
const MODULE_IMAGE: &[u8] = b"simcuda-module\n\
    kernel vecadd_f32 2000\n\
    kernel fill_u32 500\n\
    kernel add_u32 700\n\
    kernel empty 1000\n";

/// The bytes of `MODULE_IMAGE` compressed, in its chunk (zstd at level 3).
const PACKED: usize = 84;

/// CRC-32 (IEEE), as the simulated CUPTI computes `cuptiGetCubinCrc`.
fn ieee(data: &[u8]) -> u64 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    u64::from(!crc)
}

/// The payloads of the trace's module-image chunks, as written.
fn image_chunks(path: &Path) -> Vec<Vec<u8>> {
    let file = std::fs::File::open(path).unwrap();
    let mut r = TraceReader::new(std::io::BufReader::new(file)).unwrap();
    let mut out = Vec::new();
    while let Some(c) = r.next_chunk().unwrap() {
        if c.header.kind == ChunkKind::ModuleImage {
            out.push(c.payload);
        }
    }
    out
}

/// A chunk's `stored` bits.
fn stored_bits(payload: &[u8]) -> u32 {
    u32::from_le_bytes(payload[32..36].try_into().unwrap())
}

/// (module images named, bytes of images stored, in_run flags) of a trace.
fn images_of(t: &Trace) -> (usize, usize, Vec<bool>) {
    (
        t.module_images.len(),
        t.images.values().map(Vec::len).sum(),
        t.module_images.iter().map(|i| i.in_run).collect(),
    )
}

#[test]
fn images_are_stored_only_when_asked_for_and_compressed() {
    let hash = rtrace_format::image_hash(MODULE_IMAGE);
    assert_eq!(MODULE_IMAGE.len(), 95);

    // GPU activity alone: the module's hash and CRC, not its bytes.
    let r = run(Spec::traced("direct").env(&[("RTRACE_GPU_ACTIVITY", "1")]));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let t = r.trace();
    assert_eq!(images_of(&t), (1, 0, vec![false]));
    let img = &t.module_images[0];
    assert_eq!(
        (img.module, img.size, img.hash),
        (t.modules[0].module, 95, hash)
    );
    assert_eq!(img.crc, ieee(MODULE_IMAGE));
    let chunks = image_chunks(&r.trace_files()[0]);
    assert_eq!(chunks.iter().map(Vec::len).collect::<Vec<_>>(), [40]);
    assert_eq!(stored_bits(&chunks[0]), 0);
    assert_eq!(
        Missing::of(std::slice::from_ref(&t)),
        Missing {
            not_recorded: 1,
            in_other_traces: 0
        }
    );

    // Asked for: the bytes, compressed, once.
    let r =
        run(Spec::traced("direct")
            .env(&[("RTRACE_GPU_ACTIVITY", "1"), ("RTRACE_MODULE_IMAGES", "1")]));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let t = r.trace();
    assert_eq!(images_of(&t), (1, 95, vec![false]));
    assert_eq!(t.images[&hash], MODULE_IMAGE);
    assert_eq!(t.module_images[0].crc, ieee(MODULE_IMAGE));
    let chunks = image_chunks(&r.trace_files()[0]);
    assert_eq!(chunks.len(), 1);
    assert_eq!(stored_bits(&chunks[0]), IMAGE_ZSTD);
    assert_eq!(chunks[0].len(), 40 + PACKED);
    assert!(Missing::of(std::slice::from_ref(&t)).is_empty());

    // Asked for without GPU activity: module records come with them.
    let r = run(Spec::traced("direct").env(&[("RTRACE_MODULE_IMAGES", "1")]));
    let t = r.trace();
    assert_eq!((t.modules.len(), images_of(&t)), (1, (1, 95, vec![false])));
    assert!(t.kernels.is_empty());

    // Left out even where needed: RTRACE_MODULE_IMAGES=0.
    let r = run(Spec::traced("direct").env(&[
        ("RTRACE_GPU_ACTIVITY", "1"),
        ("RTRACE_MODULE_IMAGES", "0"),
        ("RTRACE_PC_SAMPLING", "1"),
    ]));
    assert_eq!(images_of(&r.trace()), (1, 0, vec![false]));
}

/// `rtrace record -o DIR/run-%p.bin OPTIONS -- sh -c SCRIPT`, the simulated driver and CUPTI
/// on the loader's path.
fn record_shell(dir: &Path, options: &[&str], script: &str) -> Output {
    let b = build();
    Command::new(rtrace_bin())
        .arg("record")
        .arg("-o")
        .arg(dir.join("run-%p.bin"))
        .args(options)
        .args(["--", "/bin/sh", "-c", script])
        .env("LD_LIBRARY_PATH", &b.lib)
        .env_remove("LD_PRELOAD")
        .env_remove("RTRACE_DEBUG")
        .env_remove("RTRACE_MODULE_IMAGES")
        .env_remove("NVTX_INJECTION64_PATH")
        .output()
        .unwrap()
}

/// The traces in `dir`, by their process's start.
fn run_traces(dir: &Path) -> Vec<(PathBuf, Trace)> {
    let mut v: Vec<(PathBuf, Trace)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .map(|p| {
            let t = load_trace(&p).unwrap();
            assert_eq!(t.damage, None, "{}", p.display());
            (p, t)
        })
        .collect();
    v.sort_by_key(|(_, t)| t.header.start.monotonic_ns);
    v
}

#[test]
fn processes_of_one_run_store_each_image_once() {
    let direct = build().bin.join("direct");
    let script = format!("{0} >/dev/null && {0} >/dev/null", direct.display());
    let hash = rtrace_format::image_hash(MODULE_IMAGE);

    let dir = fresh_dir("images-run");
    let out = record_shell(&dir, &["--module-images"], &script);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let traces = run_traces(&dir);
    assert_eq!(
        traces.len(),
        2,
        "{traces:?}",
        traces = traces.iter().map(|t| &t.0).collect::<Vec<_>>()
    );
    let (first, second) = (&traces[0], &traces[1]);
    assert_eq!(first.1.header.session, second.1.header.session);
    // The first to load the content stores it; the second names it, stored in the run.
    assert_eq!(images_of(&first.1), (1, 95, vec![false]));
    assert_eq!(images_of(&second.1), (1, 0, vec![true]));
    assert_eq!(second.1.module_images[0].hash, hash);
    assert_eq!(second.1.module_images[0].crc, ieee(MODULE_IMAGE));
    let bits: Vec<u32> = [&first.0, &second.0]
        .iter()
        .map(|p| stored_bits(&image_chunks(p)[0]))
        .collect();
    assert_eq!(bits, [IMAGE_ZSTD, IMAGE_IN_RUN]);
    assert_eq!(image_chunks(&first.0)[0].len(), 40 + PACKED);

    // Read together, the second trace's module has its image; alone, it says where it is.
    let both = [second.1.clone(), first.1.clone()];
    assert_eq!(find(&both, hash), Some(MODULE_IMAGE));
    assert!(Missing::of(&both).is_empty());
    let alone = std::slice::from_ref(&second.1);
    assert_eq!(find(alone, hash), None);
    assert_eq!(
        Missing::of(alone).line().unwrap(),
        "1 module image is stored in another trace of the same run (rtrace record stores \
         each image once per run): give all of the run's traces"
    );
    let report = |paths: &[&Path]| {
        let out = Command::new(rtrace_bin())
            .args(["report", "--format", "json"])
            .args(paths)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let sass = |paths: &[&Path]| {
        let out = Command::new(rtrace_bin())
            .args(["sass", "--nvdisasm"])
            .arg(cuda_include().join("../bin/nvdisasm"))
            .args(paths)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // `rtrace sass`: the second trace alone says where the image is; with the first, the
    // image is found and handed to nvdisasm (which refuses it: the simulated driver's image
    // is text, not a cubin; collector/tests/sass.rs lists real cubins across traces).
    assert_eq!(
        sass(&[&second.0]),
        (
            Some(2),
            "rtrace: no module images to disassemble: 1 module image is stored in another \
             trace of the same run (rtrace record stores each image once per run): give all \
             of the run's traces\n"
                .to_string()
        )
    );
    let (code, err) = sass(&[&second.0, &first.0]);
    assert_eq!(code, Some(2));
    let found = format!("nvdisasm failed on image {hash:016x}: nvdisasm fatal   : File ");
    assert!(err.contains(&found), "{err}");
    assert!(
        err.ends_with(&format!(
            "/{hash:016x}.cubin does not appear to be an Elf file\n"
        )),
        "{err}"
    );
    let table = |path: &Path| {
        let out = Command::new(rtrace_bin())
            .arg("report")
            .arg(path)
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let line = text.lines().find(|l| l.starts_with("  module images "));
        line.map(|l| l["  module images ".len()..].trim().to_string())
    };
    assert_eq!(
        (table(&first.0).unwrap(), table(&second.0).unwrap()),
        (
            "1 distinct for 1 module, 95 B stored".to_string(),
            "1 module, none stored here; 1 in another trace of the run".to_string()
        )
    );
    let stored_flags = |json: &str| json.matches("\"image_stored\":true").count();
    assert_eq!(stored_flags(&report(&[&second.0])), 0);
    assert_eq!(stored_flags(&report(&[&second.0, &first.0])), 2);
    assert_eq!(stored_flags(&report(&[&dir])), 2);

    // Without --module-images: neither stores the bytes, neither claims them.
    let dir = fresh_dir("images-run-default");
    let out = record_shell(&dir, &[], &script);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let traces = run_traces(&dir);
    assert_eq!(traces.len(), 2);
    for (_, t) in &traces {
        assert_eq!(images_of(t), (1, 0, vec![false]));
    }
    for (path, _) in &traces {
        assert_eq!(
            table(path).unwrap(),
            "not recorded (1 module; rtrace record --module-images stores them)"
        );
        let chunks = image_chunks(path);
        assert_eq!(chunks.iter().map(Vec::len).collect::<Vec<_>>(), [40]);
        assert_eq!(stored_bits(&chunks[0]), 0);
    }

    // Without rtrace record (no run): each process stores its own.
    let dir = fresh_dir("images-no-run");
    let status = Command::new("/bin/sh")
        .args(["-c", &script])
        .env("LD_LIBRARY_PATH", &build().lib)
        .env("LD_PRELOAD", librtrace())
        .env("RTRACE_OUTPUT", dir.join("run-%p.bin"))
        .env("RTRACE_GPU_ACTIVITY", "1")
        .env("RTRACE_MODULE_IMAGES", "1")
        .env_remove("RTRACE_STATUS_DIR")
        .env_remove("RTRACE_SESSION")
        .status()
        .unwrap();
    assert!(status.success());
    let traces = run_traces(&dir);
    assert_eq!(traces.len(), 2);
    for (_, t) in &traces {
        assert_eq!(images_of(t), (1, 95, vec![false]));
    }
}
