//! The Python package (pyproject.toml, python/): a wheel built by pip from this repository (its
//! backend, python/rtrace_build.py, running cargo for this test's profile), installed into a
//! fresh virtual environment with nothing else, gives the `rtrace` command with librtrace.so beside it
//! and the `rtrace` module; a Python program recorded by that command against the simulated
//! driver starts and stops capture and pushes external ids through it, and `rtrace.load` reads
//! the trace back.

use rtrace_tests::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ok(output: Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what}: {:?}\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Makes a new virtual environment in `dir`, builds the wheel with its pip (the system's Python
/// may have none) as `pip install .` does, cargo building this test's profile in its target
/// directory (nothing to do after `cargo build --workspace`), and installs it there; returns the
/// environment's `bin/`.
fn install_wheel(dir: &Path) -> PathBuf {
    let profile = if target_dir().ends_with("release") {
        "release"
    } else {
        "debug"
    };
    let venv = dir.join("venv");
    ok(
        Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .output()
            .expect("python3"),
        "python3 -m venv",
    );
    let bin = venv.join("bin");
    let wheels = dir.join("wheels");
    ok(
        Command::new(bin.join("python"))
            .args(["-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index"])
            .arg("--no-build-isolation")
            .arg("--wheel-dir")
            .arg(&wheels)
            .arg(root())
            .env("RTRACE_WHEEL_PROFILE", profile)
            .env("CARGO_TARGET_DIR", target_dir().parent().unwrap())
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
            .output()
            .expect("venv python"),
        "pip wheel",
    );
    let wheel: Vec<PathBuf> = std::fs::read_dir(&wheels)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(wheel.len(), 1, "{wheel:?}");
    let name = wheel[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("rtrace-") && name.ends_with("-py3-none-linux_x86_64.whl"),
        "{name}"
    );
    ok(
        Command::new(bin.join("python"))
            .args(["-m", "pip", "install", "--quiet", "--no-deps", "--no-index"])
            .arg(&wheel[0])
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
            .output()
            .expect("venv python"),
        "pip install",
    );
    bin
}

/// A command of the environment `bin`, with nothing of rtrace's or the tests' settings
/// inherited.
fn clean(bin: &Path, program: &str) -> Command {
    let mut cmd = Command::new(bin.join(program));
    for var in [
        "LD_PRELOAD",
        "RTRACE_LIB",
        "RTRACE_BIN",
        "RTRACE_OUTPUT",
        "RTRACE_DISABLE",
        "RTRACE_NVTX",
        "RTRACE_CAPTURE_RANGE",
        "NVTX_INJECTION64_PATH",
        "PYTHONPATH",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

#[test]
fn the_wheel_records_a_python_program_and_loads_its_report() {
    let dir = fresh_dir("wheel");
    let bin = install_wheel(&dir);
    assert!(bin.join("rtrace").is_file() && bin.join("librtrace.so").is_file());

    // Outside rtrace: the calls do nothing, and one warning says so.
    let outside = clean(&bin, "python")
        .args(["-W", "always", "-c"])
        .arg(
            "import rtrace\n\
             print(rtrace.under_rtrace(), rtrace.start(), rtrace.stop())\n\
             with rtrace.external_id(7) as v: print(v, rtrace.pop_external_id())\n\
             for bad in (1.5, '3', -1, 2**64, True):\n\
             \x20   try: rtrace.push_external_id(bad)\n\
             \x20   except (TypeError, ValueError) as e: print(type(e).__name__)",
        )
        .output()
        .expect("python");
    let stderr = String::from_utf8_lossy(&outside.stderr).into_owned();
    // Ids the C ABI cannot take are refused the same way outside rtrace as under it.
    assert_eq!(
        ok(outside, "outside rtrace"),
        "False None None\n7 None\nTypeError\nTypeError\nValueError\nValueError\nTypeError\n"
    );
    assert_eq!(stderr.matches("RuntimeWarning").count(), 1, "{stderr}");
    assert!(
        stderr.contains("rtrace.start: not running under rtrace"),
        "{stderr}"
    );

    // Recorded by the wheel's own command (which finds librtrace.so beside itself) against the
    // simulated driver, only between rtrace.start() and rtrace.stop().
    let script = root().join("tests/python/capture_steps.py");
    let out = clean(&bin, "rtrace")
        .args([
            "record",
            "--capture-range",
            "cudaProfilerApi",
            "--gpu-activity",
        ])
        .arg("--output")
        .arg(dir.join("trace-%p.bin"))
        .arg("--")
        .arg(bin.join("python"))
        .arg(&script)
        .env("LD_LIBRARY_PATH", &build().lib)
        .env("RTRACE_SIMULATED", "1")
        .output()
        .expect("rtrace record");
    let run = Run {
        output: out,
        dir: dir.clone(),
    };
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    assert_eq!(
        run.stdout(),
        "under rtrace: True\nstart: 0\nstep 100\nstep 101\nstep 102\nstop: 0\n\
         pop with nothing pushed: None\nwarnings: 0\n"
    );
    let traces = run.trace_files();
    assert_eq!(traces.len(), 1, "{traces:?}");

    let loaded = clean(&bin, "python")
        .arg(root().join("tests/python/load_summary.py"))
        .arg(&traces[0])
        .output()
        .expect("python");
    let text = ok(loaded, "load_summary.py");
    let mut lines = text.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("sections: processes api "));
    assert_eq!(
        lines.collect::<Vec<_>>(),
        [
            // cuInit is always recorded, even inside id 99 before start(); the launches before
            // start() and the one after stop() are not, nor are their kernels.
            "api cuCtxSynchronize 3",
            "api cuInit 2",
            "api cuLaunchKernel 8",
            "api cuProfilerStart 3",
            "api cuProfilerStop 3",
            "kernel step_kernel 8 16000",
            // rtrace.CUSTOM0 is CUPTI's CUSTOM0, 3; id 99, pushed and popped before start(),
            // is not reported.
            "external 3 100 2 2 4000",
            "external 3 101 2 2 4000",
            "external 3 102 2 2 4000",
            // Pushed and popped while paused: the start, launch, synchronize and stop inside
            // it, not the launch of the range after it.
            "external 3 200 4 1 2000",
            "devices 1",
            "command beside python: True",
            "no such summary: AttributeError",
        ]
    );
}
