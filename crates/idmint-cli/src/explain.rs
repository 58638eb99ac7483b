//! `idmint explain`: draws a layout's bits and says how long and how fast it lasts, with a
//! warning when it runs out within 10 years.
//!
//! Everything shown comes from the core (`Layout::segments`, `fields`, `capacity`); this module
//! only lays it out as text or JSON.

use std::io::Write;

use idmint_core::{Capacity, Clock, FieldInfo, Segment, SystemClock};
use serde::Serialize;

use crate::layout_arg::LayoutArgs;

/// The widest a diagram row may be, in columns.
const MAX_ROW_WIDTH: usize = 79;

/// The arguments of `idmint explain`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  idmint explain snowflake
  idmint explain --layout flake --epoch 946684800000
  idmint explain --layout-file orders.toml
  idmint explain trace-id --json")]
pub(crate) struct Args {
    /// The built-in layout to explain (the same as --layout). Default: snowflake.
    #[arg(value_name = "LAYOUT", conflicts_with_all = ["layout", "layout_file"])]
    name: Option<String>,

    #[command(flatten)]
    layout: LayoutArgs,

    /// Print one JSON object (layout, bits, segments, fields, capacity, warnings) instead of
    /// the drawing. Default: the drawing.
    #[arg(long)]
    json: bool,
}

/// What `explain --json` prints, in this order.
#[derive(Serialize)]
struct Explanation<'a> {
    layout: &'a str,
    /// The width of an ID: 64 or 128.
    bits: u32,
    /// The order of one generator's IDs (`idmint_core::Order`'s name).
    order: &'static str,
    /// The bit diagram, most significant first; `null` for `decimal-id`.
    segments: Option<&'a [Segment]>,
    fields: &'a [FieldInfo],
    capacity: &'a Capacity,
    /// Warnings about the layout's lifetime (the same lines as the drawing's).
    warnings: &'a [String],
}

/// Runs `idmint explain`.
pub(crate) fn run(args: &Args, out: &mut impl Write) -> anyhow::Result<()> {
    let layout = args.layout.resolve(args.name.as_deref())?;
    let now_ms = SystemClock.now_ms();
    let segments = layout.segments();
    let fields = layout.fields();
    let capacity = layout.capacity();
    let warnings = capacity.warnings(layout.name(), now_ms);
    if args.json {
        let explanation = Explanation {
            layout: layout.name(),
            bits: layout.id_bits(),
            order: layout.order().name(),
            segments: segments.as_deref(),
            fields: &fields,
            capacity: &capacity,
            warnings: &warnings,
        };
        serde_json::to_writer_pretty(&mut *out, &explanation)?;
        writeln!(out)?;
        return Ok(());
    }
    match &segments {
        Some(segments) => {
            writeln!(
                out,
                "{}: {}-bit id, most significant bit first",
                layout.name(),
                layout.id_bits()
            )?;
            writeln!(out)?;
            draw(&bit_cells(segments), out)?;
        }
        None => {
            let cells = digit_cells(&fields);
            let digits: u32 = cells.iter().map(|c| c.weight).sum();
            writeln!(
                out,
                "{}: {}-bit id read as {digits} decimal digits, most significant digit first",
                layout.name(),
                layout.id_bits()
            )?;
            writeln!(out)?;
            draw(&cells, out)?;
        }
    }
    writeln!(out)?;
    write_capacity(&capacity, now_ms, out)?;
    let order = layout.order();
    writeln!(out)?;
    writeln!(out, "order: {}", order.name())?;
    writeln!(out, "  {}", order.describe())?;
    if !layout.has_generator() {
        writeln!(out)?;
        writeln!(out, "ids of this layout come from a segment store (Postgres or a local file),")?;
        writeln!(out, "not from a generator: serve them with `idmint serve --layout sequence`")?;
    }
    if !warnings.is_empty() {
        writeln!(out)?;
        for warning in &warnings {
            writeln!(out, "warning: {warning}")?;
        }
    }
    Ok(())
}

/// The capacity part of the drawing.
fn write_capacity(capacity: &Capacity, now_ms: u64, out: &mut impl Write) -> anyhow::Result<()> {
    let mut rows: Vec<(&str, String)> = Vec::new();
    match (&capacity.start, capacity.tick_ms) {
        (Some(start), tick_ms) if tick_ms > 0 => {
            rows.push(("first time", start.clone()));
            let end = match (&capacity.end, capacity.end_ms) {
                (Some(end), Some(end_ms)) if end_ms > now_ms => {
                    format!("{end} (in {})", Capacity::span(end_ms - now_ms))
                }
                (Some(end), Some(end_ms)) => {
                    format!("{end} ({} ago)", Capacity::span(now_ms - end_ms))
                }
                _ if capacity.wrap_ms.is_some() => "never: the time field wraps around".to_owned(),
                _ => "beyond the range of 64-bit Unix milliseconds".to_owned(),
            };
            rows.push(("runs out", end));
            rows.push(("tick", tick(tick_ms)));
            rows.push(("ids per tick", format!("{} per generator", group(capacity.ids_per_tick))));
            rows.push((
                "ids per second",
                format!("{} per generator", group(capacity.ids_per_second_per_generator)),
            ));
            rows.push(("generators", group(capacity.generators)));
            let wraps = match capacity.wrap_ms {
                Some(wrap_ms) => format!("yes, every {}", wrap_period(wrap_ms)),
                None => "no".to_owned(),
            };
            rows.push(("wraps", wraps));
        }
        _ => {
            rows.push(("time", "none: the layout has no clock".to_owned()));
            rows.push((
                "ids",
                format!("{} per generator in all (a counter)", group(capacity.ids_per_tick)),
            ));
            rows.push(("generators", group(capacity.generators)));
            rows.push(("wraps", "no".to_owned()));
        }
    }
    let pad = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    writeln!(out, "capacity")?;
    for (name, value) in rows {
        writeln!(out, "  {name:<pad$}  {value}")?;
    }
    Ok(())
}

/// A tick length: `1 ms`, `10 ms`, `1 s`.
fn tick(tick_ms: u64) -> String {
    if tick_ms.is_multiple_of(1000) {
        format!("{} s", tick_ms / 1000)
    } else {
        format!("{tick_ms} ms")
    }
}

/// A wrap period: `2^25 s (about 388 days)` when it is a power of two seconds.
fn wrap_period(wrap_ms: u64) -> String {
    let about = Capacity::span(wrap_ms);
    if wrap_ms.is_multiple_of(1000) && (wrap_ms / 1000).is_power_of_two() {
        format!("2^{} s (about {about})", (wrap_ms / 1000).trailing_zeros())
    } else {
        format!("{} (about {about})", tick(wrap_ms))
    }
}

/// A number with thousands separators: `4,096,000`.
fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() * 4 / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One box of a diagram: its text, the numbers at its left and right edges, and its weight
/// (how many bits or digits it covers).
struct Cell {
    content: String,
    left: String,
    right: String,
    weight: u32,
}

impl Cell {
    /// The narrowest inner width that shows the content and both edge numbers.
    fn min_width(&self) -> usize {
        let edges = if self.right.is_empty() {
            self.left.len()
        } else {
            self.left.len() + 1 + self.right.len()
        };
        (self.content.len() + 2).max(edges)
    }
}

/// The boxes of a bit diagram.
fn bit_cells(segments: &[Segment]) -> Vec<Cell> {
    segments
        .iter()
        .map(|s| Cell {
            content: format!("{} ({})", s.label, s.width()),
            left: s.msb.to_string(),
            right: if s.msb == s.lsb { String::new() } else { s.lsb.to_string() },
            weight: s.width(),
        })
        .collect()
}

/// The boxes of a decimal diagram: each field takes as many digits as its largest value, and
/// the edge numbers are powers of ten.
fn digit_cells(fields: &[FieldInfo]) -> Vec<Cell> {
    let digits: Vec<u32> = fields.iter().map(|f| f.max.checked_ilog10().unwrap_or(0) + 1).collect();
    let mut low: u32 = digits.iter().sum();
    fields
        .iter()
        .zip(&digits)
        .map(|(f, &n)| {
            low -= n;
            Cell {
                content: format!("{} ({}..={})", f.name, f.min, f.max),
                left: format!("10^{}", low + n - 1),
                right: if n == 1 { String::new() } else { format!("10^{low}") },
                weight: n,
            }
        })
        .collect()
}

/// Draws cells as boxes, in rows of at most [`MAX_ROW_WIDTH`] columns, each row stretched so
/// that widths follow the weights where the text allows.
fn draw(cells: &[Cell], out: &mut impl Write) -> anyhow::Result<()> {
    let mut rows: Vec<&[Cell]> = Vec::new();
    let mut start = 0;
    let mut width = 1;
    for (i, cell) in cells.iter().enumerate() {
        let w = cell.min_width() + 1;
        if i > start && width + w > MAX_ROW_WIDTH {
            rows.push(&cells[start..i]);
            start = i;
            width = 1;
        }
        width += w;
    }
    rows.push(&cells[start..]);
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        draw_row(row, out)?;
    }
    Ok(())
}

/// Draws one row of boxes: edge numbers, top border, contents, bottom border.
fn draw_row(cells: &[Cell], out: &mut impl Write) -> anyhow::Result<()> {
    let widths = stretch(cells, MAX_ROW_WIDTH.saturating_sub(1 + cells.len()));
    let mut numbers = String::from(" ");
    let mut border = String::from("+");
    let mut middle = String::from("|");
    for (cell, &w) in cells.iter().zip(&widths) {
        let gap = w - cell.left.len();
        numbers.push_str(&format!("{}{:>gap$} ", cell.left, cell.right));
        border.push_str(&"-".repeat(w));
        border.push('+');
        middle.push_str(&format!("{:^w$}|", cell.content));
    }
    writeln!(out, "{}", numbers.trim_end())?;
    writeln!(out, "{border}")?;
    writeln!(out, "{middle}")?;
    writeln!(out, "{border}")?;
    Ok(())
}

/// Inner widths that add up to `total` (when the text allows), proportional to the weights,
/// none below a cell's minimum.
fn stretch(cells: &[Cell], total: usize) -> Vec<usize> {
    let mins: Vec<usize> = cells.iter().map(Cell::min_width).collect();
    // Water-filling: cells whose minimum exceeds their share keep their minimum, and the rest
    // share what is left by weight.
    let mut fixed = vec![false; cells.len()];
    loop {
        let fixed_width: usize = mins.iter().zip(&fixed).filter(|(_, f)| **f).map(|(m, _)| m).sum();
        let free_weight: u32 =
            cells.iter().zip(&fixed).filter(|(_, f)| !**f).map(|(c, _)| c.weight).sum();
        let per_weight = total.saturating_sub(fixed_width) as f64 / f64::from(free_weight.max(1));
        let mut changed = false;
        for (i, cell) in cells.iter().enumerate() {
            if !fixed[i] && (mins[i] as f64) >= f64::from(cell.weight) * per_weight {
                fixed[i] = true;
                changed = true;
            }
        }
        if !changed {
            let mut widths: Vec<usize> = cells
                .iter()
                .zip(&mins)
                .zip(&fixed)
                .map(
                    |((c, &m), &f)| {
                        if f { m } else { m.max((f64::from(c.weight) * per_weight) as usize) }
                    },
                )
                .collect();
            // Rounding down leaves a few columns: give them to the widest box.
            let used: usize = widths.iter().sum();
            if used < total
                && let Some(widest) = (0..widths.len()).max_by_key(|&i| widths[i])
            {
                widths[widest] += total - used;
            }
            return widths;
        }
    }
}

#[cfg(test)]
mod tests {
    use idmint_core::Layout;

    use super::*;

    #[test]
    fn numbers_are_grouped_by_thousands() {
        for (n, text) in [(0, "0"), (999, "999"), (1000, "1,000"), (4_096_000, "4,096,000")] {
            assert_eq!(group(n), text);
        }
    }

    #[test]
    fn every_builtin_diagram_fits_its_rows() {
        for (name, _) in Layout::builtins() {
            let layout = Layout::builtin(name).unwrap();
            let cells = match layout.segments() {
                Some(segments) => bit_cells(&segments),
                None => digit_cells(&layout.fields()),
            };
            let mut out = Vec::new();
            draw(&cells, &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            assert!(text.lines().all(|l| l.len() <= MAX_ROW_WIDTH), "{name}:\n{text}");
        }
    }
}
