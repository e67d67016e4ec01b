//! Tables: cells laid on a grid (colspans padded, rowspans filled down) and written as
//! Markdown tables when they are real tables.

use super::*;

/// A table's cells laid on a grid (colspans padded, rowspans filled down), when it is a real
/// data table.
pub(super) struct TableGrid {
    pub(super) caption: Option<u32>,
    pub(super) width: usize,
    pub(super) header: Vec<Option<u32>>,
    pub(super) rows: Vec<Vec<Option<u32>>>,
}

impl TableGrid {
    pub(super) fn analyze(arena: &Arena, table: u32) -> Option<TableGrid> {
        let attrs = arena.attrs(table)?;
        if matches!(attrs.role.as_str(), "presentation" | "none") || arena.node(table).table_below {
            return None;
        }
        let mut caption = None;
        let mut rows: Vec<(u32, bool)> = Vec::new();
        for child in arena.children(table) {
            match arena.tag(child) {
                Some(Tag::Caption) => caption = caption.or(Some(child)),
                Some(Tag::Tr) => rows.push((child, false)),
                Some(tag @ (Tag::TableHead | Tag::TableSection)) => {
                    let in_head = tag == Tag::TableHead;
                    rows.extend(
                        arena
                            .children(child)
                            .filter(|&r| arena.tag(r) == Some(Tag::Tr))
                            .map(|r| (r, in_head)),
                    );
                }
                _ => {}
            }
        }

        let mut grid: Vec<(Vec<Option<u32>>, bool, bool)> = Vec::new();
        // Per column: rows still covered by a rowspan above, and the cell that covers them.
        let mut carried: Vec<(usize, Option<u32>)> = Vec::new();
        let (mut cells_seen, mut blocky_cells, mut long_cells) = (0usize, 0usize, 0usize);
        let mut carried_placements = 0usize;
        for (row, in_head) in rows {
            if !arena
                .children(row)
                .any(|c| matches!(arena.tag(c), Some(Tag::Td | Tag::Th)))
            {
                continue;
            }
            let mut line: Vec<Option<u32>> = Vec::new();
            let mut all_th = true;
            let take_carried = |line: &mut Vec<Option<u32>>,
                                carried: &mut Vec<(usize, Option<u32>)>,
                                placements: &mut usize| {
                while let Some(slot) = carried.get_mut(line.len()).filter(|slot| slot.0 > 0) {
                    slot.0 -= 1;
                    line.push(slot.1);
                    *placements += 1;
                }
            };
            for cell in arena
                .children(row)
                .filter(|&c| matches!(arena.tag(c), Some(Tag::Td | Tag::Th)))
            {
                take_carried(&mut line, &mut carried, &mut carried_placements);
                all_th &= arena.tag(cell) == Some(Tag::Th);
                let cell_attrs = arena.attrs(cell)?;
                cells_seen += 1;
                if arena.node(cell).solid_chars > 300 {
                    long_cells += 1;
                }
                if has_block_layout(arena, cell) {
                    blocky_cells += 1;
                }
                for offset in 0..cell_attrs.colspan {
                    if line.len() >= MAX_TABLE_COLUMNS {
                        return None;
                    }
                    let value = if offset == 0 { Some(cell) } else { None };
                    let column = line.len();
                    if carried.len() <= column {
                        carried.resize(column + 1, (0, None));
                    }
                    // Short labels are repeated down their span; long text is given once.
                    let repeated = value.filter(|&c| arena.node(c).solid_chars <= 40);
                    carried[column] = (cell_attrs.rowspan - 1, repeated);
                    line.push(value);
                }
            }
            take_carried(&mut line, &mut carried, &mut carried_placements);
            // Spans that fill far more of the grid than the cells themselves are not data, and
            // repeating them would let a small page expand into a huge one.
            if carried_placements > 2 * cells_seen + 64 {
                return None;
            }
            if !line.is_empty() {
                grid.push((line, in_head, all_th));
            }
        }

        let width = grid.first()?.0.len();
        if width < 2 || grid.iter().any(|(line, _, _)| line.len() != width) {
            return None;
        }
        if blocky_cells * 4 > cells_seen || long_cells * 2 > cells_seen {
            return None;
        }
        // A header spread over several rows has no lossless GFM form: such tables stay text.
        if grid.iter().filter(|(_, in_head, _)| *in_head).count() > 1 || grid.len() < 3 {
            return None;
        }
        let mut grid_rows = grid.into_iter().map(|(line, _, _)| line);
        let header = grid_rows.next()?;
        Some(TableGrid {
            caption,
            width,
            header,
            rows: grid_rows.collect(),
        })
    }
}

/// Whether a cell holds page layout rather than a value: headings, code blocks, quotes, or more
/// than one paragraph (counting innermost text blocks, so `<div><p>x</p></div>` is one).
pub(super) fn has_block_layout(arena: &Arena, cell: u32) -> bool {
    let end = arena.subtree_end(cell);
    let mut paragraphs = 0;
    // Open text blocks as (subtree end, innermost so far, has text).
    let mut open: Vec<(u32, bool, bool)> = Vec::new();
    let mut close_until = |open: &mut Vec<(u32, bool, bool)>, at: u32| -> bool {
        while let Some(&(block_end, innermost, has_text)) = open.last() {
            if at < block_end {
                break;
            }
            open.pop();
            if innermost && has_text {
                paragraphs += 1;
            }
        }
        paragraphs > 1
    };
    for i in cell + 1..end {
        if close_until(&mut open, i) {
            return true;
        }
        match arena.tag(i) {
            Some(
                Tag::Heading(_) | Tag::Pre | Tag::Blockquote | Tag::Nav | Tag::Article | Tag::Aside,
            ) => return true,
            Some(Tag::P | Tag::Div | Tag::Paragraph) => {
                if let Some(parent_block) = open.last_mut() {
                    parent_block.1 = false;
                }
                open.push((arena.subtree_end(i), true, arena.node(i).solid_chars > 0));
            }
            _ => {}
        }
    }
    close_until(&mut open, u32::MAX)
}
