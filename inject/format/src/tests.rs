use super::*;

fn sample_file(records: &[ApiRecord]) -> Vec<u8> {
    let header = ProcessHeader {
        pid: 1234,
        ppid: 1,
        command_line: vec!["./app".into(), "--x".into()],
        hostname: "h".into(),
        ..Default::default()
    };
    let mut file = encode_file_header(&header);
    let names = encode_function_names([(0, "cuInit"), (1, "cuMemAlloc_v2")]);
    file.extend_from_slice(&ChunkHeader::new(ChunkKind::FunctionNames, 0, 0, 0, &names).encode());
    file.extend_from_slice(&names);
    let mut payload = Vec::new();
    for r in records {
        r.write_to(&mut payload);
    }
    file.extend_from_slice(&ChunkHeader::new(ChunkKind::ApiRecords, 99, 0, 3, &payload).encode());
    file.extend_from_slice(&payload);
    file
}

fn recs() -> Vec<ApiRecord> {
    (0..3)
        .map(|i| ApiRecord {
            function: i % 2,
            result: i,
            start_ns: 100 * i as u64,
            end_ns: 100 * i as u64 + 7,
            correlation: i as u64 + 1,
        })
        .collect()
}

#[test]
fn crc32c_known_value() {
    assert_eq!(crc32(b"123456789"), 0xE306_9283);
}

#[test]
fn round_trip() {
    let file = sample_file(&recs());
    let mut r = TraceReader::new(&file[..]).unwrap();
    assert_eq!(r.header().pid, 1234);
    assert_eq!(r.header().command_line, vec!["./app", "--x"]);
    let names = r.next_chunk().unwrap().unwrap();
    assert_eq!(names.header.kind, ChunkKind::FunctionNames);
    assert_eq!(
        names.function_names().unwrap(),
        vec![
            FunctionName {
                id: 0,
                name: "cuInit".into()
            },
            FunctionName {
                id: 1,
                name: "cuMemAlloc_v2".into()
            }
        ]
    );
    let c = r.next_chunk().unwrap().unwrap();
    assert_eq!(c.header.dropped, 3);
    assert_eq!(c.api_records().unwrap(), recs());
    assert!(r.next_chunk().unwrap().is_none());
    assert_eq!(r.offset(), file.len() as u64);
}

#[test]
fn truncated_chunk_reports_its_offset() {
    let file = sample_file(&recs());
    let cut = file.len() - 5;
    let mut r = TraceReader::new(&file[..cut]).unwrap();
    let names = r.next_chunk().unwrap().unwrap();
    let next_at = names.offset + (CHUNK_HEADER_LEN + names.payload.len()) as u64;
    match r.next_chunk() {
        Err(ReadError::Truncated { offset, what }) => {
            assert_eq!(offset, next_at);
            assert_eq!(what, "chunk");
        }
        other => panic!("{other:?}"),
    }
    assert!(r.next_chunk().unwrap().is_none());
}

#[test]
fn corrupt_payload_fails_checksum() {
    let mut file = sample_file(&recs());
    let n = file.len();
    file[n - 1] ^= 0xff;
    let mut r = TraceReader::new(&file[..]).unwrap();
    r.next_chunk().unwrap().unwrap();
    assert!(matches!(r.next_chunk(), Err(ReadError::Corrupt { .. })));
}

#[test]
fn newer_major_is_refused_and_not_a_trace_detected() {
    let mut file = sample_file(&[]);
    file[8..10].copy_from_slice(&(FORMAT_MAJOR + 1).to_le_bytes());
    let e = TraceReader::new(&file[..]).err().unwrap();
    assert!(matches!(e, ReadError::NewerFormat { major, .. } if major == FORMAT_MAJOR + 1));
    assert!(e.to_string().contains("newer than this rtrace reads"));
    assert!(matches!(
        TraceReader::new(&b"hello world, not a trace"[..]),
        Err(ReadError::NotATrace)
    ));
    assert!(matches!(
        TraceReader::new(&MAGIC[..5]),
        Err(ReadError::Truncated { offset: 0, .. })
    ));
}

#[test]
fn unknown_kinds_are_carried() {
    let mut file = sample_file(&[]);
    file.extend_from_slice(&ChunkHeader::new(ChunkKind::Unknown(77), 0, 0, 0, b"xyz").encode());
    file.extend_from_slice(b"xyz");
    let mut r = TraceReader::new(&file[..]).unwrap();
    let kinds: Vec<_> = std::iter::from_fn(|| r.next_chunk().unwrap())
        .map(|c| c.header.kind)
        .collect();
    assert_eq!(
        kinds,
        vec![
            ChunkKind::FunctionNames,
            ChunkKind::ApiRecords,
            ChunkKind::Unknown(77)
        ]
    );
}

#[test]
fn serde_payloads_round_trip() {
    let end = ProcessEnd {
        reason: "exit".into(),
        records: 5,
        dropped: 1,
        ..Default::default()
    };
    let p = encode_value(&end);
    assert_eq!(decode_value::<ProcessEnd>(&p).unwrap(), end);
}

#[test]
fn borrowed_values_encode_as_the_owned_ones() {
    let end = ProcessEnd {
        end: ClockAnchor {
            monotonic_ns: 5,
            realtime_ns: 6,
        },
        reason: "signal 15".into(),
        records: 10,
        dropped: 2,
        unwrapped_lookups: 1,
        threads: 3,
    };
    let end_ref = ProcessEndRef {
        end: end.end,
        reason: &end.reason,
        records: end.records,
        dropped: end.dropped,
        unwrapped_lookups: end.unwrapped_lookups,
        threads: end.threads,
    };
    let mut buf = [0u8; 512];
    let n = encode_value_into(&end_ref, &mut buf).unwrap();
    assert_eq!(buf[..n], encode_value(&end)[..]);
    assert_eq!(decode_value::<ProcessEnd>(&buf[..n]), Ok(end));

    let info = ThreadInfo {
        tid: 77,
        name: "worker-1".into(),
    };
    let n = encode_value_into(
        &ThreadInfoRef {
            tid: info.tid,
            name: &info.name,
        },
        &mut buf,
    )
    .unwrap();
    assert_eq!(buf[..n], encode_value(&info)[..]);
    assert!(encode_value_into(&info, &mut buf[..3]).is_err());
}

#[test]
fn kernel_profiles_round_trip() {
    let setup = ProfilerSetup {
        context: 1,
        device: 0,
        time_ns: 5,
        chip: "GH100".into(),
        metrics: vec!["gpu__time_duration.sum".into()],
        passes: 1,
        replay: Replay::Kernel,
    };
    let p = KernelProfile {
        context: 1,
        correlation: 9,
        launch: 0,
        start_ns: 10,
        end_ns: 20,
        name: "_Z3addPf".into(),
        range: "0".into(),
        values: vec![1234.0],
        counter_data: vec![1, 2, 3],
    };
    assert_eq!(
        decode_value::<ProfilerSetup>(&encode_value(&setup)).unwrap(),
        setup
    );
    assert_eq!(decode_value::<KernelProfile>(&encode_value(&p)).unwrap(), p);
    assert_eq!(ChunkKind::from_u16(23), ChunkKind::ProfilerSetup);
    assert_eq!(ChunkKind::KernelProfile.to_u16(), 24);
}

#[test]
fn metric_lists_expand_sets_and_keep_raw_names_once() {
    use metric_sets::resolve;
    let r = resolve("SpeedOfLight, gpu__time_duration.sum,sm__warps_active.avg").unwrap();
    assert_eq!(
        r[0].name,
        "sm__throughput.avg.pct_of_peak_sustained_elapsed"
    );
    assert_eq!(
        r.iter()
            .filter(|c| c.name == "gpu__time_duration.sum")
            .count(),
        1
    );
    assert_eq!(r.last().unwrap().name, "sm__warps_active.avg");
    assert!(resolve("Roofline")
        .unwrap_err()
        .contains("unknown set or metric 'Roofline'"));
}

#[test]
fn the_session_follows_the_header_fields() {
    let header = ProcessHeader {
        pid: 7,
        hostname: "h".into(),
        session: "0123abcd".into(),
        ..Default::default()
    };
    let file = encode_file_header(&header);
    let r = TraceReader::new(&file[..]).unwrap();
    assert_eq!(r.header(), &header);
    assert_eq!(r.version(), (FORMAT_MAJOR, FORMAT_MINOR));
    // A reader of format 1.0 decodes the fields it knows and leaves the session unread.
    let body = encode_header_body(&header);
    let old: ProcessHeader = decode_value(&body).unwrap();
    assert_eq!(
        old,
        ProcessHeader {
            session: String::new(),
            ..header.clone()
        }
    );
    // A 1.0 body (no session) reads with the session empty.
    let v10 = encode_value(&header);
    assert_eq!(v10.len() + 9, body.len());
    assert_eq!(
        decode_header_body(&v10).unwrap(),
        ProcessHeader {
            session: String::new(),
            ..header.clone()
        }
    );
    // A session that cannot be read is an error, not an empty session.
    let mut bad = v10.clone();
    bad.push(200);
    assert!(decode_header_body(&bad)
        .unwrap_err()
        .starts_with("session: "));
}

#[test]
fn the_rank_variables_follow_the_session() {
    let header = ProcessHeader {
        pid: 7,
        session: "s".into(),
        rank_env: vec![
            ("RANK".into(), "3".into()),
            ("LOCAL_RANK".into(), "1".into()),
        ],
        ..Default::default()
    };
    let file = encode_file_header(&header);
    let r = TraceReader::new(&file[..]).unwrap();
    assert_eq!(r.header(), &header);
    assert_eq!(r.version(), (FORMAT_MAJOR, FORMAT_MINOR));
    // A body of the header fields and session alone reads with no rank variables.
    let body = encode_header_body(&header);
    let mut v21 = encode_value(&header);
    v21.extend_from_slice(&encode_value(&header.session));
    // Without rank variables, the body is that (what writers before them wrote).
    let none = ProcessHeader {
        rank_env: Vec::new(),
        ..header.clone()
    };
    assert_eq!(encode_header_body(&none), v21);
    assert_eq!(v21.len() + 21, body.len());
    let read = decode_header_body(&v21).unwrap();
    assert_eq!(read.session, "s");
    assert!(read.rank_env.is_empty());
    // A reader before them (header fields, then the session) leaves them unread.
    let old: ProcessHeader = decode_value(&body).unwrap();
    assert_eq!(old.pid, 7);
    let session: String = decode_value(&body[encode_value(&header).len()..]).unwrap();
    assert_eq!(session, "s");
    // Rank variables that cannot be read are an error.
    let mut bad = v21.clone();
    bad.push(200);
    assert!(decode_header_body(&bad)
        .unwrap_err()
        .starts_with("rank variables: "));
}

#[test]
fn source_counter_chunks_round_trip_and_name_their_counters() {
    let setup = SourceCounterSetup {
        context: 1,
        device: 0,
        time_ns: 5,
        chip: "GH100".into(),
        metrics: COUNTERS.iter().map(|c| c.metrics[0].to_string()).collect(),
        lazy_patching: true,
    };
    let launch = SourceCounterLaunch {
        context: 1,
        correlation: 9,
        launch: 0,
        start_ns: 10,
        end_ns: 20,
        name: "_Z1kPf".into(),
        functions: vec![SourceCounterFunction {
            cubin_crc: 0xabcd,
            function_index: 3,
            name: "_Z1kPf".into(),
            instructions: vec![InstructionCounters {
                pc_offset: 16,
                values: [1, 32, 8, 4, 0, 0, 2],
            }],
        }],
        dropped: 0,
    };
    let mut file = Vec::new();
    for (kind, bytes) in [
        (ChunkKind::SourceCounterSetup, encode_value(&setup)),
        (ChunkKind::SourceCounters, encode_value(&launch)),
    ] {
        file.extend_from_slice(&ChunkHeader::new(kind, 0, 0, 0, &bytes).encode());
        file.extend_from_slice(&bytes);
    }
    let mut header = encode_file_header(&ProcessHeader::default());
    header.extend_from_slice(&file);
    let mut r = TraceReader::new(&header[..]).unwrap();
    let c = r.next_chunk().unwrap().unwrap();
    assert_eq!(c.header.kind.to_u16(), 40);
    assert_eq!(c.value::<SourceCounterSetup>().unwrap(), setup);
    let c = r.next_chunk().unwrap().unwrap();
    assert_eq!(c.header.kind.to_u16(), 41);
    assert_eq!(c.value::<SourceCounterLaunch>().unwrap(), launch);
    assert_eq!(COUNTERS[GLOBAL_SECTORS_IDEAL].key, "global_sectors_ideal");
    assert_eq!(
        COUNTERS[DIVERGENT_BRANCH_TARGETS].metrics,
        ["smsp__sass_branch_targets_threads_divergent"]
    );
}
