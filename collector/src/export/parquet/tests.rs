//! The schema against its documentation and its `_schema.json`.

use super::schema::{schema_json, SCHEMA_VERSION};
use super::tables::{PARTITIONS, TABLES};
use super::{check_output, partition_value};

/// docs/parquet.md's section of each table lists its columns, in order, with their types.
#[test]
fn every_column_is_documented_in_order() {
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/parquet.md"),
    )
    .unwrap();
    assert!(docs.contains(&format!("The schema's version is `{SCHEMA_VERSION}`")));
    for t in TABLES {
        let heading = format!("### `{}`\n", t.name);
        let at = docs
            .find(&heading)
            .unwrap_or_else(|| panic!("no section {heading}"));
        let section = &docs[at + heading.len()..];
        let section = &section[..section.find("\n### ").unwrap_or(section.len())];
        let documented: Vec<String> = section
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .map(|l| {
                let (name, rest) = l.split_once("` | ").unwrap();
                let ty = rest.split(" | ").next().unwrap();
                format!("{name} {ty}")
            })
            .collect();
        let declared: Vec<String> = t
            .columns
            .iter()
            .map(|c| {
                let null = if c.nullable { " (nullable)" } else { "" };
                format!("{} {}{null}", c.name, c.ty.name())
            })
            .collect();
        assert_eq!(documented, declared, "table {}", t.name);
    }
}

#[test]
fn schema_json_lists_every_table_and_column() {
    let json = schema_json(TABLES, PARTITIONS);
    assert!(json.starts_with(
        "{\"format\":\"rtrace-parquet\",\"schema_version\":\"1.0\",\"layout\":\
         \"TABLE/host=HOST/pid=PID/part-N.parquet\",\"partitions\":[{\"name\":\"host\""
    ));
    for t in TABLES {
        assert!(json.contains(&format!("{{\"name\":\"{}\",\"about\":", t.name)));
    }
    let columns: usize = TABLES.iter().map(|t| t.columns.len()).sum();
    assert_eq!(
        json.matches("\"meaning\":").count(),
        columns + PARTITIONS.len()
    );
    assert_eq!(TABLES.len(), 16);
}

#[test]
fn host_names_are_escaped_for_their_folder() {
    assert_eq!(partition_value("node07.cluster-a_1"), "node07.cluster-a_1");
    assert_eq!(partition_value("a/b=c d"), "a%2Fb%3Dc%20d");
    assert_eq!(partition_value(""), "unknown");
}

#[test]
fn output_directory_rules() {
    let dir = std::env::temp_dir().join(format!("rtrace-parquet-unit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(check_output(&dir, false), Ok(()));
    std::fs::create_dir_all(&dir).unwrap();
    assert_eq!(check_output(&dir, false), Ok(()));
    std::fs::write(dir.join("x"), b"").unwrap();
    assert!(check_output(&dir, false).unwrap_err().ends_with(
        "exists and is not empty; give --force-overwrite to replace an earlier dataset"
    ));
    assert!(check_output(&dir, true)
        .unwrap_err()
        .ends_with("is not an rtrace Parquet dataset (no _schema.json); not replacing it"));
    std::fs::write(dir.join("_schema.json"), b"{}").unwrap();
    assert_eq!(check_output(&dir, true), Ok(()));
    assert!(check_output(&dir.join("x"), false)
        .unwrap_err()
        .ends_with("exists and is not a directory"));
    std::fs::remove_dir_all(&dir).unwrap();
}
