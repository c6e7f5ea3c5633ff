//! The passes that read several inputs together in time order: memory in use over every
//! input ([`memory_pass`]) and the utilisation of GPUs that several processes shared
//! ([`shared_pass`]).

use super::input::{gpu_records, Input};
use crate::gpu_summary::{union, MemoryFold};
use crate::model::Trace;
use crate::read::index::{decode, ChunkRef, FileSource, Rereader};
use crate::read::inputs::StreamError;
use crate::read::merge::{merge, read_error, Sources};
use crate::read::records::{Kind, Rec};
use std::collections::HashMap;
use std::path::Path;

/// Memory in use per kind over every input: their allocation and free chunks read together,
/// in order of earliest time, and merged by (time, input, file order), as
/// [`crate::gpu_summary::memory_summary`] orders them; one file open per input that has any,
/// memory bounded by the chunks that overlap in time and the allocations in use.
pub(super) fn memory_pass(
    inputs: &[Input],
) -> Result<Vec<crate::gpu_summary::MemorySummary>, StreamError> {
    let mut sources = Vec::new();
    for (ti, input) in inputs.iter().enumerate() {
        let chunks: Vec<ChunkRef> = input
            .index
            .iter()
            .filter(|c| c.kind == Kind::Memory)
            .copied()
            .collect();
        if !chunks.is_empty() {
            sources.push((ti, FileSource::open(&input.path, chunks, &input.keep)?));
        }
    }
    let mut fold = MemoryFold::default();
    let mut src = Sources::new(sources, Rec::tag_trace);
    merge(&mut src, |rec| {
        if let Rec::Memory { trace, m, .. } = rec {
            fold.add(*trace, m);
        }
        Ok(())
    })
    // The fold writes nothing: a failure is a read's.
    .map_err(|e| read_error(Path::new(""), e))?;
    Ok(fold.rows())
}

/// The [`crate::gpu_summary::SharedDevice`] rows of `groups`: the GPU chunks of their traces read
/// together, in order of earliest start, each group's union settled as far as the next chunk's
/// start allows; one file open per trace, memory bounded by the chunks that overlap in time.
pub(super) fn shared_pass(
    traces: &[Trace],
    inputs: &[Input],
    groups: Vec<Vec<(usize, u32)>>,
) -> Result<Vec<crate::gpu_summary::SharedDevice>, StreamError> {
    let member: HashMap<(usize, u32), usize> = groups
        .iter()
        .enumerate()
        .flat_map(|(g, m)| m.iter().map(move |&k| (k, g)))
        .collect();
    let mut unions = vec![union::Union::default(); groups.len()];
    let mut files: HashMap<usize, Rereader> = HashMap::new();
    for &(ti, _) in member.keys() {
        if let std::collections::hash_map::Entry::Vacant(v) = files.entry(ti) {
            v.insert(Rereader::open(&inputs[ti].path)?);
        }
    }
    let mut chunks: Vec<(u64, usize, &ChunkRef)> = files
        .keys()
        .flat_map(|&ti| {
            let gpu = inputs[ti].index.iter().filter(|c| c.kind.gpu_work());
            gpu.map(move |c| (c.min_start, ti, c))
        })
        .collect();
    chunks.sort_by_key(|&(start, ti, c)| (start, ti, c.offset));
    for (start, ti, c) in chunks {
        for u in &mut unions {
            u.settle(start);
        }
        let input = &inputs[ti];
        let Some(file) = files.get_mut(&ti) else {
            continue;
        };
        let chunk = file.chunk_of(c)?;
        let records = decode(c, &chunk, &input.path)?;
        gpu_records(input, c, records, &mut |_, _, _, dev, _, s, e| {
            if let Some(&g) = member.get(&(ti, dev)) {
                unions[g].add(s, e);
            }
        });
    }
    Ok(groups
        .iter()
        .zip(unions)
        .map(|(g, u)| crate::gpu_summary::shared_row(traces, g, u))
        .collect())
}
