/**
 * The QA report in a real browser: bake the sample content, open data/report.html in headless
 * Chromium (Debian's, installed by scripts/system-deps.sh) and check what an operator sees — every
 * picture decodes, every room is there with its counts, no script runs and nothing is fetched from
 * the network (the page is self-contained).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Browser } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { artifactPaths } from '../../artifacts/format.ts';
import { putContentFile, readManifest } from '../../artifacts/store.ts';
import { bakeRooms, type BakeSummary } from '../../bake/pipeline.ts';
import { writeSampleContent } from '../../bake/sample/generate.ts';
import { HAS_CHROMIUM, launchChromium } from '../helpers/chromium.ts';
import { startTestServer } from '../helpers/server.ts';

describe.skipIf(!HAS_CHROMIUM)('the QA report in Chromium', () => {
  let browser: Browser;
  let dataDir: string;
  let summary: BakeSummary;

  beforeAll(async () => {
    const root = mkdtempSync(join(tmpdir(), 'museum-report-browser-'));
    await writeSampleContent(join(root, 'content'));
    dataDir = join(root, 'data');
    summary = await bakeRooms({ contentDir: join(root, 'content'), dataDir, concurrency: 2 });
    browser = await launchChromium();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
  });

  it('shows every room with its pictures, counts and legend, with no script and no network', async () => {
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const page = await context.newPage();
    const problems: string[] = [];
    const requests: string[] = [];
    page.on('console', (m) => m.type() === 'error' && problems.push(m.text()));
    page.on('pageerror', (e) => problems.push(e.message));
    page.on('request', (r) => requests.push(r.url()));
    await page.goto(pathToFileURL(artifactPaths(dataDir).report).href, { waitUntil: 'load' });

    // Evaluated in the page (a string: this project compiles without the DOM library).
    const facts = (await page.evaluate(`({
      scripts: document.querySelectorAll('script').length,
      images: [...document.images].map((img) => ({ cls: img.className, ok: img.complete && img.naturalWidth > 0, w: img.naturalWidth })),
      text: document.body.innerText,
    })`)) as { scripts: number; images: Array<{ cls: string; ok: boolean; w: number }>; text: string };
    expect(problems).toEqual([]);
    expect(facts.scripts).toBe(0);
    // Only the page itself and its inline data: images.
    expect(requests.filter((u) => !u.startsWith('data:') && !u.startsWith('file:'))).toEqual([]);

    expect(summary.failed).toBe(0);
    const rooms = summary.rooms;
    expect(facts.images.filter((i) => i.cls.includes('plan'))).toHaveLength(rooms.length);
    expect(facts.images.filter((i) => i.cls.includes('thumb'))).toHaveLength(rooms.length);
    for (const image of facts.images) expect(image.ok).toBe(true);
    for (const room of rooms) expect(facts.text).toContain(room.title);
    expect(facts.text).toMatch(/authored/);
    expect(facts.text).toMatch(/generated/);
    expect(facts.text).toMatch(/flipped/);
    expect(facts.text).toMatch(/ambiguous/);

    // A full-page screenshot renders (what an operator would look at).
    const shot = await page.screenshot({ fullPage: true });
    const meta = await sharp(shot).metadata();
    expect(meta.width).toBe(1400);
    expect(meta.height!).toBeGreaterThan(900 * rooms.length * 0.5);
    await context.close();
  });

  it('renders served from /files under its sandboxing CSP, while a scripted SVG served there runs nothing', async () => {
    const server = await startTestServer({ dataDir });
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    try {
      const report = (await readManifest(dataDir))!.report!;
      const svg = await putContentFile(
        dataDir,
        '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>document.title = "ran"; fetch("/v1/rooms")</script></svg>',
        'svg',
      );
      const page = await context.newPage();
      const blocked: string[] = [];
      const requests: string[] = [];
      page.on('console', (m) => blocked.push(m.text()));
      page.on('request', (r) => requests.push(r.url()));
      await page.goto(`${server.url}/files/${report.sha256}.html`, { waitUntil: 'load' });
      const facts = (await page.evaluate(`({
        pictures: [...document.images].filter((img) => img.complete && img.naturalWidth > 0).length,
        border: getComputedStyle(document.querySelector('td')).borderTopStyle,
      })`)) as { pictures: number; border: string };
      expect(facts.pictures).toBe(summary.rooms.length * 2); // data: pictures allowed
      expect(facts.border).toBe('solid'); // inline style allowed
      expect(blocked).toEqual([]);

      await page.goto(`${server.url}/files/${svg.sha256}.svg`, { waitUntil: 'load' });
      expect(await page.title()).not.toBe('ran');
      expect(requests.filter((u) => u.includes('/v1/'))).toEqual([]);
      expect(blocked.some((m) => /Content Security Policy|sandbox/i.test(m))).toBe(true);
    } finally {
      await context.close();
      await server.close();
    }
  });
});
