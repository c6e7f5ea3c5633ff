//! Every structure of this crate laid out as CUPTI's headers lay it out: for each one declared
//! through `params!` (found in `src/lib.rs` and `src/pm_sampling.rs`, and all of them in `layouts()`), the C structure
//! its doc names is read from the headers in `$CUDA_INCLUDE`, a C++ program built with `g++`
//! prints the offset and size of each of its members, and member by member, in order, they
//! must equal the Rust fields', whose names must be the members' (`pChipName` is
//! `chip_name`). A field declared in the wrong order, with the wrong width, under another
//! name or missing fails here.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

const HEADERS: [&str; 6] = [
    "cupti_profiler_host.h",
    "cupti_profiler_target.h",
    "cupti_target.h",
    "cupti_range_profiler.h",
    "cupti_sass_metrics.h",
    "cupti_pmsampling.h",
];

/// (C name, Rust name) of every `params!` invocation of `src/lib.rs`, in order.
fn declared() -> Vec<(String, String)> {
    let src = [
        include_str!("../src/lib.rs"),
        include_str!("../src/pm_sampling.rs"),
    ]
    .concat();
    let mut out = Vec::new();
    for block in src.split("params!(").skip(1) {
        let mut lines = block.lines().map(str::trim).filter(|l| !l.is_empty());
        let doc = lines.next().unwrap_or_default();
        let Some(c) = doc.strip_prefix("/// `").and_then(|d| d.split('`').next()) else {
            continue; // the macro's own definition and its internal arms
        };
        let rust = lines
            .find(|l| !l.starts_with("///"))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_default();
        out.push((c.to_string(), rust.to_string()));
    }
    out
}

/// The members of `typedef struct [name] { ... } name;` in `text`, in order.
fn members(text: &str, name: &str) -> Option<Vec<String>> {
    let end = text.find(&format!("}} {name};"))?;
    let start = text[..end].rfind("typedef struct")?;
    let body = &text[text[start..end].find('{')? + start + 1..end];
    let mut clean = String::new();
    for line in body.lines() {
        let line = line.split("//").next().unwrap_or_default();
        clean.push_str(line);
        clean.push('\n');
    }
    while let Some(a) = clean.find("/*") {
        let b = clean[a..].find("*/").map_or(clean.len(), |b| a + b + 2);
        clean.replace_range(a..b, " ");
    }
    Some(
        clean
            .split(';')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(|d| {
                let d = d.split('[').next().unwrap_or(d).trim_end();
                d.rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or(d)
                    .to_string()
            })
            .collect(),
    )
}

/// A member's name as the Rust field's is written, without underscores: `pChipName` and
/// `ppMetricNames` lose their pointer prefix, `structSize` is `structsize`.
fn same_name(member: &str) -> String {
    let m = member
        .strip_prefix("pp")
        .or_else(|| member.strip_prefix('p'))
        .filter(|rest| rest.starts_with(|c: char| c.is_ascii_uppercase()))
        .unwrap_or(member);
    m.replace('_', "").to_lowercase()
}

#[test]
fn every_structure_lays_out_as_its_header() {
    let include = PathBuf::from(std::env::var("CUDA_INCLUDE").expect(
        "CUDA_INCLUDE: the CUDA 13 headers (tools/setup-cuda.sh prints where it put them)",
    ));
    let declared = declared();
    let layouts: BTreeMap<&str, rtrace_cupti_abi::Fields> =
        rtrace_cupti_abi::layouts().into_iter().collect();
    let mut names: Vec<&str> = declared.iter().map(|(_, r)| r.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        layouts.keys().copied().collect::<Vec<_>>(),
        "layouts() must list every structure declared through params!"
    );

    let text: String = HEADERS
        .iter()
        .map(|h| std::fs::read_to_string(include.join(h)).unwrap_or_else(|e| panic!("{h}: {e}")))
        .collect();
    let mut program = String::from("#include <cstdio>\n#include <cstddef>\n");
    for h in HEADERS {
        program.push_str(&format!("#include <{h}>\n"));
    }
    program.push_str("int main() {\n");
    let mut want = Vec::new();
    for (c, rust) in &declared {
        let members = members(&text, c).unwrap_or_else(|| panic!("{c} not found in the headers"));
        let fields = layouts[rust.as_str()];
        assert_eq!(
            members.len(),
            fields.len(),
            "{rust} has {} fields, {c} {} members: {members:?}",
            fields.len(),
            members.len()
        );
        for (m, (field, offset, size)) in members.iter().zip(fields.iter()) {
            let bare = field.trim_start_matches("pp_").trim_start_matches("p_");
            assert_eq!(
                same_name(m),
                bare.replace('_', ""),
                "{rust}.{field} is {c}.{m}"
            );
            program.push_str(&format!(
                "    printf(\"%zu %zu\\n\", offsetof({c}, {m}), sizeof((({c} *)0)->{m}));\n"
            ));
            want.push((
                format!("{rust}.{field} ({c}.{m})"),
                format!("{offset} {size}"),
            ));
        }
    }
    program.push_str("    return 0;\n}\n");

    let dir = std::env::temp_dir().join(format!("cupti-abi-headers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cpp, bin) = (dir.join("offsets.cpp"), dir.join("offsets"));
    std::fs::write(&cpp, &program).unwrap();
    let built = Command::new("g++")
        .arg("-I")
        .arg(&include)
        .arg(&cpp)
        .arg("-o")
        .arg(&bin)
        .output()
        .expect("g++");
    assert!(
        built.status.success(),
        "g++: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let run = Command::new(&bin).output().unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let got = String::from_utf8(run.stdout).unwrap();
    let got: Vec<&str> = got.lines().collect();
    assert_eq!(got.len(), want.len());
    let wrong: Vec<String> = want
        .iter()
        .zip(&got)
        .filter(|((_, w), g)| w != *g)
        .map(|((what, w), g)| format!("{what}: offset and size {w}, the header's {g}"))
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
    // Every member of the 49 structures was compared.
    assert_eq!((declared.len(), got.len()), (49, 261));
}
