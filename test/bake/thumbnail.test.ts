/**
 * Preview images as published: raster images as they are; SVG rasterized to PNG (a scripted SVG
 * served from the API's origin would run), and refused when it references anything outside itself.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { ImageError, publishablePreview, SVG_RASTER_SIZE } from '../../bake/thumbnail.ts';
import { startCanary } from '../fakes/canary.ts';

const svg = (body: string, size = 'width="200" height="100"') =>
  Buffer.from(`<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" ${size}>${body}</svg>`);

describe('preview images', () => {
  it('publishes raster images byte for byte', async () => {
    const png = await sharp({ create: { width: 20, height: 10, channels: 3, background: '#123456' } })
      .png()
      .toBuffer();
    const jpeg = await sharp(png).jpeg().toBuffer();
    expect(await publishablePreview(png)).toEqual({ bytes: png, ext: 'png' });
    expect(await publishablePreview(jpeg)).toEqual({ bytes: jpeg, ext: 'jpg' });
  });

  it('rasterizes an SVG (script and all) to a PNG of 2048 px on its longer side, deterministically', async () => {
    const scripted = svg(
      '<script>alert(document.domain)</script><rect width="200" height="100" fill="#c33"/><circle cx="50" cy="50" r="20" ' +
        'fill="url(#g)"/><defs><linearGradient id="g"><stop offset="0" stop-color="#fff"/></linearGradient></defs>',
    );
    const first = await publishablePreview(scripted);
    expect(first.ext).toBe('png');
    const { data, info } = await sharp(first.bytes).raw().toBuffer({ resolveWithObject: true });
    expect([info.width, info.height]).toEqual([SVG_RASTER_SIZE, SVG_RASTER_SIZE / 2]);
    expect([...data.subarray(0, 3)]).toEqual([0xcc, 0x33, 0x33]);
    expect(Buffer.from(first.bytes).includes('script')).toBe(false);
    expect((await publishablePreview(scripted)).bytes).toEqual(first.bytes);
    // A gzip-compressed SVG (svgz) is the same picture.
    expect((await publishablePreview(gzipSync(scripted))).bytes).toEqual(first.bytes);
    // A tiny icon is scaled up, not published at 16 px.
    const icon = await publishablePreview(svg('<rect width="16" height="16"/>', 'width="16" height="16"'));
    expect((await sharp(icon.bytes).metadata()).width).toBe(SVG_RASTER_SIZE);
  });

  it('refuses an SVG that references anything outside itself, with one line', async () => {
    const cases: Array<[string, string]> = [
      ['<image href="http://169.254.169.254/latest/meta-data/" width="9" height="9"/>', 'href "http://169.254.169.254/latest/meta-data/"'],
      ["<image xlink:href='file:///etc/hostname' width='9' height='9'/>", 'href "file:///etc/hostname"'],
      ['<image href="/etc/hostname" width="9" height="9"/>', 'href "/etc/hostname"'],
      ['<use href="other.svg#x"/>', 'href "other.svg#x"'],
      ['<rect width="9" height="9" fill="url(http://10.0.0.1/p.svg#x)"/>', 'url(http://10.0.0.1/p.svg#x)'],
      ['<style>rect { fill: url("file:///etc/passwd") }</style>', 'url(file:///etc/passwd)'],
      ['<style>@import "https://evil.example/x.css";</style>', '@import'],
      ['<style>rect { fill: \\75rl(http://10.0.0.1/) }</style>', 'a CSS escape'],
    ];
    for (const [body, what] of cases) {
      const error = await publishablePreview(svg(body)).catch((e: Error) => e);
      expect(error, body).toBeInstanceOf(ImageError);
      expect((error as Error).message, body).toBe(`preview SVG refused: it references something outside itself (${what})`);
    }
    const entity = Buffer.from(
      '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/hostname">]><svg xmlns="http://www.w3.org/2000/svg" ' +
        'width="9" height="9"><text>&x;</text></svg>',
    );
    expect(((await publishablePreview(entity).catch((e: Error) => e)) as Error).message).toMatch(
      /^preview (SVG refused: it references something outside itself \(an entity declaration\)|image is not a readable image .*)$/,
    );
  });

  it('librsvg itself loads nothing external from an SVG buffer (the refusal above is a second wall)', async () => {
    const inside = await startCanary();
    try {
      const png = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#ff0000' } })
        .png()
        .toBuffer();
      const { writeFile, mkdtemp } = await import('node:fs/promises');
      const dir = await mkdtemp(join(tmpdir(), 'museum-svg-'));
      await writeFile(`${dir}/red.png`, png);
      const hostile = svg(
        `<image href="${inside.url}/x.png" width="100" height="100"/><image href="file://${dir}/red.png" width="100" ` +
          `height="100"/><image href="${dir}/red.png" width="100" height="100"/>`,
        'width="100" height="100"',
      );
      const { data } = await sharp(hostile).raw().toBuffer({ resolveWithObject: true });
      expect(data.every((b) => b === 0)).toBe(true); // nothing drawn
      expect(inside.requests).toEqual([]);
    } finally {
      await inside.close();
    }
  });
});
