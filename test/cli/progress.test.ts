// Progress of `museum bake rooms` (issue 35): the rooms in flight and for how long, on a terminal
// (a status line redrawn in place) and in logs (a plain line now and then); JSON without float noise.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { jsonDocument, progressReporter, reportLocation } from '../../bake/cli.ts';
import type { RoomOutcome } from '../../bake/pipeline.ts';

const outcome = (id: number, title: string, ms: number): RoomOutcome => ({
  id,
  title,
  status: 'baked',
  reason: 'first bake',
  warnings: [],
  slot_changes: null,
  bytes_in: 10,
  bytes_out: 5,
  ms,
  steps: null,
  peak_rss_mb: null,
});

function recorder(isTTY: boolean) {
  const writes: string[] = [];
  return { stream: { isTTY, columns: 200, write: (text: string) => writes.push(text) }, writes };
}

describe('bake progress', () => {
  it('in logs (no terminal): a plain line now and then names the rooms in flight and how long they have run', async () => {
    let clock = 0;
    const { stream, writes } = recorder(false);
    const progress = progressReporter(stream, { everyMs: 20, now: () => clock });
    try {
      progress.onEvent({ type: 'plan', total: 3, toBake: 2 });
      progress.onEvent({ type: 'start', id: 2, title: 'Brick Atelier' });
      clock = 4_200;
      progress.onEvent({ type: 'start', id: 5, title: 'Great \x1b[2J Hall' });
      clock = 12_000;
      await expect.poll(() => writes.some((w) => w.startsWith('bake: 0/3 done'))).toBe(true);
      expect(writes.find((w) => w.startsWith('bake: 0/3 done'))).toBe(
        'bake: 0/3 done, in flight: room 2 Brick Atelier 12.0 s, room 5 Great \\x1b[2J Hall 7.8 s\n',
      );
      progress.onEvent({ type: 'room', outcome: outcome(2, 'Brick Atelier', 12_000.4), done: 1, total: 3 });
      expect(writes.at(-1)).toBe('[1/3] baked   room 2 Brick Atelier (12.0 s)\n');
      progress.onEvent({ type: 'room', outcome: outcome(5, 'Great Hall', 7_800), done: 2, total: 3 });
      const after = writes.length;
      await sleep(100);
      expect(writes.slice(after)).toEqual([]); // nothing in flight: nothing to say
      expect(writes.every((w) => !w.includes('\x1b'))).toBe(true);
    } finally {
      progress.stop();
    }
  });

  it('on a terminal: a status line with the bar and the rooms in flight, redrawn under each finished room', () => {
    let clock = 0;
    const { stream, writes } = recorder(true);
    const progress = progressReporter(stream, { now: () => clock });
    try {
      progress.onEvent({ type: 'plan', total: 2, toBake: 2 });
      progress.onEvent({ type: 'start', id: 1, title: 'Long Gallery' });
      clock = 2_500;
      progress.onEvent({ type: 'start', id: 2, title: 'Annex' });
      expect(writes.at(-1)).toBe('\r\x1b[2K[--------------------] 0/2 · baking room 1 Long Gallery 2.5 s, room 2 Annex 0 ms');
      clock = 3_000;
      progress.onEvent({ type: 'room', outcome: outcome(1, 'Long Gallery', 3_000), done: 1, total: 2 });
      expect(writes.at(-1)).toBe(
        '\r\x1b[2K[1/2] baked   room 1 Long Gallery (3.0 s)\n[##########----------] 1/2 · baking room 2 Annex 500 ms',
      );
    } finally {
      progress.stop();
    }
    expect(writes.at(-1)).toBe('\r\x1b[2K'); // the status line is gone before the summary
  });

  it('JSON durations are whole milliseconds; the QA report is named by its path and URL', () => {
    expect(
      jsonDocument({ ms: 482.37275100000005, rooms: [{ ms: 0.5, bytes_in: 1.5 }], optimizer: { steps: [{ name: 'draco', ms: 12.7 }] } }),
    ).toBe('{"ms":482,"rooms":[{"ms":1,"bytes_in":1.5}],"optimizer":{"steps":[{"name":"draco","ms":13}]}}');
    expect(reportLocation('/srv/data/report.html', {})).toBe('QA report: /srv/data/report.html · served at http://localhost:8080/report');
    expect(reportLocation('/srv/data/report.html', { PORT: '9000' })).toBe(
      'QA report: /srv/data/report.html · served at http://localhost:9000/report',
    );
    expect(reportLocation('/srv/data/report.html', { PUBLIC_URL: 'https://museum.example/' })).toBe(
      'QA report: /srv/data/report.html · served at https://museum.example/report',
    );
  });
});
