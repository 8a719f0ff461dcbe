/** Text from content printed for people: control characters shown, never obeyed by the terminal. */
import { describe, expect, it } from 'vitest';
import { summaryTable } from '../../bake/cli.ts';
import type { BakeSummary } from '../../bake/pipeline.ts';
import { printable } from '../../common/terminal.ts';

const RAW_CONTROL = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

describe('printable', () => {
  it('escapes C0 and C1 controls, DEL, ESC sequences and bidi overrides; keeps everything else', () => {
    expect(printable('Hall \u001b]0;pwned\u0007\u001b[2J\u001b[31mred')).toBe('Hall \\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mred');
    expect(printable('a\u009b31mb\u0085c\u007fd\u0000e')).toBe('a\\x9b31mb\\x85c\\x7fd\\x00e');
    expect(printable('line\nbreak\rtab\t')).toBe('line\\x0abreak\\x0dtab\\x09');
    expect(printable('evil\u202etxt.exe \u2066x\u2069')).toBe('evil\\u{202e}txt.exe \\u{2066}x\\u{2069}');
    expect(printable('Salle à manger — 東京 🏛️')).toBe('Salle à manger — 東京 🏛️');
  });
});

describe('bake summary table', () => {
  it('prints titles, reasons and warnings from content with their control characters escaped', () => {
    const summary: BakeSummary = {
      bake_id: 'b1',
      published: true,
      data_dir: '/d',
      manifest: '/d/manifest.json',
      report: null,
      baked: 1,
      skipped: 0,
      failed: 1,
      bytes_in: 10,
      bytes_out: 5,
      ms: 12,
      gc: null,
      rooms: [
        {
          id: 1,
          title: 'Atrium\u001b[2J',
          status: 'baked',
          reason: 'new room',
          warnings: ['slot \u009b7m hidden'],
          slot_changes: null,
          bytes_in: 10,
          bytes_out: 5,
          ms: 12,
          steps: null,
          peak_rss_mb: null,
        },
        {
          id: 2,
          title: 'Vault\u001b]0;x\u0007',
          status: 'failed',
          reason: 'texture \u001b[8mx is not an image',
          warnings: [],
          slot_changes: null,
          bytes_in: null,
          bytes_out: null,
          ms: null,
          steps: null,
          peak_rss_mb: null,
        },
      ],
    };
    const table = summaryTable(summary);
    expect(table.replaceAll('\n', '')).not.toMatch(RAW_CONTROL);
    expect(table).toContain('Atrium\\x1b[2J');
    expect(table).toContain('slot \\x9b7m hidden');
    expect(table).toContain('Vault\\x1b]0;x\\x07');
    expect(table).toContain('texture \\x1b[8mx is not an image');
  });

  it('shows, per room, what a re-bake does to the anchors: kept, moved (with the largest move), added, removed', () => {
    type Outcome = BakeSummary['rooms'][number];
    const room = (id: number, slot_changes: Outcome['slot_changes']): Outcome => ({
      id,
      title: `Room ${id}`,
      status: 'baked',
      reason: 'model changed',
      warnings: [],
      slot_changes,
      bytes_in: 10,
      bytes_out: 5,
      ms: 12,
      steps: null,
      peak_rss_mb: null,
    });
    const summary: BakeSummary = {
      bake_id: 'b2',
      published: true,
      data_dir: '/d',
      manifest: '/d/manifest.json',
      report: null,
      baked: 2,
      skipped: 0,
      failed: 0,
      bytes_in: 20,
      bytes_out: 10,
      ms: 24,
      gc: null,
      rooms: [
        room(1, { had_previous: true, kept: 20, moved: 3, largest_move: 0.0412, added: 1, removed: 2 }),
        room(2, { had_previous: false, kept: 0, moved: 0, largest_move: 0, added: 8, removed: 0 }),
      ],
    };
    const [header, first, second] = summaryTable(summary).split('\n');
    expect(header).toContain('anchors vs previous bake');
    expect(first).toContain('20 kept, 3 moved (largest 0.041 m), 1 added, 2 removed');
    expect(second).toContain('8 added (first bake)');
    // The column lines up under its header.
    expect(first!.indexOf('20 kept')).toBe(header!.indexOf('anchors vs previous bake'));
  });
});
