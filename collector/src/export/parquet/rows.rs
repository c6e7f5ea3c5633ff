//! The rows of the record tables (`api_calls`, `kernels`, `copies`, `memsets`, `memory`,
//! `syncs`), written a chunk at a time as a trace's chunks are read again in file order
//! ([`Records`]): each record kept by the filter (its times already on the dataset's clock) is
//! one row, named through the names the first read gathered ([`Names`]).

use super::columns::TableFile;
use crate::filter::RecordFilter;
use crate::model::Trace;
use crate::read::records::{Gpu, Records};
use rtrace_format::{in_runtime, runtime_cbid, FLAG_CORRELATED, ID_NONE};
use std::collections::HashMap;
use std::io;

/// A trace's function and kernel names, looked up once per id (kernels demangled once).
pub struct Names {
    functions: HashMap<u32, String>,
    /// Kernel name id → (demangled, as recorded).
    kernels: HashMap<u32, (String, String)>,
}

impl Names {
    pub fn of(t: &Trace) -> Names {
        Names {
            functions: t.functions.clone(),
            kernels: t
                .kernel_names
                .keys()
                .map(|&id| {
                    (
                        id,
                        (t.kernel_display_name(id), t.kernel_name(id).into_owned()),
                    )
                })
                .collect(),
        }
    }

    fn function(&mut self, id: u32) -> String {
        self.functions
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("function#{id}"))
    }

    fn kernel(&mut self, id: u32) -> &(String, String) {
        self.kernels.entry(id).or_insert_with(|| {
            let name = format!("kernel#{id}");
            (name.clone(), name)
        })
    }
}

/// The record tables of one partition.
pub struct RecordTables {
    pub api: TableFile,
    pub kernels: TableFile,
    pub copies: TableFile,
    pub memsets: TableFile,
    pub memory: TableFile,
    pub syncs: TableFile,
}

fn stream(s: u32) -> Option<i64> {
    (s != ID_NONE).then_some(i64::from(s))
}

/// A graph id or node id: null when 0 (not launched by a graph).
fn graph(id: u64) -> Option<i64> {
    (id != 0).then_some(id as i64)
}

impl RecordTables {
    /// Writes the rows of a chunk's `records` (of thread `thread`, for API records) that `keep`
    /// keeps.
    pub fn write(
        &mut self,
        names: &mut Names,
        keep: &RecordFilter,
        thread: u64,
        records: Records,
    ) -> io::Result<()> {
        match records {
            Records::Api(v) => {
                for r in v.into_iter().filter_map(|r| keep.api(r)) {
                    let runtime = runtime_cbid(r.function).is_some();
                    self.api
                        .u64(thread)
                        .u64(r.correlation)
                        .u64(r.start_ns)
                        .u64(r.end_ns)
                        .u64(r.end_ns.saturating_sub(r.start_ns))
                        .sym(u64::from(runtime), || {
                            if runtime {
                                "runtime"
                            } else {
                                "driver"
                            }
                        })
                        .sym(u64::from(r.function), || names.function(r.function))
                        .int(i64::from(r.function))
                        .bool(in_runtime(r.function))
                        .int(i64::from(r.result))
                        .end()?;
                }
            }
            Records::Kernels(v) => {
                for k in v.into_iter().filter_map(|k| keep.kernel(k)) {
                    self.kernels
                        .opt_int(Gpu::Kernel(&k).correlation().map(|c| c as i64))
                        .u64(k.start_ns)
                        .u64(k.end_ns)
                        .u64(k.end_ns.saturating_sub(k.start_ns))
                        .sym(u64::from(k.name), || names.kernel(k.name).0.clone())
                        .sym(u64::from(k.name), || names.kernel(k.name).1.clone())
                        .int(i64::from(k.device))
                        .int(i64::from(k.context))
                        .opt_int(stream(k.stream))
                        .opt_int(graph(u64::from(k.graph_id)))
                        .opt_int(graph(k.graph_node_id))
                        .int(i64::from(k.grid[0]))
                        .int(i64::from(k.grid[1]))
                        .int(i64::from(k.grid[2]))
                        .int(i64::from(k.block[0]))
                        .int(i64::from(k.block[1]))
                        .int(i64::from(k.block[2]))
                        .int(i64::from(k.registers_per_thread))
                        .int(i64::from(k.static_shared_memory))
                        .int(i64::from(k.dynamic_shared_memory))
                        .int(i64::from(k.local_memory_per_thread))
                        .end()?;
                }
            }
            Records::Memcpys(v) => self.copies(keep, v.into_iter().map(|m| (m, None)))?,
            Records::PeerCopies(v) => self.copies(
                keep,
                v.into_iter().map(|p| {
                    let ends = [p.src_device, p.src_context, p.dst_device, p.dst_context];
                    (p.copy, Some(ends.map(i64::from)))
                }),
            )?,
            Records::Memsets(v) => {
                for s in v.into_iter().filter_map(|s| keep.memset(s)) {
                    self.memsets
                        .opt_int(Gpu::Memset(&s).correlation().map(|c| c as i64))
                        .u64(s.start_ns)
                        .u64(s.end_ns)
                        .u64(s.end_ns.saturating_sub(s.start_ns))
                        .u64(s.bytes)
                        .int(i64::from(s.value))
                        .int(i64::from(s.device))
                        .int(i64::from(s.context))
                        .opt_int(stream(s.stream))
                        .opt_int(graph(u64::from(s.graph_id)))
                        .opt_int(graph(s.graph_node_id))
                        .end()?;
                }
            }
            Records::Memory(v) => {
                for m in v.into_iter().filter_map(|m| keep.memory(m)) {
                    self.memory
                        .opt_int((m.correlation != 0).then_some(m.correlation as i64))
                        .u64(m.timestamp_ns)
                        .sym(m.operation as u64, || m.operation.name())
                        .sym(m.kind as u64, || m.kind.name())
                        .u64(m.address)
                        .u64(m.bytes)
                        .int(i64::from(m.device))
                        .int(i64::from(m.context))
                        .opt_int(stream(m.stream))
                        .bool(m.is_async)
                        .end()?;
                }
            }
            Records::Syncs(v) => {
                for y in v.into_iter().filter_map(|y| keep.sync(y)) {
                    self.syncs
                        .opt_int((y.correlation != 0).then_some(y.correlation as i64))
                        .u64(y.start_ns)
                        .u64(y.end_ns)
                        .u64(y.end_ns.saturating_sub(y.start_ns))
                        .sym(y.kind as u64, || y.kind.name())
                        .int(i64::from(y.context))
                        .opt_int(stream(y.stream))
                        .opt_int(stream(y.event))
                        .int(i64::from(y.result))
                        .end()?;
                }
            }
            // NVTX events are written as the ranges they make (meta.rs).
            Records::Nvtx(_) => {}
        }
        Ok(())
    }

    fn copies(
        &mut self,
        keep: &RecordFilter,
        v: impl Iterator<Item = (rtrace_format::MemcpyRecord, Option<[i64; 4]>)>,
    ) -> io::Result<()> {
        for (m, ends) in v.filter_map(|(m, ends)| Some((keep.memcpy(m)?, ends))) {
            let correlated = u32::from(m.flags) & FLAG_CORRELATED != 0;
            self.copies
                .opt_int(correlated.then_some(m.correlation as i64))
                .u64(m.start_ns)
                .u64(m.end_ns)
                .u64(m.end_ns.saturating_sub(m.start_ns))
                .sym(m.kind as u64, || m.kind.name())
                .u64(m.bytes)
                .sym(m.src_kind as u64, || m.src_kind.name())
                .sym(m.dst_kind as u64, || m.dst_kind.name())
                .int(i64::from(m.device))
                .int(i64::from(m.context))
                .opt_int(stream(m.stream))
                .opt_int(graph(u64::from(m.graph_id)))
                .opt_int(graph(m.graph_node_id))
                .opt_int(ends.map(|e| e[0]))
                .opt_int(ends.map(|e| e[1]))
                .opt_int(ends.map(|e| e[2]))
                .opt_int(ends.map(|e| e[3]))
                .end()?;
        }
        Ok(())
    }

    /// Closes the files; the rows written.
    pub fn close(self) -> io::Result<u64> {
        Ok(self.api.close()?
            + self.kernels.close()?
            + self.copies.close()?
            + self.memsets.close()?
            + self.memory.close()?
            + self.syncs.close()?)
    }
}
