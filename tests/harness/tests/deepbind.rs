//! Libraries that bind the driver past rtrace (`RTLD_DEEPBIND`) are traced, or the trace says
//! which library escaped; `dlsym` of a function the driver lacks answers as without rtrace.

use rtrace_tests::*;
use std::collections::BTreeMap;

fn plugin(name: &str) -> String {
    build().bin.join(name).display().to_string()
}

/// The notices about libraries bound past rtrace.
fn library_notices(r: &Run) -> Vec<String> {
    r.trace()
        .notices
        .iter()
        .map(|n| n.message.clone())
        .filter(|m| m.starts_with("library "))
        .collect()
}

/// The relocations of driver functions in `lib`, by type (`readelf -rW`).
fn driver_relocations(lib: &str) -> BTreeMap<String, usize> {
    let out = std::process::Command::new("readelf")
        .args(["-rW", lib])
        .output()
        .expect("readelf");
    let mut m = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 5 && f[2].starts_with("R_X86_64_") && f[4].starts_with("cu") {
            *m.entry(f[2].to_string()).or_insert(0) += 1;
        }
    }
    m
}

/// Runs `deepbind` untraced and traced with `args`; checks same output and status, and returns
/// the traced run.
fn deepbind(args: &[&str], env: &[(&str, &str)], stdout: &str) -> Run {
    let plain = run(Spec::untraced("deepbind").args(args).env(env));
    let traced = run(Spec::traced("deepbind").args(args).env(env));
    assert_eq!(plain.stdout().trim_end(), stdout, "{}", plain.stderr());
    assert_eq!(traced.stdout(), plain.stdout(), "{}", traced.stderr());
    assert_eq!(traced.code(), Some(0));
    let t = traced.trace();
    check_invariants(&t);
    let end = t.end.as_ref().expect("end record");
    assert_eq!(end.reason, "exit");
    assert_eq!(end.dropped, 0);
    traced
}

fn total(r: &Run) -> u64 {
    counts(&r.traces()).values().sum()
}

#[test]
fn deepbind_now_every_call_traced_and_the_library_named() {
    let lib = plugin("libdeepbind_now.so");
    let r = deepbind(
        &["now", &lib, "10"],
        &[],
        "deepbind ok mode=now early=0 calls=13",
    );
    // cuInit, 10 cheap calls, one through the pointer, and the program's own call: every one
    // recorded, as the driver saw.
    assert_eq!(total(&r), 13);
    assert_eq!(
        counts(&r.traces()),
        *r.sim_counts().values().next().unwrap()
    );
    // Bound at load (RTLD_NOW), read-only after (-z now -z relro): a GLOB_DAT slot and the
    // other two functions' JUMP_SLOTs (the linker sends the calls of a function whose address is taken through its GOT slot), all redirected; the trace says the library was bound.
    let relocs = driver_relocations(&lib);
    assert_eq!(
        relocs,
        BTreeMap::from([
            ("R_X86_64_GLOB_DAT".to_string(), 1),
            ("R_X86_64_JUMP_SLOT".to_string(), 2)
        ])
    );
    assert_eq!(
        library_notices(&r),
        vec![format!(
            "library {lib} was bound to the driver directly (RTLD_DEEPBIND?): 3 slots redirected to rtrace; calls it made through them before are not in the trace"
        )]
    );
}

#[test]
fn deepbind_lazy_every_call_traced_silently() {
    let lib = plugin("libdeepbind_lazy.so");
    let r = deepbind(
        &["lazy", &lib, "10"],
        &[],
        "deepbind ok mode=lazy early=0 calls=12",
    );
    assert_eq!(total(&r), 12);
    assert_eq!(
        counts(&r.traces()),
        *r.sim_counts().values().next().unwrap()
    );
    // Nothing was called before the slots were redirected: nothing to say.
    assert_eq!(library_notices(&r), Vec::<String>::new());
}

#[test]
fn calls_made_before_the_scan_are_said() {
    // The constructor's 3 cuDriverGetVersion calls (while dlopen loads the plugin) bind that
    // slot to the driver and are not traced; the trace names the library.
    let lib = plugin("libdeepbind_lazy.so");
    let r = deepbind(
        &["lazy", &lib, "10"],
        &[("DEEPBIND_EARLY", "3")],
        "deepbind ok mode=lazy early=3 calls=12",
    );
    let traced = counts(&r.traces());
    assert_eq!(traced.values().sum::<u64>(), 12);
    assert_eq!(traced["cuDriverGetVersion"], 6);
    let sim = r.sim_counts().into_values().next().unwrap();
    assert_eq!(sim["cuDriverGetVersion"], 9);
    assert_eq!(sim.values().sum::<u64>(), 15);
    assert_eq!(
        library_notices(&r),
        vec![format!(
            "library {lib} was bound to the driver directly (RTLD_DEEPBIND?): 1 slot redirected to rtrace; calls it made through them before are not in the trace"
        )]
    );
}

#[test]
fn a_plugin_never_entered_is_named_at_exit() {
    // The plugin's constructor calls the driver 3 times; the program never enters the plugin
    // (no dlsym after it was loaded) nor calls the driver again: the last look, at exit, finds
    // its slots bound to the driver and the trace says so.
    let lib = plugin("libdeepbind_now.so");
    let r = deepbind(
        &["load", &lib],
        &[("DEEPBIND_EARLY", "3")],
        "deepbind ok mode=load calls=1",
    );
    assert_eq!(
        counts(&r.traces()),
        BTreeMap::from([("cuDriverGetVersion".to_string(), 1)])
    );
    assert_eq!(
        r.sim_counts().into_values().next().unwrap(),
        BTreeMap::from([("cuDriverGetVersion".to_string(), 4)])
    );
    assert_eq!(
        library_notices(&r),
        vec![format!(
            "library {lib} was bound to the driver directly (RTLD_DEEPBIND?): 3 slots redirected to rtrace; calls it made through them before are not in the trace"
        )]
    );
}

#[test]
fn a_process_whose_every_call_escaped_still_has_a_trace_naming_the_library() {
    // As above, but the program makes no driver call of its own: the trace exists only to say
    // which library escaped.
    let lib = plugin("libdeepbind_now.so");
    let r = deepbind(
        &["load", &lib, "quiet"],
        &[("DEEPBIND_EARLY", "3")],
        "deepbind ok mode=load calls=0",
    );
    assert_eq!(counts(&r.traces()), BTreeMap::new());
    assert_eq!(
        r.sim_counts().into_values().next().unwrap(),
        BTreeMap::from([("cuDriverGetVersion".to_string(), 3)])
    );
    assert_eq!(
        library_notices(&r),
        vec![format!(
            "library {lib} was bound to the driver directly (RTLD_DEEPBIND?): 3 slots redirected to rtrace; calls it made through them before are not in the trace"
        )]
    );
}

#[test]
fn a_library_whose_slots_cannot_be_written_is_named() {
    // The plugin sealed its read-only pages (mseal): its slots stay bound to the driver, its
    // 12 calls are not traced, the program's own call is, and the trace names the library.
    let lib = plugin("libdeepbind_sealed.so");
    let r = deepbind(
        &["now", &lib, "10"],
        &[],
        "deepbind ok mode=now early=0 calls=13",
    );
    assert_eq!(
        counts(&r.traces()),
        BTreeMap::from([("cuDriverGetVersion".to_string(), 1)])
    );
    assert_eq!(
        r.sim_counts()
            .into_values()
            .next()
            .unwrap()
            .values()
            .sum::<u64>(),
        13
    );
    assert_eq!(
        library_notices(&r),
        vec![format!(
            "library {lib} binds the driver directly (RTLD_DEEPBIND?): 3 slots could not be redirected to rtrace (Operation not permitted (os error 1)); calls through them are not traced"
        )]
    );
}

/// `dlsym_missing`'s lines: (route, name) → (found, error).
fn lookups(r: &Run) -> BTreeMap<(String, String), (bool, String)> {
    let mut m = BTreeMap::new();
    for line in r.stdout().lines().filter(|l| l.contains(" found=")) {
        let (route, rest) = line.split_once(' ').unwrap();
        let (name, rest) = rest.split_once(" found=").unwrap();
        let (found, error) = rest.split_once(" error=").unwrap();
        let key = (route.to_string(), name.to_string());
        // The lookups before the driver is loaded come first: keep them apart.
        let key = if m.contains_key(&key) {
            (format!("{route}+driver"), name.to_string())
        } else {
            key
        };
        m.insert(key, (found == "1", error.to_string()));
    }
    m
}

#[test]
fn dlsym_of_a_missing_function_answers_as_without_rtrace() {
    let lib = plugin("libdeepbind_lazy.so");
    let plain = run(Spec::untraced("dlsym_missing").args(&[&lib]));
    let traced = run(Spec::traced("dlsym_missing").args(&[&lib]));
    assert_eq!(plain.code(), Some(0), "{}", plain.stderr());
    assert_eq!(traced.code(), Some(0), "{}", traced.stderr());
    assert!(traced.stdout().ends_with("dlsym_missing ok calls=1\n"));
    assert_eq!(total(&traced), 1);
    let (p, t) = (lookups(&plain), lookups(&traced));
    assert_eq!(p.len(), 16);
    let (rtrace, t): (BTreeMap<_, _>, BTreeMap<_, _>) =
        t.into_iter().partition(|((route, _), _)| route == "rtrace");
    assert_eq!(t.keys().collect::<Vec<_>>(), p.keys().collect::<Vec<_>>());
    let prog = build().bin.join("dlsym_missing").display().to_string();
    let librtrace = librtrace().display().to_string();
    let driver = build().lib.join("libcuda.so.1").display().to_string();
    for ((route, name), (found, error)) in &p {
        let key = (route.clone(), name.clone());
        let (t_found, t_error) = &t[&key];
        let missing = format!("undefined symbol: {name}");
        match route.as_str() {
            // Not a driver function: exactly as without rtrace (the plugin's own symbol found
            // from its scope; from the program, libc's own error).
            _ if name == "cuPluginOwn" => {
                assert_eq!((t_found, t_error), (found, error), "{key:?}")
            }
            // RTLD_NEXT is left to libc: from the program, the next object is librtrace.so,
            // which exports every driver function (the limitation docs/architecture.md states).
            "next" => {
                assert!(!found, "{key:?}");
                assert!(*t_found, "{key:?}");
            }
            // Exactly as without rtrace, message included.
            "driver" | "plugin" => assert_eq!((t_found, t_error), (found, error), "{key:?}"),
            // The same answer; the message names librtrace.so where libc names the program.
            _ if !found => {
                assert!(!t_found, "{key:?}");
                assert_eq!(error, &format!("{prog}: {missing}"), "{key:?}");
                assert_eq!(t_error, &format!("{librtrace}: {missing}"), "{key:?}");
            }
            _ => assert_eq!((t_found, t_error), (found, error), "{key:?}"),
        }
    }
    // What the driver handle gives for the function it lacks, without rtrace as with it.
    assert_eq!(
        t[&("driver".to_string(), "cuGraphCreate".to_string())],
        (false, format!("{driver}: undefined symbol: cuGraphCreate"))
    );
    // A handle on librtrace.so: its export only where a definition follows it in the global
    // scope, which the driver, opened RTLD_LOCAL, is not.
    assert_eq!(
        rtrace,
        BTreeMap::from(["cuGraphCreate", "cuDriverGetVersion"].map(|n| (
            ("rtrace".to_string(), n.to_string()),
            (false, format!("{librtrace}: undefined symbol: {n}"))
        )))
    );
    // With the driver in the global scope, RTLD_DEFAULT finds the wrapper of what it has and
    // nothing for what it lacks.
    assert_eq!(
        t[&("global".to_string(), "cuDriverGetVersion".to_string())],
        (true, "(none)".to_string())
    );
    assert!(!t[&("global".to_string(), "cuGraphCreate".to_string())].0);
}
