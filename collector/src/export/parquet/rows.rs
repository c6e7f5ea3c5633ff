//! The rows of the record tables (`api_calls`, `kernels`, `copies`, `memsets`, `memory`,
//! `syncs`), written a chunk at a time as a trace's chunks are read again in file order
//! ([`Records`]): each record kept by the filter (its times already on the dataset's clock) is
//! one row, named through the names the first read gathered ([`Names`]).

use super::columns::TableFile;
use super::values::Fill;
use crate::filter::RecordFilter;
use crate::model::Trace;
use crate::read::records::{Gpu, Records};
use rtrace_format::{in_runtime, runtime_cbid, ApiRecord, MemcpyRecord, FLAG_CORRELATED, ID_NONE};
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

/// The four columns each GPU record table opens with, of `rows` whose correlation id (or
/// none), start and end `f` gives: the id, start, end and duration, ns.
fn gpu_times<'f, 'a, R>(
    c: &'f mut Fill<'a>,
    rows: &[R],
    f: impl Fn(&R) -> (Option<i64>, u64, u64),
) -> &'f mut Fill<'a> {
    c.opt_ints(rows.iter().map(|r| f(r).0))
        .ints(rows.iter().map(|r| f(r).1 as i64))
        .ints(rows.iter().map(|r| f(r).2 as i64))
        .ints(rows.iter().map(|r| {
            let (_, start, end) = f(r);
            end.saturating_sub(start) as i64
        }))
}

fn stream(s: u32) -> Option<i64> {
    (s != ID_NONE).then_some(i64::from(s))
}

/// A correlation id: null when 0 (none).
fn nonzero(correlation: u64) -> Option<i64> {
    (correlation != 0).then_some(correlation as i64)
}

/// A graph id or node id: null when 0 (not launched by a graph).
fn graph(id: u64) -> Option<i64> {
    (id != 0).then_some(id as i64)
}

impl RecordTables {
    /// Writes the rows of a chunk's `records` (of thread `thread`, for API records) that `keep`
    /// keeps, a column at a time.
    pub fn write(
        &mut self,
        names: &mut Names,
        keep: &RecordFilter,
        thread: u64,
        records: Records,
    ) -> io::Result<()> {
        match records {
            Records::Api(v) => {
                let kept: Vec<_> = v.into_iter().filter_map(|r| keep.api(r)).collect();
                self.api.write_rows(&kept, |c, rows| {
                    let runtime = |r: &ApiRecord| runtime_cbid(r.function).is_some();
                    c.ints(rows.iter().map(|_| thread as i64))
                        .ints(rows.iter().map(|r| r.correlation as i64))
                        .ints(rows.iter().map(|r| r.start_ns as i64))
                        .ints(rows.iter().map(|r| r.end_ns as i64))
                        .ints(
                            rows.iter()
                                .map(|r| r.end_ns.saturating_sub(r.start_ns) as i64),
                        )
                        .syms(
                            rows,
                            |r| u64::from(runtime(r)),
                            |r| if runtime(r) { "runtime" } else { "driver" },
                        )
                        .syms(
                            rows,
                            |r| u64::from(r.function),
                            |r| names.function(r.function),
                        )
                        .ints(rows.iter().map(|r| i64::from(r.function)))
                        .bools(rows.iter().map(|r| in_runtime(r.function)))
                        .ints(rows.iter().map(|r| i64::from(r.result)));
                })?;
            }
            Records::Kernels(v) => {
                let kept: Vec<_> = v.into_iter().filter_map(|k| keep.kernel(k)).collect();
                self.kernels.write_rows(&kept, |c, rows| {
                    let times = |k: &_| {
                        let correlation = Gpu::Kernel(k).correlation().map(|c| c as i64);
                        (correlation, k.start_ns, k.end_ns)
                    };
                    gpu_times(c, rows, times)
                        .syms(
                            rows,
                            |k| u64::from(k.name),
                            |k| names.kernel(k.name).0.clone(),
                        )
                        .syms(
                            rows,
                            |k| u64::from(k.name),
                            |k| names.kernel(k.name).1.clone(),
                        )
                        .ints(rows.iter().map(|k| i64::from(k.device)))
                        .ints(rows.iter().map(|k| i64::from(k.context)))
                        .opt_ints(rows.iter().map(|k| stream(k.stream)))
                        .opt_ints(rows.iter().map(|k| graph(u64::from(k.graph_id))))
                        .opt_ints(rows.iter().map(|k| graph(k.graph_node_id)));
                    for axis in 0..3 {
                        c.ints(rows.iter().map(|k| i64::from(k.grid[axis])));
                    }
                    for axis in 0..3 {
                        c.ints(rows.iter().map(|k| i64::from(k.block[axis])));
                    }
                    c.ints(rows.iter().map(|k| i64::from(k.registers_per_thread)))
                        .ints(rows.iter().map(|k| i64::from(k.static_shared_memory)))
                        .ints(rows.iter().map(|k| i64::from(k.dynamic_shared_memory)))
                        .ints(rows.iter().map(|k| i64::from(k.local_memory_per_thread)));
                })?;
            }
            Records::Memcpys(v) => {
                let kept: Vec<_> = v
                    .into_iter()
                    .filter_map(|m| Some((keep.memcpy(m)?, None)))
                    .collect();
                self.copies(&kept)?;
            }
            Records::PeerCopies(v) => {
                let kept: Vec<_> = v
                    .into_iter()
                    .filter_map(|p| {
                        let ends = [p.src_device, p.src_context, p.dst_device, p.dst_context];
                        Some((keep.memcpy(p.copy)?, Some(ends.map(i64::from))))
                    })
                    .collect();
                self.copies(&kept)?;
            }
            Records::Memsets(v) => {
                let kept: Vec<_> = v.into_iter().filter_map(|s| keep.memset(s)).collect();
                self.memsets.write_rows(&kept, |c, rows| {
                    let times = |s: &_| {
                        let correlation = Gpu::Memset(s).correlation().map(|c| c as i64);
                        (correlation, s.start_ns, s.end_ns)
                    };
                    gpu_times(c, rows, times)
                        .ints(rows.iter().map(|s| s.bytes as i64))
                        .ints(rows.iter().map(|s| i64::from(s.value)))
                        .ints(rows.iter().map(|s| i64::from(s.device)))
                        .ints(rows.iter().map(|s| i64::from(s.context)))
                        .opt_ints(rows.iter().map(|s| stream(s.stream)))
                        .opt_ints(rows.iter().map(|s| graph(u64::from(s.graph_id))))
                        .opt_ints(rows.iter().map(|s| graph(s.graph_node_id)));
                })?;
            }
            Records::Memory(v) => {
                let kept: Vec<_> = v.into_iter().filter_map(|m| keep.memory(m)).collect();
                self.memory.write_rows(&kept, |c, rows| {
                    c.opt_ints(rows.iter().map(|m| nonzero(m.correlation)))
                        .ints(rows.iter().map(|m| m.timestamp_ns as i64))
                        .syms(rows, |m| m.operation as u64, |m| m.operation.name())
                        .syms(rows, |m| m.kind as u64, |m| m.kind.name())
                        .ints(rows.iter().map(|m| m.address as i64))
                        .ints(rows.iter().map(|m| m.bytes as i64))
                        .ints(rows.iter().map(|m| i64::from(m.device)))
                        .ints(rows.iter().map(|m| i64::from(m.context)))
                        .opt_ints(rows.iter().map(|m| stream(m.stream)))
                        .bools(rows.iter().map(|m| m.is_async));
                })?;
            }
            Records::Syncs(v) => {
                let kept: Vec<_> = v.into_iter().filter_map(|y| keep.sync(y)).collect();
                self.syncs.write_rows(&kept, |c, rows| {
                    c.opt_ints(rows.iter().map(|y| nonzero(y.correlation)))
                        .ints(rows.iter().map(|y| y.start_ns as i64))
                        .ints(rows.iter().map(|y| y.end_ns as i64))
                        .ints(
                            rows.iter()
                                .map(|y| y.end_ns.saturating_sub(y.start_ns) as i64),
                        )
                        .syms(rows, |y| y.kind as u64, |y| y.kind.name())
                        .ints(rows.iter().map(|y| i64::from(y.context)))
                        .opt_ints(rows.iter().map(|y| stream(y.stream)))
                        .opt_ints(rows.iter().map(|y| stream(y.event)))
                        .ints(rows.iter().map(|y| i64::from(y.result)));
                })?;
            }
            // NVTX events are written as the ranges they make (meta.rs).
            Records::Nvtx(_) => {}
        }
        Ok(())
    }

    /// Copies, each with its peer-to-peer ends (source and destination device and context)
    /// when it is a peer-to-peer copy.
    fn copies(&mut self, kept: &[(MemcpyRecord, Option<[i64; 4]>)]) -> io::Result<()> {
        self.copies.write_rows(kept, |c, rows| {
            let times = |(m, _): &(MemcpyRecord, _)| {
                let correlated = u32::from(m.flags) & FLAG_CORRELATED != 0;
                (
                    correlated.then_some(m.correlation as i64),
                    m.start_ns,
                    m.end_ns,
                )
            };
            gpu_times(c, rows, times)
                .syms(rows, |(m, _)| m.kind as u64, |(m, _)| m.kind.name())
                .ints(rows.iter().map(|(m, _)| m.bytes as i64))
                .syms(rows, |(m, _)| m.src_kind as u64, |(m, _)| m.src_kind.name())
                .syms(rows, |(m, _)| m.dst_kind as u64, |(m, _)| m.dst_kind.name())
                .ints(rows.iter().map(|(m, _)| i64::from(m.device)))
                .ints(rows.iter().map(|(m, _)| i64::from(m.context)))
                .opt_ints(rows.iter().map(|(m, _)| stream(m.stream)))
                .opt_ints(rows.iter().map(|(m, _)| graph(u64::from(m.graph_id))))
                .opt_ints(rows.iter().map(|(m, _)| graph(m.graph_node_id)));
            for end in 0..4 {
                c.opt_ints(rows.iter().map(|(_, ends)| ends.map(|e| e[end])));
            }
        })
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
