use super::*;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[test]
fn metric_names() {
    for ok in [
        "gpu__time_duration.sum",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "l1tex__t_sector_hit_rate.pct",
        "dram__bytes.sum.per_second",
        "smsp__inst_executed.max",
        "x__y.ratio",
    ] {
        assert!(metric_valid(ok), "{ok}");
    }
    for bad in [
        "",
        "bogus_metric",
        "gpu__time_duration",
        "sm__cycles_active.bogus",
        "smcycles.sum",
        "sm__cycles_active.sum.",
        "sm__cycles_active.sum..x",
        "Sm__cycles.sum",
    ] {
        assert!(!metric_valid(bad), "{bad}");
    }
    // Every metric of every named set is accepted.
    for set in rtrace_format::metric_sets::SETS {
        for m in set.metrics {
            assert!(metric_valid(m.name), "{}", m.name);
        }
    }
}

#[test]
fn pass_counts() {
    let got: Vec<usize> = (0..10).map(passes).collect();
    assert_eq!(got, [0, 1, 1, 1, 1, 2, 2, 2, 2, 3]);
}

#[test]
fn values() {
    assert_eq!(value("gpu__time_duration.sum", b"k", 2000), 2000.0);
    // 2000 ns at 1.98 GHz.
    assert_eq!(cycles(2000), 3960);
    assert_eq!(cycles(1), 1);
    assert_eq!(value("gpc__cycles_elapsed.max", b"k", 2000), 3960.0);
    assert_eq!(value("sm__cycles_active.avg", b"k", 2000), 3465.0);
    // FNV-1a 64 of "a\0b": computed independently.
    let mut h: u64 = 0xcbf29ce484222325;
    for b in [b'a', 0, b'b'] {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    assert_eq!(hash("a", b"b"), h);
    let pct = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
    let v = value(pct, b"vecadd_f32", 2000);
    assert_eq!(v, (hash(pct, b"vecadd_f32") % 10_000) as f64 / 100.0);
    assert!((0.0..100.0).contains(&v));
    let c = "smsp__inst_executed.sum";
    let v = value(c, b"vecadd_f32", 2000);
    assert_eq!(v, ((hash(c, b"vecadd_f32") >> 16) % 1_000_000) as f64);
    assert_eq!(v.fract(), 0.0);
    // Depends on the kernel, not on the duration.
    assert_eq!(value(c, b"vecadd_f32", 7), v);
    assert_ne!(value(c, b"other", 2000), v);
}

#[test]
fn config_image_round_trip() {
    let m = s(&["a__b.sum", "c__d.avg", "e__f.max", "g__h.min", "i__j.sum"]);
    let img = config_image(&m);
    assert_eq!(img.len() % 8, 0);
    assert_eq!(read_config(&img), Some((m, 2)));
    assert_eq!(read_config(&img[..8]), None);
    assert_eq!(read_config(b"garbage garbage garbage"), None);
}

#[test]
fn counter_data_image() {
    let m = s(&["gpu__time_duration.sum"]);
    let size = data_size(&m, 2);
    assert_eq!(size, 32 + 24 + 2 * SLOT);
    let mut img = vec![0xffu8; size];
    data_init(&mut img, &m, 2);
    assert_eq!(read_data(&img), Some((2, 0, 56)));
    let r = |n: &str| Range {
        name: n.as_bytes().to_vec(),
        subject: b"kern".to_vec(),
        duration_ns: 5,
        passes: 3,
        launches: 1,
    };
    assert_eq!(data_append(&mut img, &[r("0")]), 0);
    assert_eq!(data_append(&mut img, &[r("1"), r("2"), r("3")]), 2);
    assert_eq!(read_data(&img), Some((2, 2, 56)));
    assert_eq!(data_range(&img, 1), Some(r("1")));
    assert_eq!(data_range(&img, 2), None);
    let nested = [b"outer".as_slice(), b"inner"].join(&LEVEL_SEP);
    assert_eq!(display_name(&nested, b"::"), b"outer::inner");
    assert_eq!(&availability_image("GH100")[..13], b"SIMCAVL\0GH100");
}
