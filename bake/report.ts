/**
 * The bake's QA report: one self-contained HTML page (no JavaScript, images as data URIs) that an
 * operator opens in a browser. Per room: a plan-view picture (the model's steep faces seen from
 * above; every slot as a frame line with a facing arrow, coloured authored / generated / flipped /
 * ambiguous), the anchor count against the onchain count, shortfall, warnings, the thumbnail,
 * and the failure when the room could not be baked. Pictures are SVG rendered to PNG by sharp.
 */
import pMap from 'p-map';
import sharp from 'sharp';
import type { RoomSlot, RoomSlotData } from '../artifacts/format.ts';
import { SLOT_COLOURS, SLOT_LEGEND as LEGEND, slotCategory } from '../artifacts/slot-colours.ts';
import { escapeHtml } from '../common/html.ts';
import { rotateByQuaternion as rotate } from '../common/vec.ts';
import { describeSlotChanges, type SlotChanges } from './slots/changes.ts';
import type { RoomKind, RoomPlan } from './slots/index.ts';

export interface QaRoom {
  id: number;
  title: string;
  onchainSlots: number;
  /** The published slot data (validated with the artifact schema); absent when the room failed. */
  slotData?: RoomSlotData;
  /** What the report shows beyond the slot data: the kind and how it was decided. */
  facts?: { kind: RoomKind; kindEvidence?: string };
  /** What this bake did to the previously published anchors (rooms baked in this run). */
  changes?: SlotChanges | null;
  /** Plan view, drawn when no picture is given. */
  plan?: RoomPlan;
  /** The plan picture already rendered (renderPlanPng), e.g. by the bake lane that baked the room. */
  planPicture?: Uint8Array;
  /** Thumbnail bytes (WebP, PNG or JPEG). */
  thumbnail?: Uint8Array;
  /** Warnings from the rest of the bake (optimizer, media), shown after the engine's. */
  warnings?: string[];
  /** Why the room could not be baked (one line). */
  error?: string;
}

export interface QaReportOptions {
  title?: string;
  /** Shown in the header; pass the bake's time (the report itself holds no clock). */
  generatedAt?: string;
  bakeId?: string;
}

export { SLOT_COLOURS } from '../artifacts/slot-colours.ts';

const PICTURE = 720;
const PAD = 28;

/**
 * The plan picture as SVG: world X to the right, world Z downwards (−Z, "north", is up), all
 * slots drawn over the geometry with their index. A 1 m scale bar sits bottom left.
 */
/** What the plan picture shows of the walkable floor: its triangles (flat xyz + indices) and the spawn. */
export interface PlanWalk {
  positions: ArrayLike<number>;
  indices: ArrayLike<number>;
  spawn: [number, number, number] | null;
}

/** Floor triangles in pale green, each view as a dot joined to its frame, the spawn as a ring. */
function walkSvg(walk: PlanWalk, slots: RoomSlot[], X: (x: number) => string, Z: (z: number) => string): string[] {
  const out: string[] = ['<g fill="#d6f5dd" stroke="#b4e4bf" stroke-width="0.4">'];
  const p = walk.positions;
  const t = walk.indices;
  for (let i = 0; i + 2 < t.length; i += 3) {
    const pts = [t[i]!, t[i + 1]!, t[i + 2]!].map((v) => `${X(p[v * 3]!)},${Z(p[v * 3 + 2]!)}`);
    out.push(`<polygon points="${pts.join(' ')}"/>`);
  }
  out.push('</g><g stroke="#1a7f37" fill="#1a7f37" stroke-width="1">');
  for (const slot of slots) {
    if (!slot.view) continue;
    const [vx, , vz] = slot.view.position;
    out.push(`<line x1="${X(vx)}" y1="${Z(vz)}" x2="${X(slot.position[0])}" y2="${Z(slot.position[2])}" stroke-dasharray="3 3"/>`);
    out.push(`<circle cx="${X(vx)}" cy="${Z(vz)}" r="3"/>`);
  }
  if (walk.spawn) out.push(`<circle cx="${X(walk.spawn[0])}" cy="${Z(walk.spawn[2])}" r="7" fill="none" stroke-width="3"/>`);
  out.push('</g>');
  return out;
}

export function planSvg(plan: RoomPlan, slots: RoomSlot[], walk: PlanWalk | null = null): string {
  const xs = [plan.min[0], plan.max[0], ...slots.map((s) => s.position[0])];
  const zs = [plan.min[1], plan.max[1], ...slots.map((s) => s.position[2])];
  const minX = Math.min(...xs);
  const minZ = Math.min(...zs);
  const spanX = Math.max(Math.max(...xs) - minX, 1e-3);
  const spanZ = Math.max(Math.max(...zs) - minZ, 1e-3);
  const scale = (PICTURE - 2 * PAD) / Math.max(spanX, spanZ);
  const width = Math.round(spanX * scale + 2 * PAD);
  const height = Math.round(spanZ * scale + 2 * PAD + 16);
  const X = (x: number) => (PAD + (x - minX) * scale).toFixed(1);
  const Z = (z: number) => (PAD + (z - minZ) * scale).toFixed(1);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
  ];
  if (walk) out.push(...walkSvg(walk, slots, X, Z));
  out.push(`<g stroke="#8c959f" stroke-width="0.8" stroke-linecap="round" fill="none">`);
  const s = plan.segments;
  for (let i = 0; i + 3 < s.length; i += 4)
    out.push(`<line x1="${X(s[i]!)}" y1="${Z(s[i + 1]!)}" x2="${X(s[i + 2]!)}" y2="${Z(s[i + 3]!)}"/>`);
  out.push('</g>');
  const arrowLength = Math.max(18, Math.min(40, 0.5 * scale));
  for (const slot of slots) {
    const colour = SLOT_COLOURS[slotCategory(slot)];
    const [px, , pz] = slot.position;
    const right = rotate(slot.quaternion, [1, 0, 0]);
    const up = rotate(slot.quaternion, [0, 1, 0]);
    const f = slot.facing;
    const cx = Number(X(px));
    const cz = Number(Z(pz));
    out.push(`<g stroke="${colour}" fill="${colour}">`);
    if (Math.abs(f[1]) > 0.9) {
      // Horizontal slot: its outline as seen from above, and a dot for up / a ring for down.
      const corners = [
        [-1, -1],
        [1, -1],
        [1, 1],
        [-1, 1],
      ].map(([a, b]) => {
        const x = px + (a! * slot.width * right[0]) / 2 + (b! * slot.height * up[0]) / 2;
        const z = pz + (a! * slot.width * right[2]) / 2 + (b! * slot.height * up[2]) / 2;
        return `${X(x)},${Z(z)}`;
      });
      out.push(`<polygon points="${corners.join(' ')}" fill-opacity="0.25" stroke-width="2"/>`);
      out.push(f[1] > 0 ? `<circle cx="${cx}" cy="${cz}" r="4"/>` : `<circle cx="${cx}" cy="${cz}" r="5" fill="none" stroke-width="2"/>`);
    } else {
      const hw = slot.width / 2;
      const [x1, y1, x2, y2] = [X(px - right[0] * hw), Z(pz - right[2] * hw), X(px + right[0] * hw), Z(pz + right[2] * hw)];
      out.push(`<line x1="${x1}" y1="${y1}" x2="${x2}" y2="${y2}" stroke-width="4" stroke-linecap="butt"/>`);
      const fl = Math.hypot(f[0], f[2]) || 1;
      const dx = f[0] / fl;
      const dz = f[2] / fl;
      const tipX = cx + dx * arrowLength;
      const tipZ = cz + dz * arrowLength;
      out.push(`<line x1="${cx}" y1="${cz}" x2="${(tipX - dx * 6).toFixed(1)}" y2="${(tipZ - dz * 6).toFixed(1)}" stroke-width="2"/>`);
      const head = [
        [tipX, tipZ],
        [tipX - dx * 8 - dz * 5, tipZ - dz * 8 + dx * 5],
        [tipX - dx * 8 + dz * 5, tipZ - dz * 8 - dx * 5],
      ];
      out.push(`<polygon points="${head.map(([a, b]) => `${a!.toFixed(1)},${b!.toFixed(1)}`).join(' ')}" stroke="none"/>`);
    }
    const font = 'font-family="DejaVu Sans, sans-serif" font-size="10"';
    out.push(`<text x="${(cx + 5).toFixed(1)}" y="${(cz - 5).toFixed(1)}" ${font} stroke="none">${slot.index}</text>`);
    out.push('</g>');
  }
  const bar = scale;
  out.push(
    `<g stroke="#24292f" fill="#24292f" font-family="DejaVu Sans, sans-serif" font-size="10">`,
    `<line x1="${PAD}" y1="${height - 12}" x2="${(PAD + bar).toFixed(1)}" y2="${height - 12}" stroke-width="2"/>`,
    `<text x="${(PAD + bar + 4).toFixed(1)}" y="${height - 8}" stroke="none">1 m · north (−Z) up</text>`,
    '</g>',
    '</svg>',
  );
  return out.join('\n');
}

/** The plan picture rendered to PNG. */
export async function renderPlanPng(plan: RoomPlan, slots: RoomSlot[], walk: PlanWalk | null = null): Promise<Buffer> {
  // zlib level 6: a few % larger than 9 at a third to a half of the CPU, for a QA picture.
  return sharp(Buffer.from(planSvg(plan, slots, walk)))
    .png({ compressionLevel: 6 })
    .toBuffer();
}

function imageMime(bytes: Uint8Array): string | null {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.byteLength, 12));
  if (b.length >= 12 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP') return 'image/webp';
  if (b.length >= 8 && b[0] === 0x89 && b.toString('latin1', 1, 4) === 'PNG') return 'image/png';
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'image/jpeg';
  return null;
}

const dataUri = (mime: string, bytes: Uint8Array) =>
  `data:${mime};base64,${Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64')}`;

const STYLE = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#24292f;margin:24px auto;max-width:1500px;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:0 0 6px}
table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
section{border-top:2px solid #d0d7de;margin-top:28px;padding-top:14px}
.pictures{display:flex;gap:16px;flex-wrap:wrap;align-items:flex-start}
figure{margin:0}figcaption{font-size:12px;color:#57606a}
img.plan{border:1px solid #d0d7de;max-width:100%}img.thumb{border:1px solid #d0d7de;max-width:512px}
.ok{color:#1a7f37;font-weight:600}.short,.fail{color:#cf222e;font-weight:600}
.error{background:#ffebe9;border:1px solid #ff8182;padding:8px 12px}
.warnings li{color:#9a6700}
.legend span.swatch{display:inline-block;width:12px;height:12px;margin:0 6px 0 14px;vertical-align:-1px;border-radius:2px}
`;

interface RenderedRoom {
  room: QaRoom;
  plan: string | null;
  thumbnail: string | null;
  thumbnailNote: string | null;
}

async function renderRoom(room: QaRoom): Promise<RenderedRoom> {
  const data = room.slotData;
  const png = room.planPicture ?? (room.plan && data ? await renderPlanPng(room.plan, data.slots) : null);
  const planUri = png && data ? dataUri('image/png', png) : null;
  let thumbnail: string | null = null;
  let thumbnailNote: string | null = null;
  if (room.thumbnail) {
    const mime = imageMime(room.thumbnail);
    if (mime) thumbnail = dataUri(mime, room.thumbnail);
    else thumbnailNote = 'thumbnail bytes are not WebP, PNG or JPEG';
  }
  return { room, plan: planUri, thumbnail, thumbnailNote };
}

const SLOT_COLUMNS = [
  'id',
  'kind',
  'position (m)',
  'facing',
  'size (m)',
  'clearance front / back (m)',
  'view: distance (m), stand at',
  'evidence',
];
const SUMMARY_COLUMNS = [
  'room',
  'title',
  'kind',
  'anchors / onchain',
  'authored',
  'generated',
  'flipped',
  'ambiguous',
  'anchors against the previous bake',
  'without a view',
  'status',
  'view',
];
/** A table's header row (the column names are plain text). */
const headerRow = (columns: string[]) => `<tr>${columns.map((c) => `<th>${c}</th>`).join('')}</tr>`;

const countOf = (slots: RoomSlot[], source: RoomSlot['source']) => slots.filter((s) => s.source === source).length;
/** Slots with no place to stand in front of them (the room's warnings say why). */
const withoutView = (slots: RoomSlot[]) => slots.filter((s) => !s.view).length;
const viewCell = (s: RoomSlot) => (s.view ? `${s.view.distance.toFixed(2)} at ${fmt(s.view.position, 2)}` : 'none');

function statusOf(room: QaRoom): { text: string; cls: string } {
  if (room.error || !room.slotData) return { text: 'failed', cls: 'fail' };
  const placed = room.slotData.slots.length;
  if (room.slotData.shortfall || placed < room.onchainSlots) return { text: 'shortfall', cls: 'short' };
  return { text: 'ok', cls: 'ok' };
}

/** The room's 3D view on the server that serves this report (`museum serve`: /report). */
const viewUrl = (roomId: number) => `/view/rooms/${roomId}`;

const fmt = (v: readonly number[], digits = 3) => v.map((x) => x.toFixed(digits)).join(', ');

function roomSection(r: RenderedRoom): string {
  const { room } = r;
  const e = escapeHtml;
  const result = room.slotData;
  const kind = room.facts?.kind ?? '';
  const kindEvidence = room.facts?.kindEvidence;
  const status = statusOf(room);
  const parts: string[] = [
    `<section id="room-${room.id}">`,
    `<h2>#${room.id} ${e(room.title)}${result ? ` <small><a href="${viewUrl(room.id)}">3D view</a></small>` : ''}</h2>`,
  ];
  if (room.error) parts.push(`<p class="error"><strong>Failed:</strong> ${e(room.error)}</p>`);
  if (result) {
    const placed = result.slots.length;
    parts.push(
      `<p><span class="${status.cls}">${placed} / ${room.onchainSlots}</span> anchors / onchain slots · ${e(kind)}` +
        `${kindEvidence ? ` <small>(${e(kindEvidence)})</small>` : ''}` +
        ` · authored ${countOf(result.slots, 'authored')} · generated ${countOf(result.slots, 'generated')}` +
        ` · flipped ${result.slots.filter((s) => s.flipped).length} · ambiguous ${result.slots.filter((s) => s.ambiguous).length}` +
        ` · without a view ${withoutView(result.slots)}</p>`,
    );
    if (room.changes) parts.push(`<p class="changes">Anchors against the previous bake: ${e(describeSlotChanges(room.changes))}</p>`);
    if (result.shortfall) {
      parts.push(
        `<p class="short">Shortfall: ${result.shortfall.placed} of ${result.shortfall.expected} placed — ` +
          `${e(result.shortfall.reason)}</p>`,
      );
    }
  }
  const warnings = [...(result?.warnings ?? []), ...(room.warnings ?? [])];
  if (warnings.length) parts.push(`<ul class="warnings">${warnings.map((w) => `<li>${e(w)}</li>`).join('')}</ul>`);
  const pictures: string[] = [];
  const planCaption = 'Plan view, slots coloured by the legend; arrows show the facing.';
  if (r.plan)
    pictures.push(
      `<figure><img class="plan" alt="plan of room ${room.id}" src="${r.plan}"><figcaption>${planCaption}</figcaption></figure>`,
    );
  if (r.thumbnail)
    pictures.push(
      `<figure><img class="thumb" alt="thumbnail of room ${room.id}" src="${r.thumbnail}"><figcaption>Thumbnail</figcaption></figure>`,
    );
  if (r.thumbnailNote) pictures.push(`<p class="warnings">${e(r.thumbnailNote)}</p>`);
  if (pictures.length) parts.push(`<div class="pictures">${pictures.join('')}</div>`);
  if (result?.slots.length) {
    const rows = result.slots.map((s) => {
      const category = slotCategory(s);
      return (
        `<tr><td><span style="color:${SLOT_COLOURS[category]}">■</span> ${e(s.id)}</td><td>${e(category)}</td>` +
        `<td>${fmt(s.position)}</td><td>${fmt(s.facing, 2)}</td>` +
        `<td class="num">${s.width.toFixed(2)} × ${s.height.toFixed(2)}</td>` +
        `<td class="num">${s.clearance ? `${s.clearance.front.toFixed(2)} / ${s.clearance.back.toFixed(2)}` : ''}</td>` +
        `<td>${viewCell(s)}</td><td>${e(s.evidence ?? '')}</td></tr>`
      );
    });
    parts.push(
      `<details><summary>${result.slots.length} slots</summary><table>${headerRow(SLOT_COLUMNS)}${rows.join('')}</table></details>`,
    );
  }
  parts.push('</section>');
  return parts.join('\n');
}

/** The report page. Text is HTML-escaped; the page holds no script and no external resource. */
export async function renderQaReport(rooms: QaRoom[], options: QaReportOptions = {}): Promise<string> {
  const e = escapeHtml;
  // At most 4 renders in flight: pictures of big rooms are large.
  const rendered = await pMap(rooms, renderRoom, { concurrency: 4 });
  const title = options.title ?? 'Room bake — slot QA report';
  const failed = rooms.filter((r) => statusOf(r).cls === 'fail').length;
  const short = rooms.filter((r) => statusOf(r).cls === 'short').length;
  const meta = [
    options.bakeId ? `bake ${e(options.bakeId)}` : '',
    options.generatedAt ? `generated ${e(options.generatedAt)}` : '',
    `${rooms.length} rooms`,
    `${short} with a shortfall`,
    `${failed} failed`,
    `${rooms.reduce((n, r) => n + withoutView(r.slotData?.slots ?? []), 0)} slots without a view`,
  ]
    .filter(Boolean)
    .join(' · ');
  const summary = rooms.map((room) => {
    const status = statusOf(room);
    const slots = room.slotData?.slots ?? [];
    return (
      `<tr><td class="num"><a href="#room-${room.id}">${room.id}</a></td><td>${e(room.title)}</td><td>${e(room.facts?.kind ?? '')}</td>` +
      `<td class="num">${room.slotData ? slots.length : '–'} / ${room.onchainSlots}</td>` +
      `<td class="num">${countOf(slots, 'authored')}</td><td class="num">${countOf(slots, 'generated')}</td>` +
      `<td class="num">${slots.filter((s) => s.flipped).length}</td><td class="num">${slots.filter((s) => s.ambiguous).length}</td>` +
      `<td>${room.changes ? e(describeSlotChanges(room.changes)) : ''}</td>` +
      `<td class="num">${room.slotData ? withoutView(slots) : ''}</td><td class="${status.cls}">${status.text}</td>` +
      `<td>${room.slotData ? `<a href="${viewUrl(room.id)}">3D view</a>` : ''}</td></tr>`
    );
  });
  const legend = LEGEND.map(
    ([category, text]) => `<span class="swatch" style="background:${SLOT_COLOURS[category]}"></span>${e(text)}`,
  ).join('');
  return [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8">',
    `<title>${e(title)}</title>`,
    `<style>${STYLE}</style></head><body>`,
    `<h1>${e(title)}</h1>`,
    `<p>${meta}</p>`,
    `<p class="legend">Legend:${legend}</p>`,
    `<table class="summary">${headerRow(SUMMARY_COLUMNS)}`,
    summary.join('\n'),
    '</table>',
    ...rendered.map(roomSection),
    '</body></html>',
    '',
  ].join('\n');
}
