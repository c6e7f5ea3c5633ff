//! Rendering a report: the process sections, the API summary and (when the
//! traces hold GPU activity) the GPU sections, as a table for people or as
//! CSV / JSON for programs.
//!
//! The files read top-down: this one, then `table`, `csv` and `json`, then `options`
//! (what is asked for).

mod csv;
mod json;
mod options;
mod table;

pub use options::{Format, RenderOptions, Section, TABLE_WIDTH};

use crate::model::Trace;
use crate::report::Sections;

/// The whole report over `traces` in `format`, ending with a newline; CSV
/// gives the API summary.
pub fn render_report(traces: &[Trace], format: Format) -> String {
    render_report_section(traces, format, Section::Api)
}

/// Like [`render_report`], with `section` choosing the table that
/// [`Format::Csv`] prints (the other formats always hold every section).
pub fn render_report_section(traces: &[Trace], format: Format, section: Section) -> String {
    render_sections(traces, &Sections::of(traces), format, section)
}

/// Like [`render_report_section`], with the sections computed from the records already
/// (`rtrace report` streams them: [`crate::report::report_inputs`]); `traces` give the
/// processes, names and the records other than API and GPU ones. The other options are
/// [`RenderOptions`]' defaults.
pub fn render_sections(
    traces: &[Trace],
    sections: &Sections,
    format: Format,
    section: Section,
) -> String {
    let options = RenderOptions {
        format,
        sections: if format == Format::Csv {
            vec![section]
        } else {
            Vec::new()
        },
        ..RenderOptions::default()
    };
    render(traces, sections, &options)
}

/// The report `options` ask for, over `traces` and their `sections` (as
/// [`render_sections`]).
pub fn render(traces: &[Trace], sections: &Sections, options: &RenderOptions) -> String {
    match options.format {
        Format::Table => table::render(traces, sections, options),
        Format::Csv if options.csv_section() == Section::SourceCounters => {
            csv::source_counters(traces, options.nvdisasm.as_deref())
        }
        Format::Csv => csv::render(sections, options.csv_section()),
        Format::Json => json::render(traces, sections, options),
    }
}
